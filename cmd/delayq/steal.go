package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// stealTicks returns the CPU time the hypervisor took from this machine
// (steal) and all of its CPU time, in ticks since boot, from the first
// line of /proc/stat; ok is false where there is no such file (not
// Linux).
func stealTicks() (steal, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is counted in user and nice already.
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 7 {
			steal = v
		}
	}
	return steal, total, true
}

// stealMeter measures the share of the machine's CPU time stolen between
// its start and String.
type stealMeter struct {
	steal, total uint64
	ok           bool
}

func startSteal() stealMeter {
	s, t, ok := stealTicks()
	return stealMeter{s, t, ok}
}

// String returns " steal_pct=N.N", or "" where steal is not measured.
// A run shorter than the kernel's clock tick (10 ms) has no ticks of its
// own, so String waits for the next tick and measures over it: the share
// then describes the machine just after the run, which is what a run that
// short can be given.
func (m stealMeter) String() string {
	if !m.ok {
		return ""
	}
	s, t, ok := stealTicks()
	for deadline := time.Now().Add(time.Second); ok && t <= m.total && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		s, t, ok = stealTicks()
	}
	if !ok || t <= m.total {
		return ""
	}
	return " steal_pct=" + strconv.FormatFloat(100*float64(s-m.steal)/float64(t-m.total), 'f', 1, 64)
}
