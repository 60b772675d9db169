package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

func TestParseLine(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 500_000_000, time.UTC)
	tests := []struct {
		name    string
		line    string
		want    delayq.Message // Topic is always "t" on success
		wantErr string         // substring of the error; "" for success
	}{
		{"body and delay", `{"id":"a","body":"hi","delay_ms":1500}`, delayq.Message{ID: "a", Body: []byte("hi"), Delay: 1500 * time.Millisecond}, ""},
		{"delay string", `{"id":"a","delay":"1m30s"}`, delayq.Message{ID: "a", Delay: 90 * time.Second}, ""},
		{"at", `{"id":"a","at":"2030-01-02T03:04:05.5Z"}`, delayq.Message{ID: "a", At: at}, ""},
		{"neither means now", `{"id":"a","body":""}`, delayq.Message{ID: "a", Body: []byte{}}, ""},
		{"no id", `{"body":"x"}`, delayq.Message{Body: []byte("x")}, ""},
		{"base64 body", `{"id":"b","body_base64":"//4A"}`, delayq.Message{ID: "b", Body: []byte{0xff, 0xfe, 0}}, ""},
		{"nulls are absent", `{"id":"a","at":null,"delay_ms":5,"body_base64":null}`, delayq.Message{ID: "a", Delay: 5 * time.Millisecond}, ""},
		{"max attempts", `{"id":"a","max_attempts":3}`, delayq.Message{ID: "a", MaxAttempts: 3}, ""},
		{"trailing newline", "{\"id\":\"a\"}\r\n", delayq.Message{ID: "a"}, ""},
		{"both delay and at", `{"id":"a","delay_ms":1,"at":"2030-01-02T03:04:05Z"}`, delayq.Message{ID: "a"}, "set only one of delay, delay_ms and at"},
		{"both bodies", `{"id":"a","body":"x","body_base64":"eA=="}`, delayq.Message{ID: "a"}, "set only one of body and body_base64"},
		{"negative delay", `{"id":"a","delay_ms":-1}`, delayq.Message{ID: "a"}, "delay_ms -1 is negative"},
		{"huge delay", `{"id":"a","delay_ms":9223372036854775807}`, delayq.Message{ID: "a"}, "too large"},
		{"fractional delay", `{"id":"a","delay_ms":1.5}`, delayq.Message{ID: "a"}, "delay_ms must be an integer"},
		{"bad at", `{"id":"a","at":"tomorrow"}`, delayq.Message{ID: "a"}, `at "tomorrow" is not an RFC 3339 time`},
		{"bad base64", `{"id":"a","body_base64":"!!"}`, delayq.Message{ID: "a"}, "body_base64 is not standard base64"},
		{"numeric delay", `{"id":"a","delay":5}`, delayq.Message{ID: "a"}, "delay must be a duration string"},
		{"negative delay string", `{"id":"a","delay":"-1s"}`, delayq.Message{ID: "a"}, `delay "-1s" is negative`},
		{"delay and delay_ms", `{"id":"a","delay":"1s","delay_ms":5}`, delayq.Message{ID: "a"}, "set only one of delay, delay_ms and at"},
		{"unknown field", `{"id":"a","delay_s":5}`, delayq.Message{ID: "a"}, `unknown field "delay_s"`},
		{"bad id", `{"id":"a\u0001b"}`, delayq.Message{ID: "a\x01b"}, "id: "},
		{"bad JSON", `{"id":"a",`, delayq.Message{}, "malformed JSON"},
		{"not an object", `["a"]`, delayq.Message{}, "want a JSON object, not array"},
		{"null", `null`, delayq.Message{}, "want a JSON object, not null"},
		{"two values", `{"id":"a"} {"id":"b"}`, delayq.Message{ID: "a"}, "data after the JSON object"},
		{"negative max attempts", `{"id":"a","max_attempts":-1}`, delayq.Message{ID: "a"}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLine("t", httpapi.Duplicates{}, []byte(tt.line))
			if got.ID != tt.want.ID {
				t.Errorf("id = %q, want %q", got.ID, tt.want.ID)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Topic != "t" || !bytes.Equal(got.Body, tt.want.Body) || got.Delay != tt.want.Delay ||
				!got.At.Equal(tt.want.At) || got.MaxAttempts != tt.want.MaxAttempts {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// unusedClient returns a client whose address accepts no connections: the
// tests that use it never reach Redis.
func unusedClient(t *testing.T) *delayq.Client {
	t.Helper()
	c, err := delayq.New(delayq.Options{Addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSendLinesRejects feeds only lines rejected before any enqueue, so no
// Redis is needed, and checks the per-line report and the summary.
func TestSendLinesRejects(t *testing.T) {
	big := strings.Repeat("x", 2<<20) // longer than any default scanner buffer
	tests := []struct {
		name    string
		input   string
		batch   int
		stderr  []string
		wantErr string
	}{
		{"line numbers count blank lines", "\n{bad\n\n   \n{\"id\":\"k\",\"delay_ms\":-3}\n", 500, []string{
			`line 2: id "": malformed JSON at byte 2: `,
			`line 5: id "k": delay_ms -3 is negative`,
		}, "2 of 2 messages rejected"},
		{"batches keep line order", "{\"id\":\"a\",\"x\":1}\n{\"id\":\"b\",\"x\":1}\n{\"id\":\"c\",\"x\":1}", 2, []string{
			`line 1: id "a": unknown field "x"`,
			`line 2: id "b": unknown field "x"`,
			`line 3: id "c": unknown field "x"`,
		}, "3 of 3 messages rejected"},
		{"long line", "{\"id\":\"big\",\"body\":\"" + big + "\",\"delay_ms\":1,\"at\":\"2030-01-01T00:00:00Z\"}\n", 500, []string{
			`line 1: id "big": set only one of delay, delay_ms and at (got delay_ms and at)`,
		}, "1 of 1 message rejected"},
		{"id with quotes is escaped", `{"id":"a\"b","delay_ms":-1}`, 500, []string{
			`line 1: id "a\"b": delay_ms -1 is negative`,
		}, "1 of 1 message rejected"},
		{"empty input", "\n\n", 500, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := sendLines(context.Background(), stdinSend{client: unusedClient(t), topic: "t", batch: tt.batch}, strings.NewReader(tt.input), &stdout, &stderr)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(tt.stderr) == 0 {
				lines = nil
				if stderr.Len() != 0 {
					t.Errorf("stderr = %q, want nothing", stderr.String())
				}
			}
			if len(lines) != len(tt.stderr) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(tt.stderr), stderr.String())
			}
			for i, w := range tt.stderr {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("stderr line %d = %q, want prefix %q", i+1, lines[i], w)
				}
			}
		})
	}
}

func TestRejectionFormat(t *testing.T) {
	err := fmt.Errorf("%w: %q in topic t", delayq.ErrDuplicate, "x")
	got := rejection(7, "x", err)
	want := `line 7: id "x": duplicate message id: "x" in topic t`
	if got != want {
		t.Errorf("rejection = %q, want %q", got, want)
	}
}

// TestSendStdinStopsOnCancel checks that a cancelled context ends the read loop.
func TestSendStdinStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := sendLines(ctx, stdinSend{client: unusedClient(t), topic: "t", batch: 500}, strings.NewReader("{\"x\":1}\n{\"x\":2}\n"), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stopped at line 1") {
		t.Fatalf("err = %v, want it to stop at line 1", err)
	}
}

// TestSendIDFromBodyUsage: --id-from-body and --id together are a usage
// error naming both, found before any connection; with --stdin, --id is
// refused as ever.
func TestSendIDFromBodyUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--id", "x", "--id-from-body", "--body", "b"}, []string{"--id and --id-from-body"}},
		{[]string{"--id-from-body", "--id", "", "--body", "b"}, []string{"--id and --id-from-body"}},
		{[]string{"--stdin", "--id-from-body", "--id", "x"}, []string{"--id cannot be used with --stdin"}},
	} {
		_, _, err := runArgs(t, append([]string{"send", "--addr", "127.0.0.1:1", "--topic", "t"}, tc.args...)...)
		checkUsageError(t, append([]string{"send"}, tc.args...), err, tc.want...)
	}
}

