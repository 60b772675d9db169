// Package clock holds the two time helpers every loop and message path of
// delayq shares: due times rounded up to the millisecond (never early) and
// timer jitter.
//
// Files:
//
//   - clock.go: due times rounded up to the millisecond (CeilMS) and timer
//     jitter (Jitter)
package clock
