package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// The benchmarks render pages on the server for a topic of 64 partitions
// holding $DELAYQ_UI_BENCH_MESSAGES messages (default 100,000) due over
// the next hour, through Twemproxy; the target is under 300 ms a page.
//
//	go test -run '^$' -bench . ./internal/ui/

const benchNS, benchTopic = "uibench", "bench"

var benchSeed struct {
	once sync.Once
	err  error
}

// seedBench fills the benchmark topic once per process.
func seedBench(b *testing.B) {
	b.Helper()
	benchSeed.once.Do(func() {
		n := 100000
		if v, err := strconv.Atoi(os.Getenv("DELAYQ_UI_BENCH_MESSAGES")); err == nil && v > 0 {
			n = v
		}
		c, err := delayq.New(delayq.Options{Addr: proxyAddr, Namespace: benchNS, Partitions: 64})
		if err != nil {
			benchSeed.err = err
			return
		}
		defer c.Close()
		now := time.Now()
		body := make([]byte, 256)
		for i := 0; i < n && benchSeed.err == nil; i += 5000 {
			var msgs []delayq.Message
			for j := i; j < min(i+5000, n); j++ {
				msgs = append(msgs, delayq.Message{Topic: benchTopic, ID: fmt.Sprintf("bench-%07d", j), Body: body,
					At: now.Add(time.Minute + time.Duration(j)*time.Hour/time.Duration(n))})
			}
			_, benchSeed.err = c.SendBatch(b.Context(), msgs)
		}
		if st, err := c.Inspector().Stats(b.Context(), benchTopic); err != nil || st.Scheduled != int64(n) {
			benchSeed.err = fmt.Errorf("seeded %+v, %v; want %d scheduled", st, err, n)
		}
	})
	if benchSeed.err != nil {
		b.Fatal(benchSeed.err)
	}
}

// benchServer returns a dashboard of the benchmark's namespace, with a
// client of its own, both closed when b ends.
func benchServer(b *testing.B) *ui.Server {
	b.Helper()
	c, err := delayq.New(delayq.Options{Addr: proxyAddr, Namespace: benchNS, PoolSize: ui.DefaultPoolSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	srv, err := ui.New(ui.Options{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv
}

// benchPage renders path b.N times.
func benchPage(b *testing.B, path string) {
	seedBench(b)
	srv := benchServer(b)
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
		}
	}
}

func BenchmarkOverview(b *testing.B)      { benchPage(b, "/ui/") }
func BenchmarkTopicPage(b *testing.B)     { benchPage(b, "/ui/topics/"+benchTopic) }
func BenchmarkScheduledPage(b *testing.B) { benchPage(b, "/ui/topics/"+benchTopic+"/scheduled") }
func BenchmarkDeadPage(b *testing.B)      { benchPage(b, "/ui/topics/"+benchTopic+"/dead") }
func BenchmarkTopicLiveRegion(b *testing.B) {
	seedBench(b)
	srv := benchServer(b)
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/ui/topics/"+benchTopic, nil)
		req.Header.Set("X-Delayq-Fragment", "live")
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("live: %d", rec.Code)
		}
	}
}
