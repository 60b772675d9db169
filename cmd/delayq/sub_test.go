package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

func TestEncodeDelivery(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	due := time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, est)
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, est)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"utf8", []byte("héllo <&>"), `{"topic":"t","id":"m1","partition":7,"token":42,"attempt":2,` +
			`"due":"2030-01-02T08:04:05.006Z","delivered_at":"2030-01-02T08:04:05.123456789Z","body":"héllo <&>"}` + "\n"},
		{"empty", []byte{}, `{"topic":"t","id":"m1","partition":7,"token":42,"attempt":2,` +
			`"due":"2030-01-02T08:04:05.006Z","delivered_at":"2030-01-02T08:04:05.123456789Z","body":""}` + "\n"},
		{"nil", nil, `{"topic":"t","id":"m1","partition":7,"token":42,"attempt":2,` +
			`"due":"2030-01-02T08:04:05.006Z","delivered_at":"2030-01-02T08:04:05.123456789Z","body":""}` + "\n"},
		{"binary", []byte{0xff, 0xfe, 'a'}, `{"topic":"t","id":"m1","partition":7,"token":42,"attempt":2,` +
			`"due":"2030-01-02T08:04:05.006Z","delivered_at":"2030-01-02T08:04:05.123456789Z","body_base64":"//5h"}` + "\n"},
		{"truncated utf8", []byte("\xc3"), `{"topic":"t","id":"m1","partition":7,"token":42,"attempt":2,` +
			`"due":"2030-01-02T08:04:05.006Z","delivered_at":"2030-01-02T08:04:05.123456789Z","body_base64":"ww=="}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &delayq.Delivery{Topic: "t", ID: "m1", Partition: 7, Token: 42, Attempt: 2, Due: due, Body: tt.body}
			got, err := encodeDelivery(d, at)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("line =\n%s want\n%s", got, tt.want)
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			_, hasBody := m["body"]
			_, hasB64 := m["body_base64"]
			if hasBody == hasB64 {
				t.Errorf("body present %v, body_base64 present %v: want exactly one", hasBody, hasB64)
			}
		})
	}
}

// TestDeliveryPrinterConcurrent checks that concurrent handlers never
// interleave their lines.
func TestDeliveryPrinterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	p := &deliveryPrinter{w: &buf}
	const n = 200
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &delayq.Delivery{Topic: "t", ID: fmt.Sprint(i), Attempt: 1, Due: time.Now(), Body: bytes.Repeat([]byte{'x'}, 5000)}
			if err := p.print(d, time.Now()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var v deliveryJSON
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("bad line %.80q: %v", l, err)
		}
		seen[v.ID] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct ids, want %d", len(seen), n)
	}
}

// TestSimulateWork checks --work: the handler waits the duration, or
// returns ctx.Err() (a retry) when its context ends first.
func TestSimulateWork(t *testing.T) {
	if err := simulateWork(context.Background(), 0); err != nil {
		t.Errorf("no work: err = %v, want nil", err)
	}
	start := time.Now()
	if err := simulateWork(context.Background(), 50*time.Millisecond); err != nil {
		t.Errorf("50ms of work: err = %v, want nil", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("50ms of work returned after %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := simulateWork(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("work past the context: err = %v, want %v", err, context.DeadlineExceeded)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("work past the context returned after %v, not when the context ended", took)
	}
}

// TestSubNegativeWork checks that a negative --work is a usage error.
func TestSubNegativeWork(t *testing.T) {
	_, _, err := runArgs(t, "sub", "--topic", "t", "--work", "-1s")
	checkUsageError(t, "sub --work -1s", err, "--work", `"-1s"`, "negative")
}
