package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/portable"
)

// benchConfig is what one benchmark run needs.
type benchConfig struct {
	c           common
	workload    string
	n           int
	producers   int
	concurrency int
	prefetch    int
	claimBatch  int
	mode        enqueueMode
	batchSize   int
	bodySize    int
	poll        time.Duration
	backends    []string
	stderr      io.Writer
}

// enqueueMode is how producers enqueue.
type enqueueMode int

const (
	modeSingle enqueueMode = iota // Enqueue
	modeAsync                     // EnqueueAsync
	modeBatch                     // EnqueueBatch
)

func (m enqueueMode) String() string { return [...]string{"single", "async", "batch"}[m] }

// runBench implements "delayq bench": the workloads of DESIGN.md section 8
// in one process, printing one line per run.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("bench", "--workload enqueue|burst|spread|all [--n N] [flags]",
		"Runs a benchmark workload against --addr and prints one line per run:\n"+
			"  enqueue: n messages (256-byte bodies, due in 1 h) from --producers goroutines,\n"+
			"           with single Enqueue calls, single EnqueueAsync calls (--async) or\n"+
			"           EnqueueBatch (--batch);\n"+
			"  burst:   n messages all due at one instant, consumers running before it:\n"+
			"           drain rate from that instant and lateness (handler start - due);\n"+
			"  spread:  n messages due evenly over 10 s, enqueued at least 2 s ahead: lateness.\n"+
			"Handlers are no-ops. Each run uses a fresh topic (bench-<workload>-<random>) and\n"+
			"deletes what it leaves. --backends lists the Redis servers behind a proxy (or the\n"+
			"server itself) to measure used memory per queued message there (INFO memory is sent\n"+
			"to those backends only, never to --addr).",
		stdout)
	cfg := benchConfig{stderr: stderr}
	fs := cmd.fs
	fs.StringVar(&cfg.workload, "workload", "all", "`workload`: enqueue, burst, spread or all")
	fs.IntVar(&cfg.n, "n", 0, "`messages` per run (default: enqueue 100000, burst 20000, spread 5000)")
	fs.IntVar(&cfg.producers, "producers", 16, "producer `goroutines`")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "consumer handlers run at once")
	fs.IntVar(&cfg.prefetch, "prefetch", 0, "messages a consumer may claim beyond its free handlers (0: the library's default)")
	fs.IntVar(&cfg.claimBatch, "claim-batch", 0, "ids a consumer claims per partition and round trip (0: the library's default)")
	batch := fs.Bool("batch", false, "enqueue with EnqueueBatch instead of single calls")
	async := fs.Bool("async", false, "enqueue with single EnqueueAsync calls (the rate counts until every write is confirmed)")
	fs.IntVar(&cfg.batchSize, "batch-size", 256, "messages per EnqueueBatch call with --batch")
	fs.IntVar(&cfg.bodySize, "body", 256, "body `bytes`")
	backends := fs.String("backends", "", "comma-separated `host:port` list of the Redis servers to measure memory on")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the runs to `file` (go tool pprof reads it)")
	poll := durationFlag{d: delayq.DefaultPollInterval}
	fs.Var(&poll, "poll", "consumer poll interval (`duration`)")
	cmd.needsTopic = false // each run makes its own topic
	if err := cmd.parse(args); err != nil {
		return err
	}
	cfg.c, cfg.poll = cmd.c, poll.d
	for _, f := range []struct {
		name string
		v    int
	}{{"n", cfg.n}, {"producers", cfg.producers}, {"concurrency", cfg.concurrency}, {"prefetch", cfg.prefetch}, {"claim-batch", cfg.claimBatch}, {"batch-size", cfg.batchSize}, {"body", cfg.bodySize}} {
		if err := cmd.nonNegative(f.name, int64(f.v)); err != nil {
			return err
		}
	}
	if cfg.producers == 0 || cfg.concurrency == 0 || cfg.batchSize == 0 {
		return cmd.usageErr("--producers, --concurrency and --batch-size must be positive")
	}
	switch {
	case *batch && *async:
		return cmd.usageErr("--batch and --async exclude each other")
	case *batch:
		cfg.mode = modeBatch
	case *async:
		cfg.mode = modeAsync
	}
	if *backends != "" {
		cfg.backends = strings.Split(*backends, ",")
	}
	var workloads []string
	switch cfg.workload {
	case "all":
		workloads = []string{"enqueue", "burst", "spread"}
	case "enqueue", "burst", "spread":
		workloads = []string{cfg.workload}
	default:
		return cmd.usageErr("invalid value %q for flag --workload: want enqueue, burst, spread or all", cfg.workload)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", *cpuprofile, err)
		}
		defer pprof.StopCPUProfile()
	}
	for _, w := range workloads {
		run := cfg
		run.workload = w
		var line string
		var err error
		switch w {
		case "enqueue":
			line, err = benchEnqueue(ctx, run)
		case "burst":
			line, err = benchBurst(ctx, run)
		case "spread":
			line, err = benchSpread(ctx, run)
		}
		if err != nil {
			return fmt.Errorf("bench %s: %w", w, err)
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

func (cfg benchConfig) count(def int) int {
	if cfg.n > 0 {
		return cfg.n
	}
	return def
}

func (cfg benchConfig) client(topic string) (*delayq.Client, error) {
	c := cfg.c
	c.topic = topic
	return c.client(cfg.stderr)
}

func benchTopic(workload string) string {
	return "bench-" + workload + "-" + strings.ToLower(delayq.NewID(time.Now())[20:])
}

func (cfg benchConfig) body() []byte {
	b := make([]byte, cfg.bodySize)
	rand.Read(b)
	return b
}

// usedMemory sums used_memory over the backends (0 without --backends).
func (cfg benchConfig) usedMemory(ctx context.Context) (int64, error) {
	var total int64
	for _, b := range cfg.backends {
		m, err := portable.BackendUsedMemory(ctx, strings.TrimSpace(b), cfg.c.password)
		if err != nil {
			return 0, err
		}
		total += m
	}
	return total, nil
}

// produce enqueues msgs from cfg.producers goroutines and returns the time
// it took.
func produce(ctx context.Context, cfg benchConfig, c *delayq.Client, msgs []delayq.Message) (time.Duration, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	var wg, writes sync.WaitGroup
	written := func(_ string, err error) {
		if err != nil {
			fail(err)
		}
		writes.Done()
	}
	start := time.Now()
	for range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := 1
			if cfg.mode == modeBatch {
				step = cfg.batchSize
			}
			for {
				lo := int(next.Add(int64(step))) - step
				if lo >= len(msgs) || ctx.Err() != nil {
					return
				}
				switch cfg.mode {
				case modeAsync:
					writes.Add(1)
					if err := c.EnqueueAsync(ctx, msgs[lo], written); err != nil {
						writes.Done()
						fail(err)
						return
					}
					continue
				case modeSingle:
					if _, err := c.Enqueue(ctx, msgs[lo]); err != nil {
						fail(err)
						return
					}
					continue
				}
				res, err := c.EnqueueBatch(ctx, msgs[lo:min(lo+step, len(msgs))])
				if err != nil {
					fail(err)
					return
				}
				for _, r := range res {
					if r.Err != nil {
						fail(r.Err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	writes.Wait()
	return time.Since(start), firstErr
}

func benchEnqueue(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(100000)
	topic := benchTopic("enqueue")
	c, err := cfg.client(topic)
	if err != nil {
		return "", err
	}
	defer c.Close()
	body := cfg.body()
	due := time.Now().Add(time.Hour)
	msgs := make([]delayq.Message, n)
	for i := range msgs {
		msgs[i] = delayq.Message{Topic: topic, ID: fmt.Sprintf("e%08d", i), Body: body, At: due}
	}
	if _, err := c.Stats(ctx, topic); err != nil { // creates the topic: not part of the timing
		return "", err
	}
	mem0, err := cfg.usedMemory(ctx)
	if err != nil {
		return "", err
	}
	cmds0 := c.Commands()
	took, err := produce(ctx, cfg, c, msgs)
	if err != nil {
		return "", err
	}
	cmds := float64(c.Commands()-cmds0) / float64(n)
	mode := cfg.mode.String()
	if cfg.mode == modeBatch {
		mode += fmt.Sprintf("-%d", cfg.batchSize)
	}
	line := fmt.Sprintf("workload=enqueue n=%d producers=%d mode=%s rate=%.0f cmds_per_msg=%.2f",
		n, cfg.producers, mode, float64(n)/took.Seconds(), cmds)
	if len(cfg.backends) > 0 {
		mem1, err := cfg.usedMemory(ctx)
		if err != nil {
			return "", err
		}
		line += fmt.Sprintf(" mem_per_msg=%.0f", float64(mem1-mem0)/float64(n))
	}
	return line, cleanup(ctx, cfg, c, topic, msgs)
}

// cleanup deletes what a run left queued.
func cleanup(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string, msgs []delayq.Message) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(msgs) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				c.Delete(ctx, topic, msgs[i].ID)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// lateness records handler start - due of every delivery.
type lateness struct {
	mu     sync.Mutex
	lates  []time.Duration
	last   time.Time
	seen   map[string]bool
	dups   int
	target int
	done   chan struct{}
}

func newLateness(n int) *lateness {
	return &lateness{seen: make(map[string]bool, n), target: n, done: make(chan struct{})}
}

func (l *lateness) handle(ctx context.Context, d *delayq.Delivery) error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[d.ID] {
		l.dups++
		return nil
	}
	l.seen[d.ID] = true
	l.lates = append(l.lates, now.Sub(d.Due))
	l.last = now
	if len(l.lates) == l.target {
		close(l.done)
	}
	return nil
}

func (l *lateness) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.lates)
	slices.Sort(s)
	q := func(p float64) float64 {
		if len(s) == 0 {
			return math.NaN()
		}
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return float64(s[max(i, 0)]) / float64(time.Millisecond)
	}
	return fmt.Sprintf("lateness_ms p50=%.1f p99=%.1f max=%.1f", q(0.50), q(0.99), q(1))
}

// consume runs a consumer of topic with a no-op handler until stop.
func consume(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string, l *lateness) (*delayq.Consumer, func(), error) {
	k, err := c.NewConsumer(delayq.ConsumerOptions{
		Topic: topic, Concurrency: cfg.concurrency, Prefetch: cfg.prefetch, ClaimBatch: cfg.claimBatch,
		PollInterval: cfg.poll,
	}, l.handle)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		k.Shutdown(sctx)
		<-done
	}
	// Wait until it owns every partition, so the run measures delivery.
	for len(k.Stats().Owned) < c.Partitions() {
		select {
		case <-ctx.Done():
			stop()
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return k, stop, nil
}

func waitDone(ctx context.Context, l *lateness, timeout time.Duration) error {
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		l.mu.Lock()
		defer l.mu.Unlock()
		return fmt.Errorf("only %d of %d messages delivered after %v", len(l.lates), l.target, timeout)
	}
}

// delivery is a running burst or spread: a producer client, a consumer
// client with its consumer running, and the lateness of each delivery.
type delivery struct {
	topic      string
	prod, cons *delayq.Client
	l          *lateness
	stop       func()
}

func startDelivery(ctx context.Context, cfg benchConfig, n int) (*delivery, error) {
	r := &delivery{topic: benchTopic(cfg.workload), l: newLateness(n)}
	var err error
	if r.prod, err = cfg.client(r.topic); err != nil {
		return nil, err
	}
	if r.cons, err = cfg.client(r.topic); err != nil {
		r.prod.Close()
		return nil, err
	}
	if _, r.stop, err = consume(ctx, cfg, r.cons, r.topic, r.l); err != nil {
		r.prod.Close()
		r.cons.Close()
		return nil, err
	}
	return r, nil
}

func (r *delivery) close() {
	r.stop()
	r.cons.Close()
	r.prod.Close()
}

// enqueue sends n messages due at due(i) with the batch API.
func (r *delivery) enqueue(ctx context.Context, cfg benchConfig, n int, prefix string, due func(i int) time.Time) error {
	body := cfg.body()
	msgs := make([]delayq.Message, n)
	for i := range msgs {
		msgs[i] = delayq.Message{Topic: r.topic, ID: fmt.Sprintf("%s%08d", prefix, i), Body: body, At: due(i)}
	}
	batch := cfg
	batch.mode = modeBatch
	_, err := produce(ctx, batch, r.prod, msgs)
	return err
}

func benchBurst(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(20000)
	r, err := startDelivery(ctx, cfg, n)
	if err != nil {
		return "", err
	}
	defer r.close()
	// All due at T, far enough ahead for the enqueue to finish before it.
	T := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond).Truncate(time.Millisecond)
	if err := r.enqueue(ctx, cfg, n, "b", func(int) time.Time { return T }); err != nil {
		return "", err
	}
	if time.Now().After(T) {
		return "", fmt.Errorf("enqueueing %d messages took past their due time; use a smaller --n", n)
	}
	cmds0 := r.cons.Commands()
	if err := waitDone(ctx, r.l, time.Until(T)+time.Duration(n)*time.Millisecond+30*time.Second); err != nil {
		return "", err
	}
	drain := r.l.last.Sub(T)
	cmds := float64(r.cons.Commands()-cmds0) / float64(n)
	return fmt.Sprintf("workload=burst n=%d drain_rate=%.0f %s cmds_per_msg=%.2f duplicates=%d",
		n, float64(n)/drain.Seconds(), r.l.summary(), cmds, r.l.dups), nil
}

func benchSpread(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(5000)
	r, err := startDelivery(ctx, cfg, n)
	if err != nil {
		return "", err
	}
	defer r.close()
	start := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond)
	if err := r.enqueue(ctx, cfg, n, "s", func(i int) time.Time {
		return start.Add(time.Duration(i) * 10 * time.Second / time.Duration(n))
	}); err != nil {
		return "", err
	}
	cmds0 := r.cons.Commands()
	if err := waitDone(ctx, r.l, time.Until(start)+40*time.Second); err != nil {
		return "", err
	}
	cmds := float64(r.cons.Commands()-cmds0) / float64(n)
	return fmt.Sprintf("workload=spread n=%d %s cmds_per_msg=%.2f duplicates=%d", n, r.l.summary(), cmds, r.l.dups), nil
}
