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
// --body bytes, due in 1 h) written with EnqueueBatch of --batch-size from
// --producers goroutines (the rate import is compared with), exported to
// a file without pacing, exported again with the default pacing, then
// imported from the file into a second topic, and deleted from the first
// as "delete --in" of the file does. The line gives each rate,
// the bench process's peak Go heap during the export and the import, and,
// with --backends, the CPU the backends spent during each export, as a
// share of one core summed over the backends.
func benchExport(ctx context.Context, cfg benchConfig) (line string, err error) {
	n := cfg.count(1000000)
	src, dst := benchTopic("export"), benchTopic("import")
	c, err := cfg.client(src)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, src), dropTopic(ctx, cfg, dst)) }() // after Close
	defer c.Close()
	body := cfg.body()
	due := time.Now().Add(time.Hour)
	if err := createTopic(ctx, cfg, c, src); err != nil { // not part of the timing
		return "", err
	}
	filled, err := fill(ctx, cfg, c, numbered(src, "x", n, body, at(due)))
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "delayq-bench-export-*.jsonl")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()

	var exported delayq.ExportStats
	exportTook, exportHeap, exportCPU, err := benchPhase(ctx, cfg, func() error {
		var err error
		exported, err = c.ExportJSON(ctx, src, f, delayq.ExportOptions{Pace: -1})
		return err
	})
	if err != nil {
		return "", err
	}
	if exported.Exported != n {
		return "", fmt.Errorf("exported %d messages, want %d", exported.Exported, n)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", err
	}
	pacedTook, _, pacedCPU, err := benchPhase(ctx, cfg, func() error {
		_, err := c.ExportJSON(ctx, src, io.Discard, delayq.ExportOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	var imported delayq.ImportStats
	importTook, importHeap, importCPU, err := benchPhase(ctx, cfg, func() error {
		var err error
		imported, err = c.ImportJSON(ctx, dst, f, delayq.ImportOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	if imported.Imported != n {
		return "", fmt.Errorf("imported %d messages, want %d (%+v)", imported.Imported, n, imported)
	}
	// The library's Import without JSON, from --producers goroutines as
	// the EnqueueBatch fill: what the write path alone does.
	api := benchTopic("importapi")
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, api)) }()
	apiTook, err := benchImportAPI(ctx, cfg, c, api, n, body, due)
	if err != nil {
		return "", err
	}
	// delete --in of the export, from the source topic.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	deleteTook, _, deleteCPU, err := benchPhase(ctx, cfg, func() error {
		return deleteListed(ctx, c, src, f.Name(), io.Discard)
	})
	if err != nil {
		return "", err
	}
	if st, err := c.Stats(ctx, src); err != nil || st.Scheduled+st.InFlight+st.Dead != 0 {
		return "", fmt.Errorf("after the delete, %s holds %+v (%v)", src, st, err)
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	line = fmt.Sprintf("workload=export n=%d body=%d enqueue_batch_given_rate=%.0f export_rate=%.0f paced_export_rate=%.0f import_rate=%.0f import_api_rate=%.0f delete_rate=%.0f file_mb=%.0f export_heap_mb=%.1f import_heap_mb=%.1f",
		n, cfg.bodySize, rate(filled), rate(exportTook), rate(pacedTook), rate(importTook), rate(apiTook), rate(deleteTook), float64(size)/(1<<20),
		float64(exportHeap)/(1<<20), float64(importHeap)/(1<<20))
	if len(cfg.backends) > 0 {
		pct := func(cpu, took time.Duration) float64 { return 100 * cpu.Seconds() / took.Seconds() }
		line += fmt.Sprintf(" export_backend_cpu_pct=%.0f paced_backend_cpu_pct=%.0f import_backend_cpu_pct=%.0f delete_backend_cpu_pct=%.0f",
			pct(exportCPU, exportTook), pct(pacedCPU, pacedTook), pct(importCPU, importTook), pct(deleteCPU, deleteTook))
	}
	return line, nil
}

// benchPhase runs fn and returns how long it took, the peak Go heap in
// use meanwhile (sampled every 10 ms, after a GC before it) and the CPU
// time the backends (--backends) spent meanwhile.
func benchPhase(ctx context.Context, cfg benchConfig, fn func() error) (took time.Duration, heap uint64, backendCPU time.Duration, err error) {
	runtime.GC()
	cpu0, err := sumBackends(ctx, cfg, portable.BackendCPU)
	if err != nil {
		return 0, 0, 0, err
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
	took = time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return 0, 0, 0, err
	}
	cpu1, err := sumBackends(ctx, cfg, portable.BackendCPU)
	if err != nil {
		return 0, 0, 0, err
	}
	return took, peak.Load(), cpu1 - cpu0, nil
}

// benchImportAPI imports n messages like those of the export workload
// into topic with Client.Import, batches of --batch-size from --producers
// goroutines, and returns the time it took.
func benchImportAPI(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string, n int, body []byte, due time.Time) (time.Duration, error) {
	now := time.Now()
	msgs := make([]delayq.ExportedMessage, n)
	for i := range msgs {
		msgs[i] = delayq.ExportedMessage{ID: fmt.Sprintf("x%08d", i), State: delayq.StateScheduled, Due: due, Created: now, Updated: now, Body: body}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.producers)
	start := time.Now()
	for range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(int64(cfg.batchSize))) - cfg.batchSize
				if lo >= n {
					return
				}
				res, err := c.Import(ctx, topic, msgs[lo:min(lo+cfg.batchSize, n)])
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
		return 0, err
	default:
	}
	return took, nil
}
