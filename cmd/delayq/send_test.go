package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
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
