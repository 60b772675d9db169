package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// partitionsTopic creates topic with n partitions and a message due in
// an hour.
func partitionsTopic(t *testing.T, addr, topic, n string) {
	t.Helper()
	if _, stderr, err := runArgs(t, "send", "--addr", addr, "--topic", topic, "--partitions", n, "--delay", "1h", "--body", "x"); err != nil {
		t.Fatalf("send: %v %s", err, stderr)
	}
}

// With no consumer on the topic, "--set N --wait" says at once that none
// runs, what ends the change and how to cancel it, and exits 1 with the
// change started; "--set" of the old count cancels it (and the note then
// offers no --cancel: that of a cancel changes nothing), "--cancel" again
// changes nothing, another count is refused naming --cancel.
func TestPartitionsNoConsumer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	partitionsTopic(t, addr, "idle", "4")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	start := time.Now()
	err := run(ctx, []string{"partitions", "--addr", addr, "--topic", "idle", "--set", "8", "--wait"}, strings.NewReader(""), &out, &errOut)
	if took := time.Since(start); err == nil || ctx.Err() != nil || took > 5*time.Second {
		t.Fatalf("--set 8 --wait with no consumer: %v after %v, want an error at once", err, took)
	}
	for _, want := range []string{"no consumer runs on topic idle", "change from 4 to 8 partitions", "delayq sub --topic idle", "delayq partitions --topic idle --cancel"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "changing to 8") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stdout = %q, want one progress line", out.String())
	}
	_, _, err = runArgs(t, "partitions", "--addr", addr, "--topic", "idle", "--set", "16")
	if !errors.Is(err, delayq.ErrChangeRunning) || !strings.Contains(err.Error(), "--cancel") {
		t.Errorf("--set 16 during the change: %v, want ErrChangeRunning naming --cancel", err)
	}
	if err != nil && (!strings.HasPrefix(err.Error(), "delayq: a change of the partition count runs: topic \"idle\"") || strings.Count(err.Error(), "delayq: ") != 1) {
		t.Errorf("--set 16 during the change: %q, want one \"delayq: \" prefix, first", err)
	}
	stdout, stderr, err := runArgs(t, "partitions", "--addr", addr, "--topic", "idle", "--set", "4")
	if err != nil || !strings.Contains(stdout, "change to 8 partitions cancelled, moving back to 4") || !strings.Contains(stderr, "no consumer runs on topic idle") {
		t.Errorf("--set 4 (the old count): %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	if strings.Contains(stderr, "--cancel") {
		t.Errorf("--set 4 (the old count): stderr %q offers to cancel the cancel", stderr)
	}
	stdout, stderr, err = runArgs(t, "partitions", "--addr", addr, "--topic", "idle", "--cancel")
	if err != nil || !strings.Contains(stdout, "cancelled, moving back to 4") || strings.Contains(stderr, "--cancel") {
		t.Errorf("--cancel again: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	if _, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "idle", "--cancel", "--set", "4"); err == nil {
		t.Error("--cancel with --set accepted")
	}
}

// Past max(64, 32 per live consumer) partitions, --set is refused with an
// error naming the count, the ceiling, the consumers and --force; --force
// sets it.
func TestPartitionsCeiling(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	partitionsTopic(t, addr, "big", "16")
	_, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "big", "--set", "4096")
	if !errors.Is(err, delayq.ErrTooManyPartitions) {
		t.Fatalf("--set 4096: %v, want ErrTooManyPartitions", err)
	}
	for _, want := range []string{"4096 partitions", "ceiling of 64", "0 live consumers", "KB of memory", "Redis commands a second", "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "big", "--set", "64"); err != nil {
		t.Errorf("--set 64, the ceiling: %v", err)
	}
	if _, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "big", "--cancel"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "big", "--set", "16"); err != nil {
		t.Fatal(err) // the cancel of the cancel: back to 16 -> 64
	}
	if _, _, err := runArgs(t, "partitions", "--addr", addr, "--topic", "big", "--set", "64", "--force"); err != nil {
		t.Errorf("--set 64 --force: %v", err)
	}
}

