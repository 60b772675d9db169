package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// One EnqueueBatch of several topics: given ids (one of them twice),
// generated ids due far ahead and due now, an invalid message, and a topic
// whose stored partition count differs from the client's (its messages go
// to the stored count's partitions). Each message gets its own outcome in
// its own slot, and exactly the accepted ones are stored, in their
// topics, with their bodies.
func TestEnqueueBatchMixed(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		other := newClient(t, addr, Options{Partitions: 8})
		if _, err := other.Enqueue(ctx, Message{Topic: "mixed-c", Body: []byte("eight")}); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		msgs := []Message{
			{Topic: "mixed-b", Body: []byte("b0"), At: later},
			{Topic: "mixed-a", ID: "x", Body: []byte("a-x")},
			{Topic: "mixed-c", ID: "c1", Body: []byte("c1")},
			{Topic: "mixed-a", ID: "y", Body: []byte("a-y"), At: later},
			{Topic: "mixed-b", Body: []byte("b1")},
			{Topic: "mixed-a", ID: "x", Body: []byte("a-x again")},
			{Topic: "mixed-a", ID: "z", Body: []byte("bad"), Delay: -time.Second},
			{Topic: "mixed-b", Body: []byte("b2"), At: later},
			{Topic: "mixed-b", ID: "x", Body: []byte("b-x")}, // the same id in another topic
			{Topic: "mixed-c", Body: []byte("c2")},
		}
		res, err := c.EnqueueBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(msgs) {
			t.Fatalf("%d results for %d messages", len(res), len(msgs))
		}
		for i, r := range res {
			m := msgs[i]
			switch {
			case i == 5:
				if !errors.Is(r.Err, ErrDuplicate) || !strings.Contains(r.Err.Error(), `"x" twice in one batch`) {
					t.Errorf("message %d (x again): %v, want ErrDuplicate", i, r.Err)
				}
			case i == 6:
				if !errors.Is(r.Err, ErrInvalid) {
					t.Errorf("message %d (negative delay): %v, want ErrInvalid", i, r.Err)
				}
			default:
				if r.Err != nil {
					t.Errorf("message %d: %v", i, r.Err)
					continue
				}
				if m.ID != "" && r.ID != m.ID {
					t.Errorf("message %d: id %q, want %q", i, r.ID, m.ID)
				}
				info, err := c.Get(ctx, m.Topic, r.ID)
				if err != nil {
					t.Errorf("get message %d (%s in %s): %v", i, r.ID, m.Topic, err)
					continue
				}
				if string(info.Body) != string(m.Body) || info.State != StateScheduled {
					t.Errorf("message %d: stored %q in state %v, want %q scheduled", i, info.Body, info.State, m.Body)
				}
				if m.Topic == "mixed-c" && info.Partition >= 8 {
					t.Errorf("message %d in partition %d of a topic of 8", i, info.Partition)
				}
			}
		}
		// Refused before it has an id, a message with none to give is
		// named as such.
		id, err := c.Enqueue(ctx, Message{Topic: "mixed-a", Body: []byte("bad"), Delay: -time.Second})
		if !errors.Is(err, ErrInvalid) || id != "" || !strings.Contains(err.Error(), "Delay -1s of a message with a generated id is negative") {
			t.Errorf("invalid message with a generated id: %q, %v", id, err)
		}
		for topic, want := range map[string]int64{"mixed-a": 2, "mixed-b": 4, "mixed-c": 3} {
			st, err := c.Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if st.Scheduled != want {
				t.Errorf("%s: %d scheduled, want %d", topic, st.Scheduled, want)
			}
			if wantN := map[bool]int{false: 4, true: 8}[topic == "mixed-c"]; len(st.Partitions) != wantN {
				t.Errorf("%s: stats of %d partitions, want %d", topic, len(st.Partitions), wantN)
			}
		}
	})
}
