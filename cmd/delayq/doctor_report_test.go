package main

import (
	"strings"
	"testing"
)

func TestDoctorText(t *testing.T) {
	rep := &doctorReport{Addr: "h:1", Keys: "dq:doctor:{x}:*", Passed: 2, Failed: 1, Checks: []checkResult{
		{Name: "PING", OK: true, MS: 0.21},
		{Name: "ZRANGEBYSCORE WITHSCORES LIMIT", MS: 3000, Error: "ZRANGEBYSCORE zset: i/o timeout"},
		{Name: "cleanup", OK: true, MS: 1.5},
	}, Hints: []string{"scripts do not work here"}}
	var b strings.Builder
	if err := writeDoctorText(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := "delayq doctor h:1 (scratch keys dq:doctor:{x}:*)\n" +
		"ok   PING                            0.21ms\n" +
		"FAIL ZRANGEBYSCORE WITHSCORES LIMIT  3000.00ms: ZRANGEBYSCORE zset: i/o timeout\n" +
		"ok   cleanup                         1.50ms\n" +
		"hint scripts do not work here\n" +
		"1 of 3 checks failed: delayq will not work through this server\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDoctorTextSingular: a count of one takes the singular ("1 sample").
func TestDoctorTextSingular(t *testing.T) {
	var b strings.Builder
	rep := &doctorReport{}
	rep.RTT.Ping = &rttStats{Samples: 1, MinMS: 0.1, MedianMS: 0.1, MaxMS: 0.1}
	rep.RTT.Get = &rttStats{Samples: 2, MinMS: 0.1, MedianMS: 0.1, MaxMS: 0.1}
	if err := writeDoctorText(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(1 sample)\n") || !strings.Contains(b.String(), "(2 samples)\n") {
		t.Errorf("doctor text:\n%s", b.String())
	}
}
