package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// export writes the topic's controls and says so; import applies those
// the destination has none of and says which it kept; delete --in
// passes over the controls line.
func TestExportImportControlsCLI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, topic := range []string{"src", "dst"} {
		if _, err := c.Send(ctx, delayq.Message{Topic: topic, ID: "in-" + topic, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Admin().Pause(ctx, "src", delayq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "src", delayq.Limits{Rate: 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "dst", delayq.Limits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "src.jsonl")
	_, stderr, err := runArgs(t, "export", "--addr", addr, "--topic", "src", "--out", file)
	if err != nil || !strings.Contains(stderr, "exported the controls of src") {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	_, stderr, err = runArgs(t, "import", "--addr", addr, "--topic", "dst", "--in", file)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	for _, want := range []string{"imported 1 of 1 message into dst", "applied the file's pause to dst", "kept the limits that dst had of its own"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("import's stderr lacks %q:\n%s", want, stderr)
		}
	}
	if l, err := c.Inspector().Limits(ctx, "dst"); err != nil || l != (delayq.Limits{Concurrency: 2}) {
		t.Errorf("dst limits %+v, %v", l, err)
	}
	stdout, stderr, err := runArgs(t, "delete", "--addr", addr, "--topic", "src", "--in", file)
	if err != nil || !strings.Contains(stdout, "deleted 1 message of src") {
		t.Errorf("delete --in: %v\n%s%s", err, stdout, stderr)
	}
}
