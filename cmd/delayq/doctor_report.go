package main

import (
	"fmt"
	"io"
	"strings"
)

// doctorReport is the outcome of a doctor run; --json prints it.
type doctorReport struct {
	Addr   string        `json:"addr"`
	Keys   string        `json:"keys"` // pattern of the scratch keys
	Checks []checkResult `json:"checks"`
	RTT    struct {
		Ping *rttStats `json:"ping,omitempty"`
		Get  *rttStats `json:"get,omitempty"`
	} `json:"rtt"`
	Hints    []string        `json:"hints"`
	Backends []backendReport `json:"backends,omitempty"`
	// Cluster is what doctor --cluster read about this master, beside
	// the checks; nil for a proxy or a server checked alone.
	Cluster *masterReport `json:"cluster,omitempty"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
}

// checkResult is the outcome of one check.
type checkResult struct {
	Name  string  `json:"name"`
	OK    bool    `json:"ok"`
	MS    float64 `json:"ms"` // wall time of the check's commands
	Error string  `json:"error,omitempty"`
}

func (r *doctorReport) add(c checkResult) {
	r.Checks = append(r.Checks, c)
	if c.OK {
		r.Passed++
	} else {
		r.Failed++
	}
}

// find returns the result of the check called name, or nil.
func (r *doctorReport) find(name string) *checkResult {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// writeDoctorReports prints the reports as text, or as JSON: the report
// of a single address alone, those of several as a list.
func writeDoctorReports(w io.Writer, reps []*doctorReport, asJSON bool) error {
	switch {
	case asJSON && len(reps) == 1:
		return writeJSON(w, reps[0])
	case asJSON:
		return writeJSON(w, reps)
	}
	for i, rep := range reps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := writeDoctorText(w, rep); err != nil {
			return err
		}
	}
	return nil
}

// writeDoctorText prints the report: a line per check, round trips,
// hints and the summary.
func writeDoctorText(w io.Writer, rep *doctorReport) error {
	width := 0
	for _, c := range rep.Checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "delayq doctor %s (scratch keys %s)\n", rep.Addr, rep.Keys)
	for _, c := range rep.Checks {
		if c.OK {
			fmt.Fprintf(&b, "ok   %-*s  %.2fms\n", width, c.Name, c.MS)
		} else {
			fmt.Fprintf(&b, "FAIL %-*s  %.2fms: %s\n", width, c.Name, c.MS, c.Error)
		}
	}
	for _, r := range []struct {
		name string
		s    *rttStats
	}{{"PING", rep.RTT.Ping}, {"GET", rep.RTT.Get}} {
		if r.s != nil {
			fmt.Fprintf(&b, "rtt  %-4s  min %.3fms  median %.3fms  max %.3fms  (%d %s)\n",
				r.name, r.s.MinMS, r.s.MedianMS, r.s.MaxMS, r.s.Samples, plural(r.s.Samples, "sample", "samples"))
		}
	}
	for _, h := range rep.Hints {
		fmt.Fprintf(&b, "hint %s\n", h)
	}
	for _, be := range rep.Backends {
		if be.Error != "" {
			fmt.Fprintf(&b, "backend %s: %s\n", be.Addr, be.Error)
			continue
		}
		fmt.Fprintf(&b, "backend %s: redis %s, maxmemory-policy %s, appendonly %s\n",
			be.Addr, be.Version, orDash(be.MaxmemoryPolicy), map[bool]string{true: "yes", false: "no"}[be.AppendOnly])
		for _, w := range be.Warnings {
			fmt.Fprintf(&b, "warn backend %s: %s\n", be.Addr, w)
		}
	}
	if m := rep.Cluster; m != nil {
		writeMasterText(&b, rep.Addr, m)
	}
	n := rep.Passed + rep.Failed
	if rep.Failed == 0 {
		fmt.Fprintf(&b, "all %d checks passed\n", n)
	} else {
		fmt.Fprintf(&b, "%d of %d checks failed: delayq will not work through this server\n", rep.Failed, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
