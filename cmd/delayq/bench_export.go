package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/portable"
)

// benchExport is the export workload: n messages (given ids, bodies of
// --body bytes, due in 1 h) written with SendBatch of --batch-size from
// --producers goroutines (the rate import is compared with), exported to
// a file without pacing, exported again with the default pacing, then
// imported from the file into a second topic, and deleted from the first
// as "delete --in" of the file does. The line gives each rate,
// the bench process's peak Go heap during the export and the import, and,
// with --backends, the CPU the backends spent during each export, as a
// share of one core summed over the backends. The topics are dropped at
// the end, whatever happened.
func benchExport(ctx context.Context, cfg benchConfig) (line string, err error) {
	n := cfg.count(1000000)
	src, dst := benchTopic("export"), benchTopic("import")
	c, err := cfg.client(src)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, src), dropTopic(ctx, cfg, dst)) }() // after Close
	defer c.Close()
	b := &exportBench{cfg: cfg, c: c, src: src, dst: dst, n: n, body: cfg.body(), due: time.Now().Add(time.Hour)}
	if err := b.fill(ctx); err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "delayq-bench-export-*.jsonl")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := b.exportFile(ctx, f); err != nil {
		return "", err
	}
	if err := b.exportPaced(ctx); err != nil {
		return "", err
	}
	if err := b.importFile(ctx, f); err != nil {
		return "", err
	}
	// The library's Import without JSON, from --producers goroutines as
	// the SendBatch fill: what the write path alone does.
	api := benchTopic("importapi")
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, api)) }()
	if err := b.importWithAPI(ctx, api); err != nil {
		return "", err
	}
	if err := b.deleteFile(ctx, f); err != nil {
		return "", err
	}
	return b.line(), nil
}

// exportBench is a run of the export workload: its client, the topic it
// exports (src) and the one it imports into (dst), its n messages (their
// body and due), and the figures its steps measured.
type exportBench struct {
	cfg      benchConfig
	c        *delayq.Client
	src, dst string
	n        int
	body     []byte
	due      time.Time

	filled    time.Duration // the SendBatch fill
	size      int64         // the file's bytes
	exported  benchPhaseStats
	paced     benchPhaseStats
	imported  benchPhaseStats
	importAPI time.Duration
	deleted   benchPhaseStats
}

// fill creates the source topic (not part of the timing) and writes the
// n messages to it with SendBatch.
func (b *exportBench) fill(ctx context.Context) error {
	if err := createTopic(ctx, b.cfg, b.c, b.src); err != nil {
		return err
	}
	var err error
	b.filled, err = fill(ctx, b.cfg, b.c, numbered(b.src, "x", b.n, b.body, at(b.due)))
	return err
}

// exportFile exports the source topic to f without pacing, checks that
// every message was, and notes the file's size.
func (b *exportBench) exportFile(ctx context.Context, f *os.File) error {
	var exported delayq.ExportStats
	var err error
	b.exported, err = benchPhase(ctx, b.cfg, func() error {
		var err error
		exported, err = b.c.Inspector().ExportJSON(ctx, b.src, f, delayq.ExportOptions{Pace: -1})
		return err
	})
	if err != nil {
		return err
	}
	if exported.Exported != b.n {
		return fmt.Errorf("exported %d messages, want %d", exported.Exported, b.n)
	}
	b.size, err = f.Seek(0, io.SeekCurrent)
	return err
}

// exportPaced exports the source topic again, with the default pacing,
// to nowhere.
func (b *exportBench) exportPaced(ctx context.Context) error {
	var err error
	b.paced, err = benchPhase(ctx, b.cfg, func() error {
		_, err := b.c.Inspector().ExportJSON(ctx, b.src, io.Discard, delayq.ExportOptions{})
		return err
	})
	return err
}

