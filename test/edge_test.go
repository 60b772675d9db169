package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// TestWritesAtTheEdge: a write that reports success before a delivery
// starts wins. Through Twemproxy, 2 "delayq sub" processes at the
// defaults (poll 1 s: a message due within 1.5 s is claimed ahead and
// held in memory) consume 240 messages due over 6 s, half sent plainly
// and half with --on-duplicate replace. Each message gets, at a random
// moment in the last 1.4 s before its due (while its consumer holds it),
// a Delete, a Replace (new body, due 2 s later), a Reschedule (2 s later)
// or nothing. Every delivery is checked against what the call reported:
// a message deleted with nil never starts; one replaced or rescheduled
// with nil never starts at its old due or with its old body, and starts
// once with the new ones; ErrRunning allows the old delivery (none is
// expected here: every write comes before the due). During a change of
// the partition count too: the topic grows from 16 to 32 partitions as
// the writes begin, and its messages move meanwhile.
func TestWritesAtTheEdge(t *testing.T) {
	t.Run("steady", func(t *testing.T) { writesAtTheEdge(t, false) })
	t.Run("change", func(t *testing.T) { writesAtTheEdge(t, true) })
}

func writesAtTheEdge(t *testing.T, change bool) {
	t.Parallel()
	const (
		n     = 240
		span  = 6 * time.Second
		lead  = 3 * time.Second        // the first due, after the sends
		later = 2 * time.Second        // where a replace or reschedule moves a message
		slack = 100 * time.Millisecond // the test's clock and the subs' are one; its writes land within it
	)
	env := testenv.Start(t, testenv.Options{Backends: 2})
	addr, topic := env.Proxy, "e2e.edge"
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Send(ctx, delayq.Message{Topic: topic, ID: "first", Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	startSubs(t, l, 2, addr, topic)

	type edgeMsg struct {
		id, action string
		due        time.Time
		writeAt    time.Time
		err        error // what the write reported
		wrote      time.Time
	}
	actions := []string{"delete", "replace", "reschedule", "none"}
	rng := rand.New(rand.NewPCG(41, 1))
	base := time.Now().Add(lead)
	msgs := make([]*edgeMsg, n)
	for i := range msgs {
		m := &edgeMsg{id: fmt.Sprintf("edge-%03d", i), action: actions[i%len(actions)]}
		m.due = base.Add(time.Duration(i) * span / n).Truncate(time.Millisecond)
		m.writeAt = m.due.Add(-time.Duration(100+rng.IntN(1300)) * time.Millisecond)
		msg := delayq.Message{Topic: topic, ID: m.id, Body: []byte("old"), At: m.due}
		if i%2 == 1 {
			msg.OnDuplicate = delayq.Replace
		}
		if _, err := c.Send(ctx, msg); err != nil {
			t.Fatalf("send %s: %v", m.id, err)
		}
		msgs[i] = m
	}
	if time.Now().After(base.Add(-1500 * time.Millisecond)) {
		t.Fatalf("the sends took until %v, past the first claim ahead", time.Now())
	}
	if change {
		time.Sleep(time.Until(base.Add(-1500 * time.Millisecond)))
		if _, err := c.Admin().SetPartitions(ctx, topic, 32, delayq.PartitionsOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		if m.action == "none" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(m.writeAt))
			switch m.action {
			case "delete":
				m.err = c.Delete(ctx, topic, m.id)
			case "replace":
				_, m.err = c.Send(ctx, delayq.Message{Topic: topic, ID: m.id, Body: []byte("new"), At: m.due.Add(later), OnDuplicate: delayq.Replace})
			case "reschedule":
				_, m.err = c.Reschedule(ctx, topic, m.id, m.due.Add(later))
			}
			m.wrote = time.Now()
		}()
	}
	wg.Wait()
	want := 1 // "first"
	for _, m := range msgs {
		if m.action != "delete" || errors.Is(m.err, delayq.ErrRunning) {
			want++
		}
	}
	// The last deliveries expected are those moved 2 s later: a delivery
	// that should not be (a deleted message's, an old version's) comes at
	// its old due, before them.
	waitFor(t, 30*time.Second, func() bool { return l.count() >= want }, "%d deliveries", want)

	late := 0
	for _, m := range msgs {
		ds := l.deliveries(m.id)
		if m.wrote.After(m.due.Add(-slack)) {
			late++ // written too close to the due to judge
			continue
		}
		switch {
		case m.err != nil && !errors.Is(m.err, delayq.ErrRunning):
			t.Errorf("%s %s at due-%v: %v", m.action, m.id, m.due.Sub(m.wrote), m.err)
		case errors.Is(m.err, delayq.ErrRunning):
			t.Errorf("%s %s at due-%v: ErrRunning before the due", m.action, m.id, m.due.Sub(m.wrote))
		case m.action == "delete":
			if len(ds) != 0 {
				t.Errorf("%s deleted (nil) %v before its due, delivered %d times (first at %v)", m.id, m.due.Sub(m.wrote), len(ds), ds[0].at)
			}
		case m.action == "none":
			if len(ds) != 1 || ds[0].at.Before(m.due) || string(ds[0].body) != "old" {
				t.Errorf("%s untouched: %d deliveries %v, want one of \"old\" from %v", m.id, len(ds), ds, m.due)
			}
		default: // replace, reschedule
			body := "old"
			if m.action == "replace" {
				body = "new"
			}
			if len(ds) != 1 || ds[0].at.Before(m.due.Add(later)) || string(ds[0].body) != body {
				for _, d := range ds {
					t.Errorf("%s %sd (nil) %v before its due: delivered %q at due%+v (want one, of %q, from due+%v)",
						m.id, m.action, m.due.Sub(m.wrote), d.body, d.at.Sub(m.due), body, later)
				}
				if len(ds) == 0 {
					t.Errorf("%s %sd (nil) %v before its due: never delivered", m.id, m.action, m.due.Sub(m.wrote))
				}
			}
		}
	}
	if late > n/20 {
		t.Errorf("%d of %d writes came within %v of their due: the machine is too slow to judge them", late, n, slack)
	}
	if change {
		p, err := c.Inspector().Partitions(ctx, topic)
		if err != nil || (p.Count != 32 && p.Next != 32) {
			t.Errorf("partitions after the change: %+v, %v; want 32, or a change to 32", p, err)
		}
	}
	t.Logf("%d messages, %d writes within %v of their due not judged", n, late, slack)
}

// TestWritesAfterStartCLI: "delayq delete" and "delayq reschedule" of a
// message whose delivery started (a sub's handler runs for 20 s) exit 3
// and say so; the delete deleted it all the same.
func TestWritesAfterStartCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 2})
	addr, topic := env.Proxy, "e2e.running"
	for _, id := range []string{"run-1", "run-2"} {
		mustCLI(t, "", "send", "--addr", addr, "--topic", topic, "--id", id, "--body", "x")
	}
	l := newLedger()
	startSub(t, l, 0, "--addr", addr, "--topic", topic, "--work", "20s")
	waitFor(t, 30*time.Second, func() bool { return l.count() == 2 }, "both deliveries started")
	wantExit(t, cli(t, "", "delete", "--addr", addr, "--topic", topic, "--id", "run-1"), 3, "delivery of the message is running", "deleted")
	wantExit(t, cli(t, "", "get", "--addr", addr, "--topic", topic, "--id", "run-1"), 1, "not found")
	wantExit(t, cli(t, "", "reschedule", "--addr", addr, "--topic", topic, "--id", "run-2", "--delay", "1h"), 3, "delivery of the message is running", "not rescheduled")
}
