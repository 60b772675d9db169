package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

func TestInfoJSON(t *testing.T) {
	died := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	in := &delayq.Info{Topic: "t", ID: "m", Partition: 3, State: delayq.StateDead, Due: died, DiedAt: died,
		Attempts: 2, Created: died, Updated: died, LastError: "boom", Body: []byte{0x80}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	// Times print with milliseconds of fixed width, as export writes them.
	want := `{"topic":"t","id":"m","partition":3,"state":"dead","due":"2030-01-02T03:04:05.000Z",` +
		`"died_at":"2030-01-02T03:04:05.000Z","attempts":2,"max_attempts":0,"created":"2030-01-02T03:04:05.000Z",` +
		`"updated":"2030-01-02T03:04:05.000Z","last_error":"boom","body_base64":"gA=="}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func TestStatsTable(t *testing.T) {
	due := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := &delayq.TopicStats{Topic: "t", Count: 2, Scheduled: 3, DueNow: 2, Lag: 1500 * time.Millisecond, Consumers: 4, InFlight: 1, Dead: 2,
		Partitions: []delayq.PartitionStats{
			{Partition: 0, Scheduled: 3, DueNow: 2, InFlight: 1, OldestDue: &due, Owner: "host-1", Token: 9},
			{Partition: 1, Dead: 2},
		}}
	var buf bytes.Buffer
	if err := writeStatsTable(&buf, ts); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"partition", "scheduled", "due_now", "inflight", "dead", "oldest_due", "owner", "token"},
		{"0", "3", "2", "1", "0", "2030-01-02T03:04:05.000Z", "host-1", "9"},
		{"1", "0", "0", "0", "2", "-", "-", "0"},
		{"total", "3", "2", "1", "2"},
		{"lag", "1.5s,", "consumers", "4"},
		{"partitions", "2"},
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}
}

// TestDeadTableTimes: the died_at column has one width whatever the
// milliseconds, the form export writes.
func TestDeadTableTimes(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	list := []*delayq.Info{
		{ID: "a", DiedAt: at},
		{ID: "b", DiedAt: at.Add(500 * time.Millisecond)},
		{ID: "c", DiedAt: at.Add(120 * time.Millisecond)},
	}
	var buf bytes.Buffer
	if err := writeDeadTable(&buf, list); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2030-01-02T03:04:05.000Z", "2030-01-02T03:04:05.500Z", "2030-01-02T03:04:05.120Z"} {
		if !strings.Contains(buf.String(), want+"  ") {
			t.Errorf("dead table lacks %s:\n%s", want, buf.String())
		}
	}
}
