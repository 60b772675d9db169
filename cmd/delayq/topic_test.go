package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// stored reports whether topic's meta key or its entry in the topics
// set exists.
func stored(t *testing.T, addr, topic string) bool {
	meta, listed := testenv.TopicStored(t, addr, delayq.DefaultNamespace, topic)
	return meta || listed
}

// The commands that read or change a topic's messages fail on a topic
// that does not exist, with an error (exit 1) that names it, and leave
// no trace of it in Redis.
func TestCommandsDoNotCreateTopics(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	base := []string{"--addr", addr, "--topic", "typo8"}
	for _, args := range [][]string{
		{"stats"}, {"stats", "--json"},
		{"get", "--id", "x"},
		{"delete", "--id", "x"},
		{"reschedule", "--id", "x", "--delay", "1m"},
		{"dead", "list"}, {"dead", "requeue", "--all"}, {"dead", "purge", "--id", "x"},
		{"partitions"}, {"export"},
		{"limits"}, {"limits", "--rate", "5/s"}, {"limits", "--clear"},
		{"schedule", "list"}, {"schedule", "pause", "--name", "s"}, {"schedule", "delete", "--name", "s"},
		{"topic", "delete"},
	} {
		name := strings.Join(args, " ")
		args := append(args, base...)
		if args[0] == "dead" || args[0] == "schedule" || args[0] == "topic" {
			args = append(args[:2:2], append(base, args[2:len(args)-len(base)]...)...)
		}
		_, _, err := runArgs(t, args...)
		var ue *usageError
		switch {
		case err == nil || errors.As(err, &ue):
			t.Errorf("%s: err = %v; want an error (exit 1)", name, err)
		case !strings.Contains(err.Error(), `topic "typo8" does not exist`):
			t.Errorf("%s: %q does not say the topic does not exist", name, err)
		}
		if stored(t, addr, "typo8") {
			t.Fatalf("%s stored topic typo8", name)
		}
	}
}

// "topic delete" refuses a topic that holds messages, naming what it
// holds and --force, and deletes it with --force.
func TestTopicDelete(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"send", "--addr", addr, "--topic", "old", "--id", "a", "--delay", "1h"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("send: %v\n%s", err, errb.String())
	}
	_, _, err := runArgs(t, "topic", "delete", "--addr", addr, "--topic", "old")
	if !errors.Is(err, delayq.ErrTopicInUse) || !strings.Contains(err.Error(), "1 message (1 scheduled, 0 in flight, 0 dead)") ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("delete of a topic with a message: %v; want a refusal naming the message and --force", err)
	}
	if !stored(t, addr, "old") {
		t.Fatal("a refused delete deleted the topic")
	}
	stdout, _, err := runArgs(t, "topic", "delete", "--addr", addr, "--topic", "old", "--force")
	if err != nil {
		t.Fatal(err)
	}
	if want := "deleted topic old: 1 scheduled, 0 in flight, 0 dead, 0 schedules\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if stored(t, addr, "old") {
		t.Fatal("the topic is still stored after topic delete --force")
	}
	if _, _, err := runArgs(t, "topic", "delete", "--addr", addr, "--topic", "old"); !errors.Is(err, delayq.ErrNoTopic) {
		t.Errorf("second delete: %v; want ErrNoTopic", err)
	}
}

// topic list shows every topic of the namespace with its partition
// count, from the registry of topics (no SCAN), through a proxy too, and
// a deleted topic leaves it.
func TestTopicList(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, tc := range []struct {
		topic, partitions string
	}{{"orders", "8"}, {"ordres", "4"}} {
		if _, _, err := runArgs(t, "send", "--addr", env.Proxy, "--topic", tc.topic, "--partitions", tc.partitions, "--id", "a"); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runArgs(t, "topic", "list", "--addr", env.Proxy)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Fields(lines[1])[0] != "orders" || strings.Fields(lines[1])[1] != "8" ||
		strings.Fields(lines[2])[0] != "ordres" || strings.Fields(lines[2])[1] != "4" {
		t.Fatalf("topic list:\n%s", out)
	}
	out, _, err = runArgs(t, "topic", "list", "--addr", env.Proxy, "--json")
	if err != nil || !strings.Contains(out, `"topic": "ordres"`) || !strings.Contains(out, `"partitions": 4`) {
		t.Fatalf("topic list --json: %v\n%s", err, out)
	}
	if _, _, err := runArgs(t, "topic", "delete", "--addr", env.Proxy, "--topic", "ordres", "--force"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runArgs(t, "topic", "list", "--addr", env.Proxy)
	if err != nil || strings.Contains(out, "ordres") || !strings.Contains(out, "orders") {
		t.Fatalf("topic list after delete: %v\n%s", err, out)
	}
	_, _, err = runArgs(t, "topic", "list", "--topic", "x")
	checkUsageError(t, "topic list --topic", err, "--topic")
}
