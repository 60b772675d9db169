package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/wire"
)

// pause and resume write the topic's pause, stats and partitions print
// it, and a topic that does not exist is refused and not created.
func TestPauseResumeCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	if _, _, err := runArgs(t, "pause", "--addr", addr, "--topic", "ghost"); !errors.Is(err, delayq.ErrNoTopic) {
		t.Errorf("pause of a topic never used: %v, want ErrNoTopic", err)
	}
	if _, _, err := runArgs(t, "resume", "--addr", addr, "--topic", "ghost"); !errors.Is(err, delayq.ErrNoTopic) {
		t.Errorf("resume of a topic never used: %v, want ErrNoTopic", err)
	}
	if stored(t, addr, "ghost") {
		t.Error("pause and resume created the topic")
	}
	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t", "--delay", "1h"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runArgs(t, "pause", "--addr", addr, "--topic", "t", "--for", "1m", "--until", "2099-01-01T00:00:00Z"); err == nil ||
		!strings.Contains(err.Error(), "--for and --until are mutually exclusive") {
		t.Errorf("--for with --until: %v, want a usage error", err)
	}
	if _, _, err := runArgs(t, "pause", "--addr", addr, "--topic", "t", "--for", "0s"); err == nil || !strings.Contains(err.Error(), "--for") {
		t.Errorf("--for 0s: %v, want a usage error naming --for", err)
	}
	out, _, err := runArgs(t, "pause", "--addr", addr, "--topic", "t")
	if err != nil || out != "t: paused until resumed\n" {
		t.Errorf("pause: %q, %v", out, err)
	}
	if out, _, _ := runArgs(t, "stats", "--addr", addr, "--topic", "t"); !strings.Contains(out, "\npaused until resumed\n") {
		t.Errorf("stats of a topic paused until resumed:\n%s", out)
	}
	before := time.Now()
	out, _, err = runArgs(t, "pause", "--addr", addr, "--topic", "t", "--for", "1m")
	if err != nil {
		t.Fatal(err)
	}
	_, s, _ := strings.Cut(strings.TrimSpace(out), "t: paused until ")
	end, perr := time.Parse(time.RFC3339Nano, s)
	if perr != nil || end.Before(before.Add(time.Minute)) || end.After(time.Now().Add(time.Minute+time.Millisecond)) {
		t.Fatalf("pause --for 1m printed %q", out)
	}
	if out, _, _ := runArgs(t, "partitions", "--addr", addr, "--topic", "t"); !strings.Contains(out, "t: paused until "+wire.Time(end)) {
		t.Errorf("partitions of a paused topic:\n%s", out)
	}
	out, _, _ = runArgs(t, "stats", "--addr", addr, "--topic", "t", "--json")
	var js struct {
		Pause struct {
			Paused      bool   `json:"paused"`
			PausedUntil string `json:"paused_until"`
		} `json:"pause"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || !js.Pause.Paused || js.Pause.PausedUntil != wire.Time(end) {
		t.Errorf("stats --json of a paused topic (%v):\n%s", err, out)
	}
	if out, _, err := runArgs(t, "resume", "--addr", addr, "--topic", "t"); err != nil || out != "t: resumed\n" {
		t.Errorf("resume: %q, %v", out, err)
	}
	if out, _, _ := runArgs(t, "stats", "--addr", addr, "--topic", "t"); strings.Contains(out, "paused") {
		t.Errorf("stats after resume still says paused:\n%s", out)
	}
}
