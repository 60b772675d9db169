package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

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
			{"Stats", func() error { _, err := c.Inspector().Stats(ctx, topic); return err }},
			{"Get", func() error { _, err := c.Get(ctx, topic, "x"); return err }},
			{"Delete", func() error { return c.Delete(ctx, topic, "x") }},
			{"DeleteMany", func() error { _, err := c.DeleteMany(ctx, topic, []string{"x"}); return err }},
			{"Reschedule", func() error { _, err := c.Reschedule(ctx, topic, "x", time.Now().Add(time.Hour)); return err }},
			{"ListDead", func() error { _, err := c.Inspector().ListDead(ctx, topic, 10); return err }},
			{"RequeueDead", func() error { _, err := c.Admin().RequeueDead(ctx, topic); return err }},
			{"RequeueDead ids", func() error { _, err := c.Admin().RequeueDead(ctx, topic, "x"); return err }},
			{"PurgeDead", func() error { _, err := c.Admin().PurgeDead(ctx, topic); return err }},
			{"Partitions", func() error { _, err := c.Inspector().Partitions(ctx, topic); return err }},
			{"SetPartitions", func() error { _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); return err }},
			{"Export", func() error {
				_, err := c.Inspector().Export(ctx, topic, ExportOptions{}, func(*ExportedMessage) error { return nil })
				return err
			}},
			{"Schedules", func() error { _, err := c.Inspector().Schedules(ctx, topic); return err }},
			{"GetSchedule", func() error { _, err := c.Inspector().GetSchedule(ctx, topic, "s"); return err }},
			{"PauseSchedule", func() error { return c.Admin().PauseSchedule(ctx, topic, "s") }},
			{"DeleteSchedule", func() error { return c.Admin().DeleteSchedule(ctx, topic, "s") }},
		}
		for _, op := range ops {
			err := op.do()
			if !errors.Is(err, ErrNoTopic) || !errors.Is(err, ErrNotFound) {
				t.Errorf("%s of a topic that does not exist: %v; want an error matching ErrNoTopic and ErrNotFound", op.name, err)
			} else if want := `topic "typo8" does not exist`; !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", op.name, err, want)
			}
			if meta, listed := testenv.TopicStored(t, addr, DefaultNamespace, topic); meta || listed {
				t.Fatalf("after %s: meta key stored %v, in the topics set %v; want neither", op.name, meta, listed)
			}
		}
		// A message of another id than the one missing is not a topic
		// error: ErrNotFound only.
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "a", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if meta, listed := testenv.TopicStored(t, addr, DefaultNamespace, topic); !meta || !listed {
			t.Fatalf("after an enqueue: meta key stored %v, in the topics set %v; want both", meta, listed)
		}
		_, err := c.Get(ctx, topic, "x")
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoTopic) || !strings.Contains(err.Error(), `message "x"`) {
			t.Errorf("get of a missing message of an existing topic: %v; want ErrNotFound naming the message, not ErrNoTopic", err)
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil || st.Count != 4 || st.Scheduled != 1 {
			t.Fatalf("stats after the enqueue: %+v, %v", st, err)
		}
	})
}

// topicKeys lists the keys of topic that exist, of those delayq writes
// for a topic of n partitions, read with a connection of its own.
func topicKeys(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	conn, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ns := DefaultNamespace
	all := []string{keys.Meta(ns, topic), keys.Members(ns, topic), keys.Schedules(ns, topic)}
	for p := range n {
		all = append(all, keys.OfPartition(ns, topic, p)...)
	}
	var out []string
	for _, k := range all {
		if e, err := redis.Int(conn.Do("EXISTS", k)); err != nil {
			t.Fatal(err)
		} else if e == 1 {
			out = append(out, k)
		}
	}
	if score, err := conn.Do("ZSCORE", keys.Topics(ns), topic); err != nil {
		t.Fatal(err)
	} else if score != nil {
		out = append(out, keys.Topics(ns)+" "+topic)
	}
	return out
}

