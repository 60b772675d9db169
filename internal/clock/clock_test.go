package clock

import (
	"testing"
	"time"
)

func TestCeilMS(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		in   time.Time
		want int64
	}{
		{base, base.UnixMilli()},
		{base.Add(time.Nanosecond), base.UnixMilli() + 1},
		{base.Add(999 * time.Microsecond), base.UnixMilli() + 1},
		{base.Add(time.Millisecond), base.UnixMilli() + 1},
	} {
		if got := CeilMS(tc.in).UnixMilli(); got != tc.want {
			t.Errorf("CeilMS(%v) = %d, want %d", tc.in, got, tc.want)
		}
		if CeilMS(tc.in).Before(tc.in) {
			t.Errorf("CeilMS(%v) is before its argument", tc.in)
		}
	}
}

func TestJitter(t *testing.T) {
	for range 1000 {
		if j := Jitter(time.Second); j < 900*time.Millisecond || j > 1100*time.Millisecond {
			t.Fatalf("Jitter(1s) = %v, want within 10%%", j)
		}
	}
}
