package main

import (
	"context"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/portable"
)

// benchEnqueue runs the enqueue workload. With a policy for existing ids
// (--on-duplicate replace or debounce), the ids are sent twice, each pass
// timed on its own: new (every send creates its message), then the same
// messages again (every send replaces or debounces one).
func benchEnqueue(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(100000)
	return onTopic(ctx, cfg, "enqueue", func(c *delayq.Client, topic string) (line string, err error) {
		body := cfg.body()
		due := time.Now().Add(time.Hour)
		msgs := make([]delayq.Message, n)
		for i := range msgs {
			msgs[i] = delayq.Message{Topic: topic, Body: body, At: due}
			if cfg.givenIDs {
				msgs[i].ID = fmt.Sprintf("e%08d", i)
				msgs[i].OnDuplicate = cfg.onDuplicate
				if cfg.onDuplicate == delayq.Debounce {
					msgs[i].MaxWait = benchMaxWait
				}
			}
		}
		if err := createTopic(ctx, cfg, c, topic); err != nil { // not part of the timing
			return "", err
		}
		mem0, err := sumBackends(ctx, cfg, portable.BackendUsedMemory)
		if err != nil {
			return "", err
		}
		mode := cfg.mode.String()
		if cfg.mode == modeBatch {
			mode += fmt.Sprintf("-%d", cfg.batchSize)
		}
		line = fmt.Sprintf("workload=enqueue n=%d producers=%d mode=%s", n, cfg.producers, mode)
		type pass struct {
			name string
			want delayq.Outcome
		}
		passes := []pass{{"", ""}}
		switch {
		case !cfg.givenIDs:
			line += " ids=generated"
		case cfg.onDuplicate == delayq.Reject:
			line += " ids=given policy=reject"
		default:
			again := delayq.OutcomeReplaced
			if cfg.onDuplicate == delayq.Debounce {
				again = delayq.OutcomeDebounced
			}
			line += " ids=given policy=" + cfg.onDuplicate.String()
			passes = []pass{{"create", delayq.OutcomeCreated}, {"replace", again}}
		}
		for _, p := range passes {
			cmds0 := c.Commands()
			cpu0, cpuOK := processCPU()
			took, err := produce(ctx, cfg, c, msgs, p.want)
			if err != nil {
				if p.name != "" {
					err = fmt.Errorf("pass %s: %w", p.name, err)
				}
				return "", err
			}
			cpu1, _ := processCPU()
			if p.name != "" {
				line += " pass=" + p.name
			}
			line += fmt.Sprintf(" rate=%.0f cmds_per_msg=%.3f", float64(n)/took.Seconds(), float64(c.Commands()-cmds0)/float64(n))
			if cpuOK {
				line += fmt.Sprintf(" client_cpu_us_per_msg=%.2f", float64((cpu1-cpu0).Microseconds())/float64(n))
			}
		}
		if len(cfg.backends) > 0 {
			mem1, err := sumBackends(ctx, cfg, portable.BackendUsedMemory)
			if err != nil {
				return "", err
			}
			line += fmt.Sprintf(" mem_per_msg=%.0f", float64(mem1-mem0)/float64(n))
		}
		return line, nil
	})
}

// benchMaxWait is the MaxWait of the enqueue workload's debounced
// messages: as far ahead as their due, so that it caps no due.
const benchMaxWait = time.Hour