// DeleteTopic refuses a topic that does not exist (writing nothing), one
// that holds messages or schedules, one a consumer is live on and one
// whose count is being changed, saying why; it deletes an empty topic,
// and with Force any topic, leaving none of its keys; a later enqueue
// creates the topic again.
func TestDeleteTopic(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})

		if _, err := c.Admin().DeleteTopic(ctx, "none", DeleteTopicOptions{Force: true}); !errors.Is(err, ErrNoTopic) {
			t.Errorf("delete of a topic that does not exist: %v; want ErrNoTopic", err)
		}
		if got := topicKeys(t, addr, "none", 4); len(got) > 0 {
			t.Errorf("a delete of a topic that does not exist wrote %q", got)
		}

		// Messages and a schedule: refused, then forced.
		const full = "full"
		if _, err := c.Send(ctx, Message{Topic: full, ID: "m1", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, Message{Topic: full, ID: "m2", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Admin().SetSchedule(ctx, full, Schedule{Name: "daily", Spec: "@daily"}); err != nil {
			t.Fatal(err)
		}
		u, err := c.Admin().DeleteTopic(ctx, full, DeleteTopicOptions{})
		if !errors.Is(err, ErrTopicInUse) {
			t.Fatalf("delete of a topic with messages: %v; want ErrTopicInUse", err)
		}
		// Two messages and the schedule's pending occurrence.
		if want := "3 messages (3 scheduled, 0 in flight, 0 dead) and 1 schedule"; !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
		if u == nil || u.Scheduled != 3 || u.Schedules != 1 {
			t.Errorf("usage of the refused topic: %+v", u)
		}
		if _, err := c.Get(ctx, full, "m1"); err != nil {
			t.Fatalf("a refused delete lost a message: %v", err)
		}
		if _, err := c.Admin().DeleteTopic(ctx, full, DeleteTopicOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if got := topicKeys(t, addr, full, 4); len(got) > 0 {
			t.Errorf("after a forced delete these keys are left: %q", got)
		}
		if _, err := c.Get(ctx, full, "m1"); !errors.Is(err, ErrNoTopic) {
			t.Errorf("get from a deleted topic: %v; want ErrNoTopic", err)
		}
		// Written to again, the topic is created again, empty.
		if _, err := c.Send(ctx, Message{Topic: full, ID: "m3", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.Inspector().Stats(ctx, full); err != nil || st.Scheduled != 1 || st.Count != 4 {
			t.Fatalf("stats of the topic created again: %+v, %v", st, err)
		}

		// A live consumer on an empty topic: refused, named; stopped, the
		// topic is deleted without force.
		const live = "live"
		k, err := c.NewConsumer(ConsumerOptions{Topic: live, ID: "k1", Lease: 2 * time.Second}, func(context.Context, *Delivery) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- k.Run(ctx) }()
		waitFor(t, 10*time.Second, "the consumer to own a partition", func() bool { return len(k.Stats().Owned) > 0 })
		if _, err := c.Admin().DeleteTopic(ctx, live, DeleteTopicOptions{}); !errors.Is(err, ErrTopicInUse) ||
			!strings.Contains(err.Error(), "1 consumer is live on it (k1): stop it first") {
			t.Errorf("delete of a topic with a live consumer: %v; want ErrTopicInUse naming k1", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := k.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := c.Admin().DeleteTopic(ctx, live, DeleteTopicOptions{}); err != nil {
			t.Fatalf("delete of an empty topic whose consumer stopped: %v", err)
		}
		if got := topicKeys(t, addr, live, 4); len(got) > 0 {
			t.Errorf("after the delete these keys are left: %q", got)
		}

		// A change of the count runs: refused, forced.
		const changing = "changing"
		if _, err := c.Send(ctx, Message{Topic: changing, ID: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, changing, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Admin().SetPartitions(ctx, changing, 8, PartitionsOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Admin().DeleteTopic(ctx, changing, DeleteTopicOptions{}); !errors.Is(err, ErrTopicInUse) ||
			!strings.Contains(err.Error(), "a change of its partition count from 4 to 8 runs") {
			t.Errorf("delete of a topic whose count changes: %v; want ErrTopicInUse naming the change", err)
		}
		if _, err := c.Admin().DeleteTopic(ctx, changing, DeleteTopicOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if got := topicKeys(t, addr, changing, 8); len(got) > 0 {
			t.Errorf("after the forced delete these keys are left: %q", got)
		}
	})
}
