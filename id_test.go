package delayq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// steerID returns a variant of id, a NewID, in partition p of n, chosen
// by steerBytes; false (and id) when none of the 1024 variants is in p.
func steerID(id string, p, n int) (string, bool) {
	if len(id) != 26 {
		return id, false
	}
	var b [26]byte
	copy(b[:], id)
	if !steerBytes(&b, p, n) {
		return id, false
	}
	return string(b[:]), true
}

// steerID keeps all but the last two characters of a NewID and lands it
// in the partition asked for. Of its 1024 variants none is in a given
// partition with probability (1-1/n)^1024: never in practice up to 64
// partitions, about 2% of ids at 256.
func TestSteerID(t *testing.T) {
	for _, n := range []int{2, 3, 16, 64, maxSteerPartitions} {
		missed := 0
		for p := range n {
			id := NewID(time.Now())
			got, ok := steerID(id, p, n)
			if !ok {
				if got != id {
					t.Fatalf("steerID(%s, %d, %d) found nothing but returned %s", id, p, n, got)
				}
				missed++
				continue
			}
			if partition.For(got, n) != p {
				t.Fatalf("steerID(%s, %d, %d) = %s in partition %d", id, p, n, got, partition.For(got, n))
			}
			if got[:24] != id[:24] || len(got) != 26 || strings.Trim(got[24:], crockford) != "" {
				t.Fatalf("steerID(%s) = %s: not the same id with its last two characters chosen", id, got)
			}
		}
		// 256 partitions: about 4.6 misses expected, more than 20 about
		// never (binomial tail below 1e-7).
		if n <= 64 && missed > 0 || missed > 20 {
			t.Errorf("%d partitions: %d of %d ids not steered", n, missed, n)
		}
	}
	if _, ok := steerID("not-a-generated-id", 0, 16); ok {
		t.Error("steerID steered an id that is not a NewID")
	}
}

// cmdLog records the command names a client sends.
type cmdLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *cmdLog) hook(cmd string, _ []any) error {
	if cmd == "PING" {
		return nil
	}
	l.mu.Lock()
	l.cmds = append(l.cmds, cmd)
	l.mu.Unlock()
	return nil
}

func (l *cmdLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.cmds
	l.cmds = nil
	return c
}

// A batch of generated ids goes to one partition; due an hour ahead it is
// an HMSET of segments of up to segmentMax messages, the script that
// counts them and one ZADD, due sooner the duplicate-checking script and a
// ZADD. Ids given by the caller keep their own partitions. Every message
// can then be read and deleted by the id it was given.
func TestGeneratedIDsShareAPartition(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const parts = 16
		var log cmdLog
		c := newClient(t, addr, Options{Partitions: parts, hook: log.hook})
		if _, err := c.ensureTopic(ctx, "steer"); err != nil { // the topic's meta: not part of what is checked
			t.Fatal(err)
		}
		for _, tc := range []struct {
			delay time.Duration
			cmds  []string
		}{
			{time.Hour, []string{"HMSET", "EVALSHA", "ZADD"}},
			{0, []string{"EVALSHA", "ZADD", "EVALSHA"}}, // then the wake-up of the owner
		} {
			log.take()
			msgs := make([]Message, 300)
			for i := range msgs {
				msgs[i] = Message{Topic: "steer", Body: []byte(fmt.Sprint(i)), Delay: tc.delay}
			}
			res, err := c.SendBatch(ctx, msgs)
			if err != nil {
				t.Fatal(err)
			}
			cmds := log.take()
			// An EVAL is the NOSCRIPT fallback of an EVALSHA listed before
			// it, on a server that had not seen the script.
			cmds = slices.DeleteFunc(cmds, func(s string) bool { return s == "EVAL" })
			if !slices.Equal(cmds, tc.cmds) {
				t.Errorf("300 generated ids due in %v: commands %v, want %v", tc.delay, cmds, tc.cmds)
			}
			if tc.delay == time.Hour {
				// Segments: ids share a prefix, segmentMax at a time.
				pre := func(i int) string { return res[i].ID[:store.SegmentPrefixLen] }
				if pre(0) != pre(segmentMax-1) || pre(0) == pre(segmentMax) || pre(segmentMax) != pre(2*segmentMax-1) {
					t.Errorf("ids 0, %d, %d, %d: %s %s %s %s: want segments of %d", segmentMax-1, segmentMax, 2*segmentMax-1,
						res[0].ID, res[segmentMax-1].ID, res[segmentMax].ID, res[2*segmentMax-1].ID, segmentMax)
				}
			}
			seen := map[string]bool{}
			p0 := partition.For(res[0].ID, parts)
			for i, r := range res {
				if r.Err != nil || seen[r.ID] {
					t.Fatalf("message %d: id %q, %v (seen before: %v)", i, r.ID, r.Err, seen[r.ID])
				}
				seen[r.ID] = true
				if p := partition.For(r.ID, parts); p != p0 {
					t.Errorf("message %d: %s in partition %d, the batch's first in %d", i, r.ID, p, p0)
				}
			}
			for _, i := range []int{0, 150, 299} {
				in, err := c.Get(ctx, "steer", res[i].ID)
				if err != nil || string(in.Body) != fmt.Sprint(i) || in.State != StateScheduled || !in.Due.Equal(res[i].Due) {
					t.Errorf("get message %d (%s) = %+v, %v", i, res[i].ID, in, err)
				}
				if err := c.Delete(ctx, "steer", res[i].ID); err != nil {
					t.Errorf("delete message %d: %v", i, err)
				}
			}
		}
		st, err := c.Inspector().Stats(ctx, "steer")
		if err != nil || st.Scheduled != 600-6 {
			t.Fatalf("stats = %+v, %v; want %d scheduled", st, err, 600-6)
		}

		// Given ids stay where murmur3 puts them.
		res, err := c.SendBatch(ctx, []Message{
			{Topic: "steer", ID: "given-1", Delay: time.Hour},
			{Topic: "steer"},
			{Topic: "steer", ID: "given-2", Delay: time.Hour},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("%s: %v", r.ID, r.Err)
			}
			if _, err := c.Get(ctx, "steer", r.ID); err != nil {
				t.Errorf("get %s: %v", r.ID, err)
			}
		}
		if res[0].ID != "given-1" || res[2].ID != "given-2" {
			t.Errorf("given ids came back as %q and %q", res[0].ID, res[2].ID)
		}
	})
}

