package delayq

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A consumer's start and stop are a few INFO lines, not two per
// partition: per-partition events are logged at DEBUG.
func TestConsumerLogsSummaries(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	const P = 16
	c := newClient(t, env.Backends[0], Options{Partitions: P, Logger: log})
	k, err := c.NewConsumer(ConsumerOptions{Topic: "quiet"}, func(context.Context, *Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(context.Background()) }()
	waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Logf("%d lines:\n%s", len(lines), out.String())
	if len(lines) > 8 {
		t.Errorf("a consumer of %d partitions logged %d lines at INFO for a start and a stop, want a few:\n%s", P, len(lines), out.String())
	}
	if !strings.Contains(out.String(), "partitions acquired") {
		t.Errorf("no summary of the partitions acquired:\n%s", out.String())
	}
}
