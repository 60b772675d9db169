package delayq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// zadd adds member to the sorted set key with score, failing t on error.
func zadd(t *testing.T, addr, key string, score int64, member string) {
	t.Helper()
	if _, err := testenv.Do(addr, "ZADD", key, strconv.FormatInt(score, 10), member); err != nil {
		t.Fatalf("ZADD %s %s: %v", key, member, err)
	}
}

// wantNoTopic fails t unless err says that topic does not exist.
func wantNoTopic(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoTopic) || !errors.Is(err, ErrNotFound) || !strings.Contains(fmt.Sprint(err), `topic "nope" does not exist`) {
		t.Errorf("%s of an unknown topic: %v, want ErrNoTopic", what, err)
	}
}

// ListTopics lists the first topics, oldest first, with the total, and
// their live and leaving consumers; Topic reads one, fresh: the reads
// that follow it see the count it read, not the client's older one.
func TestInspectListTopics(t *testing.T) {
	ctx := context.Background()
	addr := startDirect(t)
	c := newClient(t, addr, Options{Partitions: 4})
	for _, topic := range []string{"b", "a", "c"} {
		mustBatch(t, c, []Message{{Topic: topic, ID: "m", Body: []byte("x"), Delay: time.Hour}})
		time.Sleep(5 * time.Millisecond) // registered in this order
	}
	now := time.Now()
	mk := keys.Members(DefaultNamespace, "b")
	zadd(t, addr, mk, now.Add(time.Hour).UnixMilli(), "live")
	zadd(t, addr, mk, -now.Add(time.Hour).UnixMilli(), "leaving")
	zadd(t, addr, mk, now.Add(-time.Hour).UnixMilli(), "expired")

	l, err := c.Inspector().ListTopics(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := &TopicList{Total: 3, Topics: []TopicInfo{
		{Name: "b", Partitions: 4, Live: 1, Leaving: 1},
		{Name: "a", Partitions: 4},
	}}
	if !slices.Equal(l.Topics, want.Topics) || l.Total != want.Total {
		t.Errorf("ListTopics(2) = %+v, want %+v", l, want)
	}
	if l, err := c.Inspector().ListTopics(ctx, 0); err != nil || len(l.Topics) != 3 || l.Topics[2].Name != "c" || l.Total != 3 {
		t.Errorf("ListTopics(0) = %+v, %v; want the 3 topics", l, err)
	}

	s, err := c.Inspector().Topic(ctx, "b")
	if err != nil || *s != want.Topics[0] {
		t.Errorf("Topic(b) = %+v, %v; want %+v", s, err, want.Topics[0])
	}
	_, err = c.Inspector().Topic(ctx, "nope")
	wantNoTopic(t, "Topic", err)
	if _, err := c.Inspector().Topic(ctx, "no way"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Topic of a bad name: %v, want ErrInvalid", err)
	}

	// Another client changes the count: Topic sees it at once, and so
	// does Stats after it, though the client read the layout a moment ago.
	if _, err := c.Inspector().Stats(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	other := newClient(t, addr, Options{})
	if _, err := other.Admin().SetPartitions(ctx, "a", 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Inspector().Topic(ctx, "a"); err != nil || s.Partitions != 4 || s.Next != 8 {
		t.Fatalf("Topic(a) after the change: %+v, %v; want 4 partitions going to 8", s, err)
	}
	st, err := c.Inspector().Stats(ctx, "a")
	if err != nil || st.ChangingTo != 8 || len(st.Partitions) != 8 {
		t.Errorf("Stats(a) after Topic: changing to %d, %d partitions, %v; want 8 and 8", st.ChangingTo, len(st.Partitions), err)
	}
}

// ListScheduled pages through a topic's scheduled messages in due order,
// each exactly once: ties of one partition past a page, segments, and an
// index entry without its record, listed with no Info.
func TestInspectListScheduled(t *testing.T) {
	ctx := context.Background()
	addr := testAddr(t)
	c := newClient(t, addr, Options{Partitions: 4})
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var msgs []Message
	for i := range 30 {
		msgs = append(msgs, Message{Topic: "sched", ID: fmt.Sprintf("m-%02d", i), Body: []byte("b" + strconv.Itoa(i)), At: base.Add(time.Duration(i) * time.Second)})
	}
	for i, k := 0, 0; k < 7; i++ { // 7 ties in partition 0, past a page of 4
		if id := fmt.Sprintf("tie-%d", i); partition.For(id, 4) == 0 {
			msgs = append(msgs, Message{Topic: "sched", ID: id, Body: []byte("tie"), At: base.Add(5 * time.Second)})
			k++
		}
	}
	mustBatch(t, c, msgs)
	var gen []Message
	for range 5 {
		gen = append(gen, Message{Topic: "sched", Body: []byte("gen"), At: base.Add(time.Minute)})
	}
	res, err := c.SendBatch(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ghost": true}
	generated := map[string]bool{}
	for _, m := range msgs {
		want[m.ID] = true
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want[r.ID], generated[r.ID] = true, true
	}
	ghostDue := addEntry(t, addr, "sched", 1, "ghost", base.Add(2*time.Second+time.Millisecond))

	seen := map[string]int{}
	var last time.Time
	cur, pages := ScheduledCursor{}, 0
	for {
		if pages++; pages > 50 {
			t.Fatal("more than 50 pages")
		}
		page, err := c.Inspector().ListScheduled(ctx, "sched", cur, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[e.ID]++
			if e.Due.Before(last) && !e.Segment {
				t.Errorf("%s due %v, after %v", e.ID, e.Due, last)
			}
			last = maxTime(last, e.Due)
			switch {
			case e.ID == "ghost":
				if e.Info != nil || e.Partition != 1 || e.Due.UnixMilli() != ghostDue {
					t.Errorf("ghost: %+v, want partition 1, due %d, no Info", e, ghostDue)
				}
			case e.Info == nil:
				t.Errorf("%s: no Info", e.ID)
			case e.Info.ID != e.ID || e.Info.Partition != e.Partition || e.Info.State != StateScheduled || e.Info.Topic != "sched":
				t.Errorf("%s: Info %+v", e.ID, e.Info)
			case e.Segment != generated[e.ID]:
				t.Errorf("%s: Segment %v, want %v", e.ID, e.Segment, generated[e.ID])
			}
		}
		if !page.More {
			break
		}
		cur = page.Next
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d messages, want %d", len(seen), len(want))
	}

	// Skips of partitions the topic does not have, or negative, are
	// ignored: the start.
	first, err := c.Inspector().ListScheduled(ctx, "sched", ScheduledCursor{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	odd, err := c.Inspector().ListScheduled(ctx, "sched", ScheduledCursor{Due: -5, Skip: map[int]int{99: 3, -1: 2, 0: -4}}, 4)
	if err != nil || len(odd.Entries) != len(first.Entries) || odd.Entries[0].ID != first.Entries[0].ID || odd.Entries[0].ID != "m-00" {
		t.Errorf("odd cursor: %+v, %v; want the first page, from m-00", odd, err)
	}
	_, err = c.Inspector().ListScheduled(ctx, "nope", ScheduledCursor{}, 4)
	wantNoTopic(t, "ListScheduled", err)
}

// ListRecentDead lists the latest deaths first, across partitions, with
// a dead entry whose record is gone, which ListDead leaves out.
func TestInspectListRecentDead(t *testing.T) {
	ctx := context.Background()
	addr := startDirect(t)
	c := newClient(t, addr, Options{Partitions: 2})
	var msgs []Message
	for _, prefix := range []string{"a-", "b-", "c-"} {
		msgs = append(msgs, Message{Topic: "dl", ID: samePartition(prefix, 0, 2), Body: []byte(prefix), Delay: 0})
	}
	recs := beginAll(t, c, "dl", msgs...)
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i, m := range msgs {
		recs[i].LastError = "failed " + m.ID
		makeDead(t, c, "dl", m.ID, recs[i], t0.Add(time.Duration(i)*time.Second))
	}
	zadd(t, addr, keys.Dead(DefaultNamespace, "dl", 1), t0.Add(3*time.Second).UnixMilli(), "ghost")

	list, err := c.Inspector().ListRecentDead(ctx, "dl", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	wantIDs := []string{"ghost", msgs[2].ID, msgs[1].ID, msgs[0].ID}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("ListRecentDead = %q, want %q", ids, wantIDs)
	}
	if g := list[0]; g.Info != nil || g.Partition != 1 || !g.DiedAt.Equal(t0.Add(3*time.Second)) {
		t.Errorf("ghost: %+v, want partition 1, no Info", g)
	}
	for i, e := range list[1:] {
		m := msgs[2-i]
		if e.Partition != 0 || !e.DiedAt.Equal(t0.Add(time.Duration(2-i)*time.Second)) || e.Info == nil ||
			e.Info.State != StateDead || !e.Info.DiedAt.Equal(e.DiedAt) || e.Info.LastError != "failed "+m.ID || string(e.Info.Body) != string(m.Body) {
			t.Errorf("%s: %+v, Info %+v", m.ID, e, e.Info)
		}
	}
	if list, err := c.Inspector().ListRecentDead(ctx, "dl", 2); err != nil || len(list) != 2 || list[1].ID != msgs[2].ID {
		t.Errorf("ListRecentDead(2) = %+v, %v; want ghost and %s", list, err, msgs[2].ID)
	}
	if old, err := c.Inspector().ListDead(ctx, "dl", 0); err != nil || len(old) != 3 {
		t.Errorf("ListDead = %d messages, %v; want 3 (not the ghost)", len(old), err)
	}
	_, err = c.Inspector().ListRecentDead(ctx, "nope", 0)
	wantNoTopic(t, "ListRecentDead", err)
}

// DueCounts counts the scheduled messages due in each interval, and
// those due before it.
func TestInspectDueCounts(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startDirect(t), Options{Partitions: 2})
	from := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var msgs []Message
	for i, d := range []time.Duration{-10 * time.Minute, 0, 30 * time.Second, 90 * time.Second, time.Hour - time.Millisecond, time.Hour} {
		msgs = append(msgs, Message{Topic: "due", ID: fmt.Sprintf("m-%d", i), Body: []byte("x"), At: from.Add(d)})
	}
	mustBatch(t, c, msgs)
	d, err := c.Inspector().DueCounts(ctx, "due", from, time.Minute, 60)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 60)
	want[0], want[1], want[59] = 2, 1, 1
	if d.Topic != "due" || !d.From.Equal(from) || d.Step != time.Minute || d.Overdue != 1 || !slices.Equal(d.Counts, want) {
		t.Errorf("DueCounts = %+v, want 1 overdue and %v", d, want)
	}
	for _, bad := range []struct {
		step time.Duration
		n    int
	}{{0, 60}, {time.Microsecond, 60}, {time.Minute, 0}, {time.Minute, maxDueBuckets + 1}} {
		var fe *FieldError
		if _, err := c.Inspector().DueCounts(ctx, "due", from, bad.step, bad.n); !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("DueCounts(step %v, n %d): %v, want ErrInvalid", bad.step, bad.n, err)
		}
	}
	_, err = c.Inspector().DueCounts(ctx, "nope", from, time.Minute, 60)
	wantNoTopic(t, "DueCounts", err)
}

// Consumers lists a topic's members, leaving ones first, with More past
// the limit, and what each partition's lease has left.
func TestInspectConsumers(t *testing.T) {
	ctx := context.Background()
	addr := startDirect(t)
	c := newClient(t, addr, Options{Partitions: 2})
	mustBatch(t, c, []Message{{Topic: "cons", ID: "m", Body: []byte("x"), Delay: time.Hour}})
	tc, err := c.Inspector().Consumers(ctx, "cons", 0)
	if err != nil || len(tc.Members) != 0 || tc.More || !slices.Equal(tc.LeaseTTLs, []time.Duration{0, 0}) {
		t.Fatalf("Consumers before any: %+v, %v; want none, no lease", tc, err)
	}

	const lease = 2 * time.Second
	k := runConsumer(t, c, ConsumerOptions{Topic: "cons", ID: "k1", Lease: lease}, func(context.Context, *Delivery) error { return nil })
	waitFor(t, 10*time.Second, "both leases held", func() bool {
		tc, err = c.Inspector().Consumers(ctx, "cons", 0)
		return err == nil && len(tc.LeaseTTLs) == 2 && tc.LeaseTTLs[0] > 0 && tc.LeaseTTLs[1] > 0
	})
	now := time.Now()
	if len(tc.Members) != 1 || tc.More || tc.Topic != "cons" {
		t.Fatalf("Consumers: %+v; want k1 alone", tc)
	}
	if m := tc.Members[0]; m.ID != k.ID() || m.Leaving || !m.Expires.After(now) || m.Expires.After(now.Add(2*lease)) {
		t.Errorf("member %+v, want %s live, expiring within %v", m, k.ID(), 2*lease)
	}
	for p, ttl := range tc.LeaseTTLs {
		if ttl > lease {
			t.Errorf("partition %d: lease TTL %v, past the lease %v", p, ttl, lease)
		}
	}

	zadd(t, addr, keys.Members(DefaultNamespace, "cons"), -now.Add(time.Minute).UnixMilli(), "going")
	tc, err = c.Inspector().Consumers(ctx, "cons", 1)
	if err != nil || len(tc.Members) != 1 || !tc.More || tc.Members[0].ID != "going" || !tc.Members[0].Leaving ||
		tc.Members[0].Expires.UnixMilli() != now.Add(time.Minute).UnixMilli() {
		t.Errorf("Consumers(1) = %+v, %v; want the leaving member first, and More", tc, err)
	}
	_, err = c.Inspector().Consumers(ctx, "nope", 0)
	wantNoTopic(t, "Consumers", err)
}
