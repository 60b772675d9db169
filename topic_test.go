package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// topicStored reports whether topic's meta key and its entry in the
// topics set exist, read with a connection of its own, not the client's.
func topicStored(t *testing.T, addr, topic string) (meta, listed bool) {
	t.Helper()
	conn, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n, err := redis.Int(conn.Do("EXISTS", keys.Meta(DefaultNamespace, topic)))
	if err != nil {
		t.Fatal(err)
	}
	score, err := conn.Do("ZSCORE", keys.Topics(DefaultNamespace), topic)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1, score != nil
}

// Every operation but a write that puts a message (or a schedule) in a
// topic fails on a topic that does not exist with an error that names it
// and matches ErrNoTopic and ErrNotFound, and writes nothing: no meta key,
// no entry among the topics. An enqueue then creates the topic, after
// which the same reads succeed.
func TestReadsDoNotCreateTopics(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		const topic = "typo8"
		ops := []struct {
			name string
			do   func() error
		}{
			{"Stats", func() error { _, err := c.Stats(ctx, topic); return err }},
			{"Get", func() error { _, err := c.Get(ctx, topic, "x"); return err }},
			{"Delete", func() error { return c.Delete(ctx, topic, "x") }},
			{"DeleteMany", func() error { _, err := c.DeleteMany(ctx, topic, []string{"x"}); return err }},
			{"Reschedule", func() error { _, err := c.Reschedule(ctx, topic, "x", time.Now().Add(time.Hour)); return err }},
			{"ListDead", func() error { _, err := c.ListDead(ctx, topic, 10); return err }},
			{"RequeueDead", func() error { _, err := c.RequeueDead(ctx, topic); return err }},
			{"RequeueDead ids", func() error { _, err := c.RequeueDead(ctx, topic, "x"); return err }},
			{"PurgeDead", func() error { _, err := c.PurgeDead(ctx, topic); return err }},
			{"Partitions", func() error { _, err := c.Partitions(ctx, topic); return err }},
			{"SetPartitions", func() error { _, err := c.SetPartitions(ctx, topic, 8); return err }},
			{"Export", func() error {
				_, err := c.Export(ctx, topic, ExportOptions{}, func(*ExportedMessage) error { return nil })
				return err
			}},
			{"Schedules", func() error { _, err := c.Schedules(ctx, topic); return err }},
			{"GetSchedule", func() error { _, err := c.GetSchedule(ctx, topic, "s"); return err }},
			{"PauseSchedule", func() error { return c.PauseSchedule(ctx, topic, "s") }},
			{"DeleteSchedule", func() error { return c.DeleteSchedule(ctx, topic, "s") }},
		}
		for _, op := range ops {
			err := op.do()
			if !errors.Is(err, ErrNoTopic) || !errors.Is(err, ErrNotFound) {
				t.Errorf("%s of a topic that does not exist: %v; want an error matching ErrNoTopic and ErrNotFound", op.name, err)
			} else if want := `topic "typo8" does not exist`; !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", op.name, err, want)
			}
			if meta, listed := topicStored(t, addr, topic); meta || listed {
				t.Fatalf("after %s: meta key stored %v, in the topics set %v; want neither", op.name, meta, listed)
			}
		}
		// A message of another id than the one missing is not a topic
		// error: ErrNotFound only.
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "a", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if meta, listed := topicStored(t, addr, topic); !meta || !listed {
			t.Fatalf("after an enqueue: meta key stored %v, in the topics set %v; want both", meta, listed)
		}
		_, err := c.Get(ctx, topic, "x")
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoTopic) || !strings.Contains(err.Error(), `message "x"`) {
			t.Errorf("get of a missing message of an existing topic: %v; want ErrNotFound naming the message, not ErrNoTopic", err)
		}
		st, err := c.Stats(ctx, topic)
		if err != nil || st.Count != 4 || st.Scheduled != 1 {
			t.Fatalf("stats after the enqueue: %+v, %v", st, err)
		}
	})
}
