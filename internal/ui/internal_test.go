package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 850 * time.Millisecond: "850ms", 4200 * time.Millisecond: "4.2s", 56 * time.Second: "56s",
		4*time.Minute + 32*time.Second: "4m32s", 2*time.Hour + 5*time.Minute: "2h05m", 76 * time.Hour: "3d4h",
		-3 * time.Second: "-3.0s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	now := time.Unix(1000, 0)
	if got := relTime(now, now.Add(90*time.Second)); got != "in 1m30s" {
		t.Errorf("relTime future: %q", got)
	}
	if got := relTime(now, now.Add(-2*time.Second)); got != "2.0s ago" {
		t.Errorf("relTime past: %q", got)
	}
}

func TestFormatNum(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := formatNum(n); got != want {
			t.Errorf("formatNum(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBodyView(t *testing.T) {
	v := newBodyView([]byte("héllo"))
	if !v.IsText || v.Text != "héllo" || v.Truncated {
		t.Errorf("text: %+v", v)
	}
	v = newBodyView([]byte{0xff, 'a'})
	if v.IsText || v.Base64 != "/2E=" || !strings.HasPrefix(v.Hex, "00000000  ff 61 ") || !strings.HasSuffix(v.Hex, "|.a|\n") {
		t.Errorf("binary: %+v", v)
	}
	big := []byte(strings.Repeat("é", maxBodyDisplay)) // 2 bytes each: cut in a rune
	v = newBodyView(big)
	if !v.IsText || !v.Truncated || len(v.Text) > maxBodyDisplay || !strings.HasSuffix(v.Text, "é") {
		t.Errorf("cut: %d bytes, truncated %v", len(v.Text), v.Truncated)
	}
	if got := preview([]byte("a\nb"), 10); got != "a b" {
		t.Errorf("preview: %q", got)
	}
	if got := preview([]byte("abcdef"), 3); got != "abc…" {
		t.Errorf("preview cut: %q", got)
	}
	if got := preview([]byte{0xff}, 3); got != "(binary, 1 B)" {
		t.Errorf("preview binary: %q", got)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if at, err := parseWhen("90m", now); err != nil || !at.Equal(now.Add(90*time.Minute)) {
		t.Errorf("duration: %v %v", at, err)
	}
	if at, err := parseWhen("2031-01-01T00:00:00Z", now); err != nil || at.Year() != 2031 {
		t.Errorf("time: %v %v", at, err)
	}
	for _, bad := range []string{"", "-5m", "tomorrow", "2031-01-01"} {
		if _, err := parseWhen(bad, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", bad)
		}
	}
}

func TestCursor(t *testing.T) {
	c := delayq.ScheduledCursor{Due: 1700000000123, Skip: map[int]int{7: 2, 0: 130}}
	q := formatCursor(c, 20)
	if q != "due=1700000000123&limit=20&skip=0%3A130%2C7%3A2" {
		t.Errorf("formatCursor: %q", q)
	}
	got := parseCursor("1700000000123", "0:130,7:2,99:1,3:-1,x", 64)
	if got.Due != c.Due || len(got.Skip) != 2 || got.Skip[0] != 130 || got.Skip[7] != 2 {
		t.Errorf("parseCursor: %+v", got)
	}
	if got := parseCursor("nope", "1:1", 64); got.Due != 0 || got.Skip != nil {
		t.Errorf("bad due: %+v", got)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/topics/a?x=1": "/ui/topics/a?x=1", "": "/ui/", "https://evil.example/": "/ui/",
		"//evil.example/ui/": "/ui/", "/ui/\r\nX: y": "/ui/", "/uix": "/ui/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLayoutChart(t *testing.T) {
	counts := make([]int64, 60)
	counts[0], counts[30], counts[59] = 10, 5, 1
	c := layoutChart(time.Unix(0, 0), 3, counts)
	if c.Total != 16 || c.Max != 10 || c.Overdue != 3 || len(c.Bars) != 60 || len(c.Ticks) != 5 {
		t.Fatalf("chart: total %d max %d bars %d ticks %d", c.Total, c.Max, len(c.Bars), len(c.Ticks))
	}
	plot := c.PlotBottom - chartTop
	if c.Bars[0].H != plot || c.Bars[30].H != plot/2 || c.Bars[59].H < 2 || c.Bars[1].H != 0 {
		t.Errorf("heights: %d %d %d %d (plot %d)", c.Bars[0].H, c.Bars[30].H, c.Bars[59].H, c.Bars[1].H, plot)
	}
	if c.Bars[59].X+c.Bars[59].W > c.PlotRight {
		t.Errorf("the last bar ends at %d, past %d", c.Bars[59].X+c.Bars[59].W, c.PlotRight)
	}
	if !strings.Contains(c.Bars[30].Title, "00:30:00–00:31:00 UTC: 5 due") {
		t.Errorf("title: %q", c.Bars[30].Title)
	}
}

func TestLatenessP99(t *testing.T) {
	l := NewLateness()
	now := time.Now()
	if _, n := l.P99("t", now.Add(-time.Minute)); n != 0 {
		t.Errorf("empty: %d", n)
	}
	for i := 1; i <= 1000; i++ {
		l.Observe("t", now, time.Duration(i)*time.Millisecond)
	}
	l.Observe("t", now.Add(-10*time.Minute), time.Hour) // too old
	l.Observe("other", now, time.Hour)
	if p, n := l.P99("t", now.Add(-5*time.Minute)); p != 990*time.Millisecond || n != 1000 {
		t.Errorf("p99 = %v over %d, want 990ms over 1000", p, n)
	}
	for i := 0; i < 2*latenessRing; i++ { // the ring keeps the latest
		l.Observe("t", now, time.Millisecond)
	}
	if p, n := l.P99("t", now.Add(-time.Minute)); p != time.Millisecond || n != latenessRing {
		t.Errorf("after wrap: %v over %d", p, n)
	}
}

func TestRates(t *testing.T) {
	r := newRates()
	t0 := time.Unix(1000, 0)
	if got := r.observe("t", t0, Counters{Delivered: 100}); got.Window != 0 {
		t.Errorf("first sample: %+v", got)
	}
	got := r.observe("t", t0.Add(10*time.Second), Counters{Delivered: 150, Acked: 140, Retried: 10, Dead: 1})
	if got.Window != 10*time.Second || got.Delivered != 5 || got.Acked != 14 || got.Retried != 1 || got.Dead != 0.1 {
		t.Errorf("rates: %+v", got)
	}
	// Sparse samples: the newest before the window is the base.
	got = r.observe("t", t0.Add(75*time.Second), Counters{Delivered: 250, Acked: 140})
	if got.Window != 65*time.Second || got.Delivered != 100.0/65 {
		t.Errorf("sparse: %+v", got)
	}
	// Frequent samples: the oldest of the last minute is the base.
	for s := 76; s <= 140; s++ {
		got = r.observe("t", t0.Add(time.Duration(s)*time.Second), Counters{Delivered: 250 + int64(s-75)*2, Acked: 140})
	}
	if got.Window != time.Minute || got.Delivered != 2 {
		t.Errorf("frequent: %+v", got)
	}
	// Samples older than two minutes are forgotten.
	if got := r.observe("t", t0.Add(400*time.Second), Counters{Delivered: 1000, Acked: 140}); got.Window != 0 {
		t.Errorf("stale: %+v", got)
	}
	// A restarted consumer counts from 0: the old samples go.
	r.observe("t", t0.Add(410*time.Second), Counters{Delivered: 1010, Acked: 140})
	if got := r.observe("t", t0.Add(415*time.Second), Counters{Delivered: 3}); got.Window != 0 {
		t.Errorf("after a reset: %+v", got)
	}
}
