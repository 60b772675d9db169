package delayq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// The hot paths against a real redis-server (and through Twemproxy):
//
//	go test -run '^$' -bench . -benchtime 20000x .

func benchTargets(b *testing.B, f func(b *testing.B, addr string)) {
	env := testenv.Start(b, testenv.Options{Backends: 2})
	for _, tg := range env.Targets() {
		b.Run(tg.Name, func(b *testing.B) { f(b, tg.Addr) })
	}
}

func benchClient(b *testing.B, addr string) *Client {
	c, err := New(Options{Addr: addr, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

var benchSeq atomic.Int64

// BenchmarkEnqueue: single calls from parallel goroutines (coalesced).
func BenchmarkEnqueue(b *testing.B) {
	benchTargets(b, func(b *testing.B, addr string) {
		c := benchClient(b, addr)
		topic := fmt.Sprintf("be%d", benchSeq.Add(1))
		body := make([]byte, 256)
		at := time.Now().Add(time.Hour)
		var n atomic.Int64
		b.SetParallelism(8) // 16 producers on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := fmt.Sprintf("m%d", n.Add(1))
				if _, err := c.Enqueue(context.Background(), Message{Topic: topic, ID: id, Body: body, At: at}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(c.Commands())/float64(b.N), "cmds/msg")
	})
}

// BenchmarkEnqueueAsync: single EnqueueAsync calls from parallel
// goroutines, timed until every callback came.
func BenchmarkEnqueueAsync(b *testing.B) {
	benchTargets(b, func(b *testing.B, addr string) {
		c := benchClient(b, addr)
		topic := fmt.Sprintf("ba%d", benchSeq.Add(1))
		body := make([]byte, 256)
		at := time.Now().Add(time.Hour)
		var n atomic.Int64
		var written sync.WaitGroup
		done := func(_ string, err error) {
			if err != nil {
				b.Error(err)
			}
			written.Done()
		}
		b.SetParallelism(8) // 16 producers on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := fmt.Sprintf("m%d", n.Add(1))
				written.Add(1)
				if err := c.EnqueueAsync(context.Background(), Message{Topic: topic, ID: id, Body: body, At: at}, done); err != nil {
					b.Error(err)
					written.Done()
					return
				}
			}
		})
		written.Wait()
		b.ReportMetric(float64(c.Commands())/float64(b.N), "cmds/msg")
	})
}

// BenchmarkEnqueueBatch: batches of 256.
func BenchmarkEnqueueBatch(b *testing.B) {
	benchTargets(b, func(b *testing.B, addr string) {
		c := benchClient(b, addr)
		topic := fmt.Sprintf("bb%d", benchSeq.Add(1))
		body := make([]byte, 256)
		at := time.Now().Add(time.Hour)
		msgs := make([]Message, 256)
		b.ResetTimer()
		for i := 0; i < b.N; i += len(msgs) {
			for j := range msgs {
				msgs[j] = Message{Topic: topic, ID: fmt.Sprintf("m%d", i+j), Body: body, At: at}
			}
			if _, err := c.EnqueueBatch(context.Background(), msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(c.Commands())/float64(b.N), "cmds/msg")
	})
}

// BenchmarkDeliver: enqueue b.N due messages, then time a consumer
// draining them with a no-op handler (claims, record reads, acks).
func BenchmarkDeliver(b *testing.B) {
	benchTargets(b, func(b *testing.B, addr string) {
		c := benchClient(b, addr)
		topic := fmt.Sprintf("bd%d", benchSeq.Add(1))
		body := make([]byte, 256)
		var msgs []Message
		for i := range b.N {
			msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("m%d", i), Body: body})
			if len(msgs) == 512 || i == b.N-1 {
				if _, err := c.EnqueueBatch(context.Background(), msgs); err != nil {
					b.Fatal(err)
				}
				msgs = msgs[:0]
			}
		}
		var got atomic.Int64
		done := make(chan struct{})
		k, err := c.NewConsumer(ConsumerOptions{Topic: topic, Concurrency: 32, PollInterval: 100 * time.Millisecond},
			func(context.Context, *Delivery) error {
				if got.Add(1) == int64(b.N) {
					close(done)
				}
				return nil
			})
		if err != nil {
			b.Fatal(err)
		}
		cmds0 := c.Commands()
		b.ResetTimer()
		go k.Run(context.Background())
		<-done
		b.StopTimer()
		b.ReportMetric(float64(c.Commands()-cmds0)/float64(b.N), "cmds/msg")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Shutdown(ctx)
	})
}
