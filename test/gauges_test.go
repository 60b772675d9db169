package test

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// topicGauges are the fleet-wide gauges a worker exports per topic.
var topicGauges = []string{
	"delayq_scheduled", "delayq_due_now", "delayq_lag_seconds", "delayq_inflight", "delayq_dead_messages",
	"delayq_consumers", "delayq_partitions", "delayq_rate_limit", "delayq_concurrency_limit", "delayq_paused",
}

// TestGaugesMatchStats runs two "delayq worker" processes on one topic
// through Twemproxy while "delayq sub" consumers join and leave (one
// stopped, one killed), the topic is paused, limited and resumed. At each
// step the fleet-wide gauges on the /metrics of both workers equal what
// "delayq stats --json" reads: compared in snapshots taken between two
// stats runs that agree, the lag between theirs. While a backlog drains
// under a rate limit, each worker's due-now and scheduled gauges lie
// between the stats read before and after it (they only fall then).
func TestGaugesMatchStats(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 2})
	addr, topic := env.Proxy, "e2e.gauges"
	hooks := gStartHooks(t)
	dir := t.TempDir()
	var workers []*gWorker
	for i := range 2 {
		listen := wFreeAddr(t)
		cfg := filepath.Join(dir, fmt.Sprintf("worker%d.toml", i))
		wWriteFile(t, cfg, fmt.Sprintf(`
[redis]
addr = %q

[worker]
id = "gauges-w%d"
lease = "2s"
poll_interval = "200ms"

[http]
listen = %q
token = "t"

[[topic]]
name = %q
partitions = 8
[topic.handler]
type = "http"
url = %q
`, addr, i, listen, topic, hooks))
		w := &gWorker{wWorker: wStartWorker(t, "--config", cfg), api: &wAPI{t: t, base: "http://" + listen, token: "t"}}
		workers = append(workers, w)
	}
	for i, w := range workers {
		waitFor(t, 20*time.Second, func() bool {
			code, _ := w.api.do("GET", "/readyz", "", false)
			return code == http.StatusOK || w.exited()
		}, "worker %d ready", i)
		if w.exited() {
			t.Fatalf("worker %d exited: %v\nstderr: %s", i, w.err, clip(w.stderr.String()))
		}
	}
	snaps := 0
	match := func(what string, want func(ts topicStats) bool) topicStats {
		t.Helper()
		snaps++
		return gMatch(t, addr, topic, workers, what, want)
	}

	// Flowing: messages due now are delivered (those whose body begins
	// "die" fail once and are dead), those due in an hour stay.
	var in strings.Builder
	for i := range 40 {
		fmt.Fprintf(&in, `{"id":"later-%02d","body":"later","delay":"1h"}`+"\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&in, `{"id":"now-%02d","body":"ok"}`+"\n", i)
	}
	for i := range 3 {
		fmt.Fprintf(&in, `{"id":"die-%d","body":"die","max_attempts":1}`+"\n", i)
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	match("2 workers, the due messages delivered", func(ts topicStats) bool {
		return ts.Scheduled == 40 && ts.DueNow == 0 && ts.InFlight == 0 && ts.Dead == 3 && ts.Consumers == 2 && ts.Count == 8
	})

	// Paused and limited: messages falling due wait. They are sent once
	// both workers follow the pause, so that none is claimed and put back
	// between two stats reads that agree.
	mustCLI(t, "", "pause", "--addr", addr, "--topic", topic)
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--rate", "20/s", "--concurrency", "4")
	for i, w := range workers {
		waitFor(t, 5*time.Second, func() bool { return strings.Contains(w.stderr.String(), `msg="topic paused"`) }, "worker %d follows the pause", i)
	}
	in.Reset()
	for i := range 60 {
		fmt.Fprintf(&in, `{"id":"held-%02d","body":"ok"}`+"\n", i)
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	ts := match("paused, 60 due", func(ts topicStats) bool {
		return ts.DueNow == 60 && ts.Scheduled == 100 && ts.Pause.Paused && ts.Limits != nil && ts.Limits.Concurrency == 4
	})
	if ts.LagMS <= 0 {
		t.Errorf("paused with 60 due: lag %d ms, want > 0", ts.LagMS)
	}

	// Consumers join and leave.
	l := newLedger()
	subArgs := []string{"--addr", addr, "--topic", topic, "--lease", "2s", "--fail", "^die", "--max-attempts", "1"}
	subs := []*sub{startSub(t, l, 0, subArgs...), startSub(t, l, 1, subArgs...)}
	match("2 subs joined", func(ts topicStats) bool { return ts.Consumers == 4 && ts.DueNow == 60 })
	if code := subs[0].stop(t, 15*time.Second); code != 0 {
		t.Errorf("sub 0 exit %d after SIGTERM\nstderr: %s", code, clip(subs[0].stderr.String()))
	}
	match("a sub left", func(ts topicStats) bool { return ts.Consumers == 3 && ts.DueNow == 60 })
	_ = subs[1].cmd.Process.Kill()
	subs[1].wait(t, 10*time.Second)
	match("a sub killed, its heartbeat expired", func(ts topicStats) bool { return ts.Consumers == 2 && ts.DueNow == 60 })
	subs = append(subs, startSub(t, l, 2, subArgs...))
	match("another sub joined", func(ts topicStats) bool { return ts.Consumers == 3 && ts.DueNow == 60 })

	// Resumed: 60 messages drain at 20/s. No message falls due and no
	// consumer leaves meanwhile, so due-now and scheduled only fall: each
	// scrape lies between the stats read around it.
	mustCLI(t, "", "resume", "--addr", addr, "--topic", topic)
	samples, moving := 0, 0
	for {
		before := stats(t, addr, topic)
		gs := make([]map[string]float64, len(workers))
		for i, w := range workers {
			gs[i] = gScrape(t, w, topic)
		}
		after := stats(t, addr, topic)
		samples++
		if before.DueNow != after.DueNow {
			moving++
		}
		for i, g := range gs {
			for _, f := range []struct {
				name          string
				before, after int64
			}{
				{"delayq_due_now", before.DueNow, after.DueNow},
				{"delayq_scheduled", before.Scheduled, after.Scheduled},
			} {
				if v := g[f.name]; v > float64(f.before) || v < float64(f.after) {
					t.Errorf("draining: worker %d %s = %v, not between the stats read before (%d) and after (%d)", i, f.name, v, f.before, f.after)
				}
			}
		}
		if after.DueNow == 0 || samples > 200 {
			break
		}
	}
	if moving == 0 {
		t.Errorf("no sample of %d saw the backlog fall: the drain was not observed", samples)
	}
	match("drained", func(ts topicStats) bool {
		return ts.DueNow == 0 && ts.InFlight == 0 && ts.Scheduled == 40 && ts.Dead == 3 && ts.Consumers == 3
	})
	if n := subs[2].stop(t, 15*time.Second); n != 0 {
		t.Errorf("sub 2 exit %d after SIGTERM", n)
	}
	testenv.Figure(t, "scenario=gauges workers=2 snapshots=%d drain_samples=%d drain_samples_moving=%d", snaps, samples, moving)
}

// gWorker is a running worker and its HTTP API.
type gWorker struct {
	*wWorker
	api *wAPI
}

// gStartHooks starts a webhook receiver that answers 500 to bodies
// beginning "die" and 204 to the rest, and returns its URL.
func gStartHooks(t *testing.T) string {
	t.Helper()
	ln := wFreeAddr(t)
	srv := &http.Server{Addr: ln, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 3)
		n, _ := r.Body.Read(b)
		if string(b[:n]) == "die" {
			http.Error(w, "told to fail", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	t.Cleanup(func() { srv.Close(); <-errc })
	return "http://" + ln + "/hooks"
}

// gScrape reads the topic gauges of w's /metrics.
func gScrape(t *testing.T, w *gWorker, topic string) map[string]float64 {
	t.Helper()
	code, body := w.api.do("GET", "/metrics", "", false)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, clip(body))
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), `{topic="`+topic+`"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", sc.Text(), err)
		}
		out[name] = v
	}
	for _, name := range topicGauges {
		if _, ok := out[name]; !ok {
			t.Fatalf("/metrics lacks %s{topic=%q}:\n%s", name, topic, clip(body))
		}
	}
	return out
}

// gMatch waits until "delayq stats --json" satisfies want and two runs of
// it around a scrape of every worker agree, then checks that each
// worker's gauges equal those stats, its lag between the two runs'. It
// returns the stats.
func gMatch(t *testing.T, addr, topic string, workers []*gWorker, what string, want func(ts topicStats) bool) topicStats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for tries := 1; ; tries++ {
		var before topicStats
		waitFor(t, time.Until(deadline), func() bool { before = stats(t, addr, topic); return want(before) }, "%s: stats %+v", what, &before)
		gs := make([]map[string]float64, len(workers))
		for i, w := range workers {
			gs[i] = gScrape(t, w, topic)
		}
		after := stats(t, addr, topic)
		f := fleetFigures(t, before)
		if f != fleetFigures(t, after) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the stats kept changing across a scrape (%d tries): %+v then %+v", what, tries, f, fleetFigures(t, after))
			}
			continue
		}
		for i, g := range gs {
			for name, v := range map[string]float64{
				"delayq_scheduled": float64(f.scheduled), "delayq_due_now": float64(f.dueNow), "delayq_inflight": float64(f.inFlight),
				"delayq_dead_messages": float64(f.dead), "delayq_consumers": float64(f.consumers), "delayq_partitions": float64(f.count),
				"delayq_rate_limit": f.rate, "delayq_concurrency_limit": float64(f.concurrency), "delayq_paused": f.paused,
			} {
				if g[name] != v {
					t.Errorf("%s: worker %d %s = %v, stats says %v", what, i, name, g[name], v)
				}
			}
			if lag := int64(math.Round(g["delayq_lag_seconds"] * 1000)); lag < before.LagMS || lag > after.LagMS {
				t.Errorf("%s: worker %d lag %d ms, not between the stats read before (%d ms) and after (%d ms)", what, i, lag, before.LagMS, after.LagMS)
			}
		}
		t.Logf("%s: gauges of both workers = stats %+v, lag %d..%d ms (%d tries)", what, f, before.LagMS, after.LagMS, tries)
		return before
	}
}

// fleet is the figures of stats that stand still while nothing happens
// (the lag grows with the clock).
type fleet struct {
	scheduled, dueNow, inFlight, dead int64
	consumers, count, concurrency     int
	rate, paused                      float64
}

func fleetFigures(t *testing.T, ts topicStats) fleet {
	t.Helper()
	f := fleet{scheduled: ts.Scheduled, dueNow: ts.DueNow, inFlight: ts.InFlight, dead: ts.Dead, consumers: ts.Consumers, count: ts.Count}
	if ts.Pause.Paused {
		f.paused = 1
	}
	if ts.Limits != nil {
		f.concurrency = ts.Limits.Concurrency
		if ts.Limits.Rate != "" {
			r, err := strconv.ParseFloat(strings.TrimSuffix(ts.Limits.Rate, "/s"), 64)
			if err != nil {
				t.Fatalf("stats --json: rate %q: %v", ts.Limits.Rate, err)
			}
			f.rate = r
		}
	}
	return f
}