// --wait with a consumer running prints a line per change of state (not
// a line a second), says once when the consumers are gone, and when
// interrupted says the change goes on and how to follow or cancel it.
func TestPartitionsWaitFollows(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	partitionsTopic(t, addr, "follow", "4")
	defer func(d time.Duration) { partitionsPoll = d }(partitionsPoll)
	partitionsPoll = 50 * time.Millisecond

	c, err := delayq.New(delayq.Options{Addr: addr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: "follow"},
		func(context.Context, *delayq.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	kdone := make(chan error, 1)
	go func() { kdone <- k.Run(context.Background()) }()
	waitCond(t, "the consumer owns the 4 partitions", func() bool { return len(k.Stats().Owned) == 4 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"partitions", "--addr", addr, "--topic", "follow", "--set", "8", "--wait"}, strings.NewReader(""), &out, io.Discard)
	}()
	waitCond(t, "the change started", func() bool { return strings.Contains(out.String(), "changing to 8") })
	time.Sleep(time.Second) // 20 polls
	if n := strings.Count(out.String(), "\n"); n > 4 {
		t.Errorf("%d lines in a second with nothing moving, want a line per change of state:\n%s", n, out.String())
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	<-kdone
	waitCond(t, "the note that no consumer runs", func() bool {
		return strings.Contains(out.String(), "no consumer runs on topic follow any more")
	})
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(out.String(), "no consumer runs on topic follow any more"); n != 1 {
		t.Errorf("said %d times that the consumers are gone, want once:\n%s", n, out.String())
	}
	cancel()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "goes on without this command") || !strings.Contains(err.Error(), "--cancel") ||
		!strings.Contains(err.Error(), "--wait") {
		t.Errorf("interrupted --wait: %v, want it to say the change goes on and how to follow or cancel it", err)
	}
}

// waitCond polls cond for up to 20 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The progress line: counts in the singular and plural, the time with
// its milliseconds, the estimate labelled, the settle time left.
func TestPartitionsLine(t *testing.T) {
	since := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	settle := since.Add(30 * time.Second)
	info := &delayq.PartitionsInfo{Topic: "t", Count: 4, Next: 8, Since: &since, SettleUntil: &settle,
		Sources: []int{0, 1, 2, 3}, Moved: []int{1}, MovedMessages: 1, Left: 10, ToMove: 5, Consumers: 1, OwnedSources: 3}
	got := partitionsLine(info, since.Add(10*time.Second))
	want := "t: 4 partitions, changing to 8 since 2030-01-02T03:04:05.000Z: 1 of 4 source partitions done, 1 message moved, " +
		"about 5 messages left to move (of 10 in the sources); settle time 20s left; 1 consumer"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := partitionsLine(&delayq.PartitionsInfo{Topic: "one", Count: 1}, since); got != "one: 1 partition" {
		t.Errorf("one partition: %q", got)
	}
	info.Cancelled, info.Count, info.Next, info.ToMoveExact, info.ToMove, info.MovedMessages, info.Consumers, info.OwnedSources = true, 8, 4, true, 1, 2, 0, 0
	got = partitionsLine(info, since.Add(40*time.Second))
	want = "t: change to 8 partitions cancelled, moving back to 4 since 2030-01-02T03:04:05.000Z: 1 of 4 source partitions done, 2 messages moved, " +
		"1 message left to move; settled; no consumer runs"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// stats prints the progress of a running change under its table.
func TestStatsTableChange(t *testing.T) {
	since := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	settle := since.Add(30 * time.Second)
	ts := &delayq.TopicStats{Topic: "t", Count: 2, ChangingTo: 4, Change: &delayq.PartitionsInfo{Topic: "t", Count: 2, Next: 4,
		Since: &since, SettleUntil: &settle, Sources: []int{0, 1}, MovedMessages: 3, Left: 8, ToMove: 4, Consumers: 2, OwnedSources: 2},
		Partitions: []delayq.PartitionStats{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}}}
	var buf bytes.Buffer
	if err := writeStatsTable(&buf, ts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partitions 2, changing to 4\n", "0 of 2 source partitions done, 3 messages moved, about 4 messages left to move (of 8 in the sources)", "; 2 consumers\n"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("stats table lacks %q:\n%s", want, buf.String())
		}
	}
}

// "partitions --auto" stores an automatic count (the flags not given at
// their defaults) and prints it; --set and --cancel are refused while it
// is on; "--auto off" turns it off; the auto
// flags without --auto, --auto beside --set and a bad value are usage
// errors.
func TestPartitionsAuto(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	partitionsTopic(t, addr, "auto", "4")
	base := []string{"partitions", "--addr", addr, "--topic", "auto"}
	stdout, stderr, err := runArgs(t, append(base, "--auto", "--min", "4", "--max", "32", "--grow-after", "20s")...)
	if err != nil {
		t.Fatalf("--auto: %v %s", err, stderr)
	}
	if want := "auto: auto 4-32, grow after 20s, shrink after 10m0s, cooldown 10s; wants no change"; !strings.Contains(stdout, want) {
		t.Errorf("--auto printed %q, want a line %q", stdout, want)
	}
	c, err := delayq.New(delayq.Options{Addr: addr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Inspector().AutoPartitionsOf(context.Background(), "auto")
	if err != nil || a == nil || a.Min != 4 || a.Max != 32 || a.GrowAfter != 20*time.Second || a.Cooldown != delayq.DefaultAutoCooldown {
		t.Fatalf("stored: %+v, %v", a, err)
	}
	// While it is on, --set and --cancel are refused, naming --auto off.
	for _, args := range [][]string{{"--set", "8"}, {"--cancel"}} {
		if _, _, err := runArgs(t, append(base, args...)...); !errors.Is(err, delayq.ErrAutoPartitions) || !strings.Contains(err.Error(), "--auto off") {
			t.Errorf("%v on an automatic count: %v; want ErrAutoPartitions naming --auto off", args, err)
		}
	}
	if info, err := c.Inspector().Partitions(context.Background(), "auto"); err != nil || info.Count != 4 || info.Next != 0 {
		t.Fatalf("after a refused --set: %+v, %v; want 4 partitions, no change", info, err)
	}
	if stdout, stderr, err = runArgs(t, append(base, "--auto", "off")...); err != nil || stdout != "auto: 4 partitions\n" {
		t.Fatalf("--auto off: %q %v %s", stdout, err, stderr)
	}
	if a, err = c.Inspector().AutoPartitionsOf(context.Background(), "auto"); err != nil || a != nil {
		t.Fatalf("after --auto off: %+v, %v", a, err)
	}
	for _, args := range [][]string{
		{"--min", "2"},
		{"--auto", "off", "--max", "8"},
		{"--auto", "--set", "8"},
		{"--auto=maybe"},
		{"--auto", "--min", "8", "--max", "4"},
	} {
		_, _, err := runArgs(t, append(base, args...)...)
		var ue *usageError
		if err == nil || (!errors.As(err, &ue) && !errors.Is(err, delayq.ErrInvalid)) {
			t.Errorf("%v: %v, want a usage error or ErrInvalid", args, err)
		}
	}
}
