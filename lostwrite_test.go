package delayq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// breakHook breaks the connection before the k-th command of the
// connections of one client, once (the commands pipelined before it
// reach Redis and their replies are read, then the connection closes as
// if the proxy restarted): a lost reply, as a write of messages meets it
// on a read.
type breakHook struct {
	mu    sync.Mutex
	k, n  int
	fired bool
}

func (h *breakHook) hook(cmd string, _ []any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cmd == "PING" || cmd == "EVAL" { // health checks and NOSCRIPT fallbacks: not the write's own
		return nil
	}
	h.n++
	if h.n == h.k {
		h.fired = true
		return fmt.Errorf("%s: lost with the connection: %w", cmd, io.ErrUnexpectedEOF)
	}
	return nil
}

// A write of messages whose connection breaks before any one of its
// commands, on a read as on a write, is run again and stores each
// message once: a given id stored by the lost run counts as created, not
// as a duplicate of itself, and generated ids (written in segments, whose
// count a second write would double) are not written twice.
func TestLostWriteRunsAgain(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		given bool
		delay time.Duration
	}{
		{"generated ahead", false, 2 * time.Minute}, // Fresh: segments
		{"given ahead", true, 2 * time.Minute},      // Ahead: records and ZADD NX
		{"given due now", true, 0},                  // checked: records, then ZADD
		{"generated due now", false, 0},             // checked, generated ids
	} {
		for k := 1; ; k++ {
			topic := fmt.Sprintf("lost-%d-%d", len(tc.name), k)
			if tc.given {
				topic += "g"
			}
			if tc.delay > 0 {
				topic += "a"
			}
			h := &breakHook{}
			c := newClient(t, env.Backends[0], Options{Partitions: 2, hook: h.hook})
			if _, err := c.Inspector().Stats(ctx, topic); err != nil && !errors.Is(err, ErrNoTopic) {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.n, h.k = 0, k // count the write's commands only
			h.mu.Unlock()
			const n = 20
			msgs := make([]Message, n)
			for i := range msgs {
				msgs[i] = Message{Topic: topic, Body: []byte(fmt.Sprint("body ", i)), Delay: tc.delay}
				if tc.given {
					msgs[i].ID = fmt.Sprintf("m-%02d", i)
				}
			}
			res, err := c.SendBatch(ctx, msgs)
			if err != nil {
				t.Fatalf("%s, break before command %d: %v", tc.name, k, err)
			}
			for i, r := range res {
				if r.Err != nil || r.Outcome != OutcomeCreated {
					t.Errorf("%s, break before command %d: message %d: %v %v", tc.name, k, i, r.Outcome, r.Err)
				}
			}
			h.mu.Lock()
			h.k = 0
			h.mu.Unlock()
			st, err := c.Inspector().Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Scheduled + st.InFlight; got != n {
				t.Errorf("%s, break before command %d: %d messages stored, want %d", tc.name, k, got, n)
			}
			for _, r := range res {
				if _, err := c.Get(ctx, topic, r.ID); err != nil {
					t.Errorf("%s, break before command %d: get %s: %v", tc.name, k, r.ID, err)
				}
			}
			h.mu.Lock()
			fired := h.fired
			h.mu.Unlock()
			c.Close()
			if !fired { // k is past the write's last command
				if k < 2 {
					t.Errorf("%s: the write sent no command", tc.name)
				}
				break
			}
		}
	}
}

// A send with a policy for existing ids (Replace, Debounce) whose
// connection breaks before any one of its commands, on a read as on a
// write, is run again and leaves each message as one run would have,
// with the outcome that run would have reported: a message its lost run
// created is "created", not replaced by itself; one it replaced or
// debounced is so once, its body the new one, its creation time the
// first send's, its due the one asked.
func TestLostPolicySendRunsAgain(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		policy OnDuplicate
		exists bool
		delay  time.Duration
		want   Outcome
	}{
		{"replace new due now", Replace, false, 0, OutcomeCreated},
		{"replace new ahead", Replace, false, 2 * time.Minute, OutcomeCreated},
		{"replace existing due now", Replace, true, 0, OutcomeReplaced},
		{"replace existing ahead", Replace, true, 2 * time.Minute, OutcomeReplaced},
		{"debounce new due now", Debounce, false, 0, OutcomeCreated},
		{"debounce existing ahead", Debounce, true, 2 * time.Minute, OutcomeDebounced},
	} {
		for k := 1; ; k++ {
			topic := fmt.Sprintf("lostp-%d-%d", len(tc.name), k)
			h := &breakHook{}
			c := newClient(t, env.Backends[0], Options{Partitions: 2, hook: h.hook})
			const n = 20
			created := map[string]time.Time{}
			if tc.exists {
				old := make([]Message, n)
				for i := range old {
					old[i] = Message{Topic: topic, ID: fmt.Sprintf("m-%02d", i), Body: []byte("old"), Delay: time.Hour, MaxAttempts: 9}
				}
				if _, err := c.SendBatch(ctx, old); err != nil {
					t.Fatal(err)
				}
				for _, m := range old {
					info, err := c.Get(ctx, topic, m.ID)
					if err != nil {
						t.Fatal(err)
					}
					created[m.ID] = info.Created
				}
			} else if _, err := c.Inspector().Stats(ctx, topic); err != nil && !errors.Is(err, ErrNoTopic) {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.n, h.k = 0, k // count the send's commands only
			h.mu.Unlock()
			msgs := make([]Message, n)
			for i := range msgs {
				msgs[i] = Message{Topic: topic, ID: fmt.Sprintf("m-%02d", i), Body: []byte(fmt.Sprint("new ", i)),
					Delay: tc.delay, OnDuplicate: tc.policy}
				if tc.policy == Debounce {
					msgs[i].MaxWait = 10 * time.Minute
				}
			}
			res, err := c.SendBatch(ctx, msgs)
			if err != nil {
				t.Fatalf("%s, break before command %d: %v", tc.name, k, err)
			}
			h.mu.Lock()
			h.k = 0
			fired := h.fired
			h.mu.Unlock()
			for i, r := range res {
				if r.Err != nil || r.Outcome != tc.want {
					t.Errorf("%s, break before command %d: message %d: %q %v, want %q", tc.name, k, i, r.Outcome, r.Err, tc.want)
				}
			}
			st, err := c.Inspector().Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Scheduled + st.InFlight + st.Dead; got != n {
				t.Errorf("%s, break before command %d: %d messages stored, want %d", tc.name, k, got, n)
			}
			for i, r := range res {
				info, err := c.Get(ctx, topic, r.ID)
				if err != nil {
					t.Errorf("%s, break before command %d: get %s: %v", tc.name, k, r.ID, err)
					continue
				}
				if string(info.Body) != fmt.Sprint("new ", i) || info.MaxAttempts != 0 || info.Attempts != 0 || !info.Due.Equal(r.Due) {
					t.Errorf("%s, break before command %d: %s stored as %q, max attempts %d, attempts %d, due %v (reported %v)",
						tc.name, k, r.ID, info.Body, info.MaxAttempts, info.Attempts, info.Due, r.Due)
				}
				if c, ok := created[r.ID]; ok && !info.Created.Equal(c) {
					t.Errorf("%s, break before command %d: %s created %v, was %v", tc.name, k, r.ID, info.Created, c)
				}
			}
			c.Close()
			if !fired { // k is past the send's last command
				if k < 2 {
					t.Errorf("%s: the send sent no command", tc.name)
				}
				break
			}
		}
	}
}
