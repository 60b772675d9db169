package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/delayq/delayq/internal/portable"
)

// benchBurst is the burst workload: n messages (default 20000) all due at
// one instant, the consumer running before it. The line gives the drain
// rate from that instant, the lateness (handler start - due) and the
// consumer's commands per message.
func benchBurst(ctx context.Context, cfg benchConfig) (string, error) {
	if cfg.consumerProcs > 0 {
		return benchBurstProcs(ctx, cfg, cfg.consumerProcs)
	}
	n := cfg.count(20000)
	return withDelivery(ctx, cfg, n, func(r *delivery) (string, error) {
		// All due at T, far enough ahead for the enqueue to finish before it.
		T := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond).Truncate(time.Millisecond)
		if err := r.enqueue(ctx, cfg, n, "b", at(T)); err != nil {
			return "", err
		}
		if time.Now().After(T) {
			return "", fmt.Errorf("enqueueing %d messages took past their due time; use a smaller --n", n)
		}
		cmds0 := r.cons.Commands()
		cpu0, err := drainCPU(ctx, cfg, T)
		if err != nil {
			return "", err
		}
		if err := waitDone(ctx, r.l, time.Until(T)+time.Duration(n)*time.Millisecond+30*time.Second); err != nil {
			return "", err
		}
		cpu1, err := drainCPU(ctx, cfg, time.Time{})
		if err != nil {
			return "", err
		}
		drain := r.l.lastStart().Sub(T)
		cmds := float64(r.cons.Commands()-cmds0) / float64(n)
		return fmt.Sprintf("workload=burst n=%d drain_rate=%.0f %s cmds_per_msg=%.2f duplicates=%d %s",
			n, float64(n)/drain.Seconds(), r.l.summary(), cmds, r.l.dups.Load(), cpu1.since(cpu0, n)), nil
	})
}

// benchBurstProcs is the burst workload with its consumers in procs
// processes of their own: this binary's "delayq sub", each writing its
// JSON lines to a file. The lateness is each line's delivered_at minus
// its due, both read on this machine's clock, and the drain ends at the
// last delivered_at. The bench process only enqueues, then waits.
func benchBurstProcs(ctx context.Context, cfg benchConfig, procs int) (line string, err error) {
	n := cfg.count(20000)
	topic := benchTopic(cfg.workload)
	prod, err := cfg.client(topic)
	if err != nil {
		return "", err
	}
	defer prod.Close()
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, topic)) }()
	dir, err := os.MkdirTemp("", "delayq-burst-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	var subs []*exec.Cmd
	exited := make(chan error, procs) // each sub's Wait, as it returns
	defer func() {
		for _, s := range subs {
			s.Process.Signal(syscall.SIGTERM)
		}
		for range subs {
			<-exited
		}
	}()
	// alive fails once a sub has exited before the run ended.
	alive := func() error {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			return fmt.Errorf("a delayq sub exited before the run ended: %v", err)
		default:
			return nil
		}
	}
	files := make([]string, procs)
	for i := range procs {
		files[i] = filepath.Join(dir, fmt.Sprintf("sub%d.jsonl", i))
		out, err := os.Create(files[i])
		if err != nil {
			return "", err
		}
		args := []string{"sub", "--addr", cfg.c.addr, "--topic", topic,
			"--concurrency", strconv.Itoa(cfg.concurrency), "--prefetch", strconv.Itoa(cfg.prefetch)}
		if cfg.c.namespace != "" {
			args = append(args, "--namespace", cfg.c.namespace)
		}
		if cfg.c.cluster {
			args = append(args, "--cluster")
		}
		if cfg.c.partitions > 0 {
			args = append(args, "--partitions", strconv.Itoa(cfg.c.partitions))
		}
		if cfg.poll > 0 {
			args = append(args, "--poll", cfg.poll.String())
		}
		s := exec.CommandContext(ctx, self, args...)
		s.Stdout, s.Stderr = out, cfg.stderr
		if cfg.c.password != "" {
			s.Env = append(os.Environ(), "DELAYQ_PASSWORD="+cfg.c.password)
		}
		err = s.Start()
		out.Close()
		if err != nil {
			return "", err
		}
		subs = append(subs, s)
		go func() { exited <- s.Wait() }()
	}
	// Wait until the processes own every partition between them.
	for {
		st, err := prod.Inspector().Stats(ctx, topic)
		if err == nil && st.Count > 0 {
			owners, owned := map[string]bool{}, 0
			for _, p := range st.Partitions {
				if p.Partition < st.Count && p.Owner != "" {
					owners[p.Owner] = true
					owned++
				}
			}
			if owned == st.Count && len(owners) == min(procs, st.Count) {
				break
			}
		}
		if err := alive(); err != nil {
			return "", err
		}
		if err := waitFor(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
	T := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond).Truncate(time.Millisecond)
	if _, err := fill(ctx, cfg, prod, numbered(topic, "b", n, cfg.body(), at(T))); err != nil {
		return "", err
	}
	if time.Now().After(T) {
		return "", fmt.Errorf("enqueueing %d messages took past their due time; use a smaller --n", n)
	}
	l := newLateness(n)
	offsets := make([]int64, procs)
	deadline := time.Until(T) + time.Duration(n)*time.Millisecond + 30*time.Second
	for start := time.Now(); ; {
		if err := readDeliveries(l, files, offsets); err != nil {
			return "", err
		}
		if l.isDone() {
			break
		}
		if time.Since(start) > deadline {
			return "", fmt.Errorf("only %d of %d messages delivered after %v", l.got.Load(), n, deadline)
		}
		if err := alive(); err != nil {
			return "", err
		}
		if err := waitFor(ctx, 200*time.Millisecond); err != nil {
			return "", err
		}
	}
	drain := l.lastStart().Sub(T)
	return fmt.Sprintf("workload=burst n=%d consumer_procs=%d drain_rate=%.0f %s duplicates=%d",
		n, procs, float64(n)/drain.Seconds(), l.summary(), l.dups.Load()), nil
}

