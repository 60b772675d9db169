package main

import (
	"bytes"
	"encoding/json"
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
