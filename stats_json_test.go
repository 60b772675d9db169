package delayq

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStatsTimesFixedWidth: the times of TopicStats and PartitionsInfo
// (stats --json, partitions --json, GET .../stats) have three-digit
// milliseconds, as every other time delayq prints, trailing zeros kept.
func TestStatsTimesFixedWidth(t *testing.T) {
	since := time.Date(2026, 11, 26, 7, 45, 14, 820_000_000, time.UTC)
	settle := since.Add(30 * time.Second)
	due := time.Date(2026, 11, 26, 7, 48, 27, 0, time.UTC)
	until := time.Date(2026, 11, 26, 8, 0, 0, 500_000_000, time.UTC)
	ts := &TopicStats{
		Pause: PauseState{Paused: true, PausedUntil: &until},
		Topic: "orders", Count: 64, ChangingTo: 32,
		Change:     &PartitionsInfo{Topic: "orders", Count: 64, Next: 32, Since: &since, SettleUntil: &settle},
		Partitions: []PartitionStats{{Partition: 0, Scheduled: 1, OldestDue: &due, Owner: "w", Token: 7}, {Partition: 1}},
	}
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"since":"2026-11-26T07:45:14.820Z"`, `"settle_until":"2026-11-26T07:45:44.820Z"`, `"oldest_due":"2026-11-26T07:48:27.000Z"`, `"owner":"w","token":7`,
		`"pause":{"paused":true,"paused_until":"2026-11-26T08:00:00.500Z"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s\nlacks %s", b, want)
		}
	}
	if strings.Count(string(b), "oldest_due") != 1 {
		t.Errorf("%s: oldest_due of a partition with none", b)
	}
	var back TopicStats // what a client of the API reads back
	if err := json.Unmarshal(b, &back); err != nil || !back.Change.Since.Equal(since) || !back.Partitions[0].OldestDue.Equal(due) || back.Partitions[1].OldestDue != nil ||
		!back.Pause.Paused || !back.Pause.PausedUntil.Equal(until) {
		t.Errorf("read back: %+v, %v", back, err)
	}
	b, err = json.Marshal(ts.Change) // partitions --json
	if err != nil || !strings.Contains(string(b), `"since":"2026-11-26T07:45:14.820Z"`) {
		t.Errorf("PartitionsInfo: %s, %v", b, err)
	}
}