// readDeliveries records in l the lines the sub processes wrote to files
// since offsets (one a file), and moves each offset past its last whole
// line: each line is read once, however long the drain.
func readDeliveries(l *lateness, files []string, offsets []int64) error {
	for k, f := range files {
		b, err := readFrom(f, offsets[k])
		if err != nil {
			return err
		}
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break // a line being written
			}
			var d struct {
				ID          string    `json:"id"`
				Due         time.Time `json:"due"`
				DeliveredAt time.Time `json:"delivered_at"`
			}
			if err := json.Unmarshal(b[:i], &d); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			l.record(d.ID, d.Due, d.DeliveredAt)
			b = b[i+1:]
			offsets[k] += int64(i + 1)
		}
	}
	return nil
}

// readFrom returns the bytes of file f from offset off on.
func readFrom(f string, off int64) ([]byte, error) {
	fh, err := os.Open(f)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(fh)
}

// cpuAt is the CPU time this process and the backends (--backends) had
// used at one moment, and the process's allocations and collections.
type cpuAt struct {
	client, backends time.Duration
	mallocs          uint64
	gcs              uint32
	ok               bool
}

// drainCPU waits until at (if ahead) and reads the CPU time used so far.
func drainCPU(ctx context.Context, cfg benchConfig, at time.Time) (cpuAt, error) {
	if err := waitFor(ctx, time.Until(at)); err != nil {
		return cpuAt{}, err
	}
	client, ok := processCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := sumBackends(ctx, cfg, portable.BackendCPU)
	return cpuAt{client: client, backends: b, mallocs: ms.Mallocs, gcs: ms.NumGC, ok: ok}, err
}

// since formats what was used between c0 and c, per message of n: the
// client's CPU (client_cpu_us_per_msg: during a burst's drain, the
// consumer's), its allocations and collections, and with --backends the
// backends' CPU.
func (c cpuAt) since(c0 cpuAt, n int) string {
	if !c.ok || !c0.ok {
		return ""
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	s := fmt.Sprintf("client_cpu_us_per_msg=%.1f allocs_per_msg=%.1f gcs=%d",
		per(c.client-c0.client), float64(c.mallocs-c0.mallocs)/float64(n), c.gcs-c0.gcs)
	if c.backends > 0 {
		s += fmt.Sprintf(" backend_cpu_us_per_msg=%.1f", per(c.backends-c0.backends))
	}
	return s
}
