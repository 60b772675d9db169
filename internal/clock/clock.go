package clock

import (
	"math/rand/v2"
	"time"
)

// CeilMS returns t rounded up to the millisecond: a due time stored in
// unix milliseconds is then never before t.
func CeilMS(t time.Time) time.Time {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return time.UnixMilli(ms)
}

// Jitter returns d give or take 10%, so that timers of many loops or
// processes do not fire together.
func Jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}