// importFile imports f, the export, into the second topic, and checks
// that every message was.
func (b *exportBench) importFile(ctx context.Context, f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var imported delayq.ImportStats
	var err error
	b.imported, err = benchPhase(ctx, b.cfg, func() error {
		var err error
		imported, err = b.c.Admin().ImportJSON(ctx, b.dst, f, delayq.ImportOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if imported.Imported != b.n {
		return fmt.Errorf("imported %d messages, want %d (%+v)", imported.Imported, b.n, imported)
	}
	return nil
}

// deleteFile deletes the messages of f, the export, from the source
// topic as "delete --in" does, and checks that none is left.
func (b *exportBench) deleteFile(ctx context.Context, f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var err error
	b.deleted, err = benchPhase(ctx, b.cfg, func() error {
		return deleteListed(ctx, b.c, b.src, f.Name(), io.Discard)
	})
	if err != nil {
		return err
	}
	if st, err := b.c.Inspector().Stats(ctx, b.src); err != nil || st.Scheduled+st.InFlight+st.Dead != 0 {
		return fmt.Errorf("after the delete, %s holds %+v (%v)", b.src, st, err)
	}
	return nil
}

// line is the workload's line: the rate of each step, the file's size,
// the peak heap of the export and of the import and, with --backends,
// the backends' CPU during each measured step.
func (b *exportBench) line() string {
	rate := func(d time.Duration) float64 { return float64(b.n) / d.Seconds() }
	line := fmt.Sprintf("workload=export n=%d body=%d enqueue_batch_given_rate=%.0f export_rate=%.0f paced_export_rate=%.0f import_rate=%.0f import_api_rate=%.0f delete_rate=%.0f file_mb=%.0f export_heap_mb=%.1f import_heap_mb=%.1f",
		b.n, b.cfg.bodySize, rate(b.filled), rate(b.exported.took), rate(b.paced.took), rate(b.imported.took), rate(b.importAPI), rate(b.deleted.took), float64(b.size)/(1<<20),
		float64(b.exported.heap)/(1<<20), float64(b.imported.heap)/(1<<20))
	if len(b.cfg.backends) > 0 {
		pct := func(p benchPhaseStats) float64 { return 100 * p.backendCPU.Seconds() / p.took.Seconds() }
		line += fmt.Sprintf(" export_backend_cpu_pct=%.0f paced_backend_cpu_pct=%.0f import_backend_cpu_pct=%.0f delete_backend_cpu_pct=%.0f",
			pct(b.exported), pct(b.paced), pct(b.imported), pct(b.deleted))
	}
	return line
}

// benchPhaseStats is what benchPhase measured of a phase: how long it
// took, the peak Go heap in use meanwhile and the CPU time the backends
// spent meanwhile.
type benchPhaseStats struct {
	took       time.Duration
	heap       uint64
	backendCPU time.Duration
}

// benchPhase runs fn and returns how long it took, the peak Go heap in
// use meanwhile (sampled every 10 ms, after a GC before it) and the CPU
// time the backends (--backends) spent meanwhile.
func benchPhase(ctx context.Context, cfg benchConfig, fn func() error) (benchPhaseStats, error) {
	runtime.GC()
	cpu0, err := sumBackends(ctx, cfg, portable.BackendCPU)
	if err != nil {
		return benchPhaseStats{}, err
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	err = fn()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return benchPhaseStats{}, err
	}
	cpu1, err := sumBackends(ctx, cfg, portable.BackendCPU)
	if err != nil {
		return benchPhaseStats{}, err
	}
	return benchPhaseStats{took: took, heap: peak.Load(), backendCPU: cpu1 - cpu0}, nil
}

// importWithAPI imports n messages like those of the export workload
// into topic with Admin.Import, batches of --batch-size from --producers
// goroutines, and notes the time it took (importAPI).
func (b *exportBench) importWithAPI(ctx context.Context, topic string) error {
	now := time.Now()
	msgs := make([]delayq.ExportedMessage, b.n)
	for i := range msgs {
		msgs[i] = delayq.ExportedMessage{ID: fmt.Sprintf("x%08d", i), State: delayq.StateScheduled, Due: b.due, Created: now, Updated: now, Body: b.body}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, b.cfg.producers)
	start := time.Now()
	for range b.cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(int64(b.cfg.batchSize))) - b.cfg.batchSize
				if lo >= b.n {
					return
				}
				res, err := b.c.Admin().Import(ctx, topic, msgs[lo:min(lo+b.cfg.batchSize, b.n)])
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return err
	default:
	}
	b.importAPI = took
	return nil
}
