package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// TestExportImportUsage: bad flags are usage errors that name the flag,
// before any connection.
func TestExportImportUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"export"}, "--topic is required"},
		{[]string{"export", "--topic", "t", "--state", "sleeping"}, `--state: want scheduled, inflight, dead or done`},
		{[]string{"export", "--topic", "t", "--batch", "0"}, "--batch"},
		{[]string{"export", "--topic", "t", "--pace", "-1"}, "--pace"},
		{[]string{"export", "--topic", "t", "--rate", "-1"}, "--rate"},
		{[]string{"import", "--topic", "t", "--batch", "0"}, "--batch"},
		{[]string{"delete", "--topic", "t", "--id", "a", "--in", "f"}, "not both"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := runArgs(t, tt.args...)
			checkUsageError(t, tt.args, err, tt.want)
		})
	}
}

// TestExportImportCLI runs export to a file and import from stdin against
// a server: the file is the topic's JSON lines, the import reports a
// malformed line by its number and the duplicates, and exits 1.
func TestExportImportCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	in := `{"id":"a","body":"x","delay_ms":60000}` + "\n" + `{"id":"b","body_base64":"/w==","delay_ms":60000}` + "\n"
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"send", "--addr", addr, "--topic", "src", "--stdin"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("send: %v\n%s", err, errb.String())
	}
	file := filepath.Join(t.TempDir(), "src.jsonl")
	out.Reset()
	errb.Reset()
	if err := run(ctx, []string{"export", "--addr", addr, "--topic", "src", "--out", file}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("export: %v\n%s", err, errb.String())
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "exported 2 messages of src") {
		t.Fatalf("export with --out: stdout %q, stderr %q", out.String(), errb.String())
	}
	errb.Reset()
	if err := run(ctx, []string{"send", "--addr", addr, "--topic", "one", "--delay", "1m", "--body", "x"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("send: %v\n%s", err, errb.String())
	}
	out.Reset()
	if err := run(ctx, []string{"export", "--addr", addr, "--topic", "one"}, strings.NewReader(""), &out, &errb); err != nil ||
		!strings.Contains(errb.String(), "exported 1 message of one in ") {
		t.Fatalf("export of one message: %v, stderr %q", err, errb.String())
	}
	out.Reset()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 2 || !strings.Contains(string(data), `"body_base64":"/w=="`) {
		t.Fatalf("export file:\n%s", data)
	}
	lines := strings.SplitAfter(string(data), "\n")
	feed := lines[0] + "{\"id\":\"c\",\"state\":\"scheduled\",\"due\":\"soon\"}\n" + lines[1]
	errb.Reset()
	err = run(ctx, []string{"import", "--addr", addr, "--topic", "dst"}, strings.NewReader(feed), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 messages not imported: 0 duplicates, 1 malformed") ||
		!strings.Contains(errb.String(), "imported 2 of 3 messages into dst") {
		t.Fatalf("import: %v\n%s", err, errb.String())
	}
	errb.Reset()
	err = run(ctx, []string{"import", "--addr", addr, "--topic", "dst"}, strings.NewReader(feed), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "3 of 3 messages not imported: 2 duplicates, 1 malformed, 0 rejected") {
		t.Fatalf("second import: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"delete", "--addr", addr, "--topic", "src", "--in", file}, strings.NewReader(""), &out, &errb); err != nil ||
		out.String() != "deleted 2 messages of src; 0 were gone already\n" {
		t.Fatalf("delete --in: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := run(ctx, []string{"delete", "--addr", addr, "--topic", "src", "--in", file}, strings.NewReader(""), &out, &errb); err != nil ||
		out.String() != "deleted 0 messages of src; 2 were gone already\n" {
		t.Fatalf("delete --in again: %q, %v", out.String(), err)
	}
	for _, want := range []string{`line 1: id "a": duplicate`, `line 2: "due": parsing time "soon"`, `line 3: id "b": duplicate`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("import stderr lacks %q:\n%s", want, errb.String())
		}
	}
	// A long export prints its progress every second.
	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, `{"id":"m%d","delay_ms":60000}`+"\n", i)
	}
	if err := run(ctx, []string{"send", "--addr", addr, "--topic", "slow", "--stdin"}, strings.NewReader(many.String()), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	out.Reset()
	if err := run(ctx, []string{"export", "--addr", addr, "--topic", "slow", "--rate", "2000", "--batch", "100"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^exporting slow: [0-9]+ messages so far \([0-9]+/s\)$`).MatchString(errb.String()) ||
		!strings.Contains(errb.String(), "exported 3000 messages of slow in ") || strings.Count(out.String(), "\n") != 3000 {
		t.Errorf("export at 2000/s: stderr %q, %d lines", errb.String(), strings.Count(out.String(), "\n"))
	}
}

// TestImportStrictReportsOnce: with --strict, the malformed line that
// ends the import is reported once, and the command's error says the
// import stopped there without repeating the reason or the "delayq: "
// prefix main adds.
func TestImportStrictReportsOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	feed := `{"id":"a","state":"scheduled","due":"2030-01-02T03:04:05.000Z"}` + "\n" +
		`{"id":"c","state":"scheduled","due":"soon"}` + "\n" +
		`{"id":"d","state":"scheduled","due":"2030-01-02T03:04:05.000Z"}` + "\n"
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"import", "--addr", env.Backends[0], "--topic", "dst", "--strict"}, strings.NewReader(feed), &out, &errb)
	if err == nil {
		t.Fatalf("import --strict of a malformed line: no error\n%s", errb.String())
	}
	const reason = `parsing time "soon"`
	if n := strings.Count(errb.String()+err.Error(), reason); n != 1 {
		t.Errorf("the reason appears %d times in stderr and the error, want once:\n%s%v", n, errb.String(), err)
	}
	if strings.Contains(err.Error(), "delayq: ") || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "--strict") {
		t.Errorf("error %q: want one naming line 2 and --strict, without a prefix", err)
	}
	if !strings.Contains(errb.String(), "imported 1 of 2 messages into dst") {
		t.Errorf("stderr lacks the summary:\n%s", errb.String())
	}
	// Counts of one take the singular.
	errb.Reset()
	err = run(context.Background(), []string{"import", "--addr", env.Backends[0], "--topic", "dst"}, strings.NewReader(feed[:strings.IndexByte(feed, '\n')+1]), &out, &errb)
	if err == nil || err.Error() != "1 of 1 message not imported: 1 duplicate, 0 malformed, 0 rejected" ||
		!strings.Contains(errb.String(), "imported 0 of 1 message into dst in ") {
		t.Errorf("import of one duplicate: %v\n%s", err, errb.String())
	}
	file := filepath.Join(t.TempDir(), "one.jsonl")
	if err := os.WriteFile(file, []byte(feed), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"delete", "--addr", env.Backends[0], "--topic", "dst", "--in", file}, strings.NewReader(""), &out, &errb); err != nil ||
		out.String() != "deleted 1 message of dst; 2 were gone already\n" {
		t.Errorf("delete --in: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"delete", "--addr", env.Backends[0], "--topic", "dst", "--in", file}, strings.NewReader(""), &out, &errb); err != nil ||
		out.String() != "deleted 0 messages of dst; 3 were gone already\n" {
		t.Errorf("delete --in again: %q, %v", out.String(), err)
	}
}

// TestExportProgressLine: the progress of an export running never reads
// as the line of one that finished ("exported N messages").
func TestExportProgressLine(t *testing.T) {
	got := progressLine("orders", delayq.ExportStats{Exported: 454, Elapsed: 2 * time.Second})
	if want := "exporting orders: 454 messages so far (227/s)"; got != want {
		t.Errorf("progress line %q, want %q", got, want)
	}
}

// TestImportDoneLinesCLI: import writes a done line within its window,
// and leaves out one whose window ended, saying so, without failing; an
// export of the live states leaves the done line out.
func TestImportDoneLinesCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format("2006-01-02T15:04:05.000Z") }
	feed := fmt.Sprintf(`{"id":"kept","state":"done","finished":%q,"unique_until":%q}`+"\n"+
		`{"id":"gone","state":"done","finished":%q,"unique_until":%q}`+"\n", at(-time.Minute), at(time.Hour), at(-2*time.Hour), at(-time.Hour))
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"import", "--addr", addr, "--topic", "dst"}, strings.NewReader(feed), &out, &errb); err != nil {
		t.Fatalf("import: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"imported 1 of 2 messages into dst", "left out 1 done id whose uniqueness window had ended: it is free"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("import stderr lacks %q:\n%s", want, errb.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"export", "--addr", addr, "--topic", "dst"}, strings.NewReader(""), &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), `{"id":"kept","state":"done","finished":"`+at(-time.Minute)+`","unique_until":"`+at(time.Hour)+`"}`) || strings.Contains(out.String(), `"gone"`) {
		t.Errorf("export: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"export", "--addr", addr, "--topic", "dst", "--state", "scheduled,inflight,dead"}, strings.NewReader(""), &out, io.Discard); err != nil ||
		out.Len() != 0 {
		t.Errorf("export of the live states: %v\n%s", err, out.String())
	}
}