// Concurrent single calls with generated ids share partitions too: far
// fewer commands than calls, every id distinct and readable.
func TestCoalescedGeneratedIDs(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 16})
		if _, err := c.ensureTopic(ctx, "cogen"); err != nil {
			t.Fatal(err)
		}
		before := c.Commands()
		ids := make([]string, 800)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(ids); i += 16 {
					sent, err := c.Send(ctx, Message{Topic: "cogen", Body: []byte(fmt.Sprint(i)), Delay: time.Hour})
					id := sent.ID
					if err != nil {
						t.Errorf("enqueue %d: %v", i, err)
					}
					ids[i] = id
				}
			}()
		}
		wg.Wait()
		n := c.Commands() - before
		t.Logf("800 concurrent enqueues with generated ids: %d commands", n)
		if n >= 800 {
			t.Errorf("800 enqueues sent %d commands: not coalesced", n)
		}
		seen := map[string]bool{}
		for i, id := range ids {
			if id == "" || seen[id] {
				t.Fatalf("call %d got id %q (seen before: %v)", i, id, seen[id])
			}
			seen[id] = true
		}
		for _, i := range []int{0, 399, 799} {
			in, err := c.Get(ctx, "cogen", ids[i])
			if err != nil || string(in.Body) != fmt.Sprint(i) {
				t.Errorf("get %d (%s) = %+v, %v", i, ids[i], in, err)
			}
		}
		st, err := c.Inspector().Stats(ctx, "cogen")
		if err != nil || st.Scheduled != 800 {
			t.Fatalf("stats = %+v, %v; want 800 scheduled", st, err)
		}

		// SendAsync's callback gets the id as stored.
		var mu sync.Mutex
		async := map[string]string{} // id -> body
		var written sync.WaitGroup
		for i := range 200 {
			body := fmt.Sprint("async-", i)
			written.Add(1)
			err := c.SendAsync(ctx, Message{Topic: "cogen", Body: []byte(body), Delay: time.Hour}, func(res SendResult) {
				id, err := res.ID, res.Err
				defer written.Done()
				if err != nil {
					t.Errorf("%s: %v", body, err)
				}
				mu.Lock()
				async[id] = body
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		written.Wait()
		if len(async) != 200 {
			t.Fatalf("200 async enqueues reported %d distinct ids", len(async))
		}
		for id, body := range async {
			if in, err := c.Get(ctx, "cogen", id); err != nil || string(in.Body) != body {
				t.Fatalf("get %s (%s) = %+v, %v", id, body, in, err)
			}
		}
	})
}

// With 256 partitions, about 2% of the places in a segment cannot be
// steered into their batch's partition: the next place is tried, and every
// id still lands in its chunk's partition (one failure used to leave every
// later id of the chunk unsteered). Beyond 256 none is steered. Either way
// every message is accepted under a distinct id that reads back, and
// counts.
func TestGeneratedIDsManyPartitions(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		for _, n := range []int{maxSteerPartitions, maxSteerPartitions + 44} {
			c := newClient(t, addr, Options{Partitions: n})
			topic := fmt.Sprintf("many-%d", n)
			msgs := make([]Message, 600)
			for i := range msgs {
				msgs[i] = Message{Topic: topic, Body: []byte(fmt.Sprint(i)), Delay: time.Hour}
			}
			res, err := c.SendBatch(ctx, msgs)
			if err != nil {
				t.Fatal(err)
			}
			seen, inPart := map[string]bool{}, map[int]int{}
			for i, r := range res {
				if r.Err != nil || seen[r.ID] {
					t.Fatalf("%d partitions, message %d: id %q, %v (seen before: %v)", n, i, r.ID, r.Err, seen[r.ID])
				}
				seen[r.ID] = true
				inPart[partition.For(r.ID, n)]++
				in, err := c.Get(ctx, topic, r.ID)
				if err != nil || string(in.Body) != fmt.Sprint(i) {
					t.Errorf("%d partitions, get message %d (%s) = %+v, %v", n, i, r.ID, in, err)
				}
			}
			counts := slices.Sorted(maps.Values(inPart))
			slices.Reverse(counts)
			switch {
			case n == maxSteerPartitions && len(counts) > 2:
				t.Errorf("%d partitions: messages per partition %v: want the partitions of the two chunks (%d and %d messages) only", n, counts, steerChunk, 600-steerChunk)
			case n > maxSteerPartitions && len(counts) < 150:
				t.Errorf("%d partitions: 600 unsteered ids in only %d partitions", n, len(counts))
			}
			st, err := c.Inspector().Stats(ctx, topic)
			if err != nil || st.Scheduled != 600 {
				t.Errorf("%d partitions: stats %+v, %v; want 600 scheduled", n, st, err)
			}
		}
	})
}