// TestSendIDFromBody: send --id-from-body gives a message the id
// delayq.IDFrom(body), so the same body sent again, from --body or
// --body-file, is refused as a duplicate (exit 1) and another body is
// not. With --stdin, each line that sets no "id" gets IDFrom of its body
// (body or body_base64), a line's own id is kept, and without the flag a
// line without an id gets a generated one.
func TestSendIDFromBody(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	send := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"send", "--addr", addr, "--topic", "idfrom"}, args...), strings.NewReader(stdin), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	// isDuplicate checks that err is the refusal of a duplicate: exit 1,
	// saying "duplicate" and the id.
	isDuplicate := func(what string, err error, id string) {
		t.Helper()
		var ue *usageError
		if !errors.Is(err, delayq.ErrDuplicate) || errors.As(err, &ue) || !strings.Contains(err.Error(), "duplicate") || !strings.Contains(err.Error(), id) {
			t.Errorf("%s: %v, want ErrDuplicate naming %s (exit 1)", what, err, id)
		}
	}

	const body = `{"user":42,"day":"2030-01-02"}`
	want := delayq.IDFrom(body)
	if want != "62205QPX1NVDFDFHECSH6C0VE1" { // IDFrom's ids are a stable contract
		t.Fatalf("IDFrom(%q) = %s, want 62205QPX1NVDFDFHECSH6C0VE1", body, want)
	}
	if out, _, err := send("", "--id-from-body", "--delay", "1h", "--body", body); err != nil || out != want+"\n" {
		t.Fatalf("send --id-from-body: %q, %v; want %s", out, err, want)
	}
	out, _, err := send("", "--id-from-body", "--delay", "1h", "--body", body)
	isDuplicate("the same body again", err, want)
	if out != "" {
		t.Errorf("the same body again printed %q, want nothing", out)
	}
	path := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = send("", "--id-from-body", "--body-file", path)
	isDuplicate("the same body from --body-file", err, want)
	_, _, err = send(body, "--id-from-body", "--body-file", "-")
	isDuplicate("the same body from stdin", err, want)
	other := delayq.IDFrom(body + " ")
	if out, _, err := send("", "--id-from-body", "--delay", "1h", "--body", body+" "); err != nil || out != other+"\n" || other == want {
		t.Errorf("send --id-from-body, another body: %q, %v; want %s", out, err, other)
	}
	// The flag changes nothing but the id: --on-duplicate still applies.
	if out, _, err := send("", "--id-from-body", "--delay", "2h", "--body", body, "--on-duplicate", "replace"); err != nil || !strings.HasPrefix(out, want+" replaced, due ") {
		t.Errorf("send --id-from-body --on-duplicate replace: %q, %v; want %s replaced", out, err, want)
	}

	lines := strings.Join([]string{
		`{"body":` + jsonString(body) + `,"delay":"1h"}`, // 1 rejected: the id of the body sent above
		`{"body":"fresh","delay":"1h"}`,                  // 2 created as IDFrom("fresh")
		`{"id":"own","body":"fresh","delay":"1h"}`,       // 3 created, its own id
		`{"body_base64":"ZnJlc2g=","delay":"1h"}`,        // 4 rejected: "fresh" again, in the same batch
		`{"id":"","body":"empty id","delay":"1h"}`,       // 5 an empty id is no id
	}, "\n")
	out, errOut, err := send(lines, "--stdin", "--id-from-body")
	if err == nil || err.Error() != "2 of 5 messages rejected" {
		t.Errorf("send --stdin --id-from-body: %v, want 2 of 5 rejected", err)
	}
	if w := delayq.IDFrom("fresh") + "\nown\n" + delayq.IDFrom("empty id") + "\n"; out != w {
		t.Errorf("send --stdin --id-from-body printed %q, want %q", out, w)
	}
	for _, w := range []string{
		fmt.Sprintf(`line 1: id %q: duplicate`, want),
		fmt.Sprintf(`line 4: id %q: duplicate`, delayq.IDFrom("fresh")),
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	// Without the flag a line without an id gets a generated one, new.
	out, _, err = send(`{"body":"fresh","delay":"1h"}`, "--stdin")
	if got := strings.TrimSuffix(out, "\n"); err != nil || len(got) != 26 || got == delayq.IDFrom("fresh") {
		t.Errorf("send --stdin without --id-from-body: %q, %v; want a generated id", out, err)
	}
}

// jsonString returns s as a JSON string.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
