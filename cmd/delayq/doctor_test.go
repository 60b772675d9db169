package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
)

// doctorChecks are the checks doctor must run: every command shape of
// the portable set (internal/portable), then the cleanup.
var doctorChecks = []string{
	"PING", "SET NX PX", "SET PX", "GET", "DEL", "EXISTS", "PEXPIRE", "PTTL", "INCR", "INCRBY",
	"HSET", "HSETNX", "HMSET", "HMGET", "HGET", "HDEL", "HINCRBY", "HLEN", "HSCAN",
	"ZADD", "ZADD NX", "ZADD XX CH", "ZADD CH", "ZRANGEBYSCORE WITHSCORES LIMIT", "ZREVRANGEBYSCORE", "ZRANGE",
	"ZREM", "ZSCORE", "ZCARD", "ZCOUNT", "ZSCAN",
	"LPUSH", "RPUSH", "LRANGE", "LLEN", "LREM",
	"EVALSHA NOSCRIPT", "EVAL", "EVALSHA", "EVAL struct", "cleanup",
}

func TestDoctor(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			stdout, _, err := runArgs(t, "doctor", "--addr", tg.Addr)
			if err != nil {
				t.Fatalf("doctor: %v\n%s", err, stdout)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(stdout, "\n") {
				lines[strings.Join(strings.Fields(l), " ")] = true
				if strings.HasPrefix(l, "FAIL") {
					t.Errorf("failed check: %s", l)
				}
			}
			for _, name := range doctorChecks {
				found := false
				for l := range lines {
					if strings.HasPrefix(l, "ok "+name+" ") && strings.HasSuffix(l, "ms") {
						found = true
					}
				}
				if !found {
					t.Errorf("no line %q:\n%s", "ok   "+name+"  N.NNms", stdout)
				}
			}
			for _, want := range []string{"rtt  PING  min ", "rtt  GET   min ", "hint EVAL and EVALSHA work",
				"hint an unknown EVALSHA answers NOSCRIPT", "\nall 41 checks passed\n"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}

			stdout, _, err = runArgs(t, "doctor", "--addr", tg.Addr, "--json", "--samples", "5")
			if err != nil {
				t.Fatalf("doctor --json: %v\n%s", err, stdout)
			}
			var rep doctorReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("--json output: %v\n%s", err, stdout)
			}
			if rep.Failed != 0 || rep.Passed != len(doctorChecks) || len(rep.Checks) != len(doctorChecks) {
				t.Errorf("report: %d passed, %d failed, %d checks", rep.Passed, rep.Failed, len(rep.Checks))
			}
			if rep.RTT.Ping == nil || rep.RTT.Ping.Samples != 5 || rep.RTT.Get == nil ||
				rep.RTT.Get.MinMS > rep.RTT.Get.MedianMS || rep.RTT.Get.MedianMS > rep.RTT.Get.MaxMS {
				t.Errorf("rtt: %+v %+v", rep.RTT.Ping, rep.RTT.Get)
			}
			if rep.Addr != tg.Addr || !strings.HasPrefix(rep.Keys, "dq:doctor:{") || len(rep.Hints) < 3 {
				t.Errorf("report: %+v", rep)
			}
			// The scratch keys are gone from every backend.
			prefix := strings.TrimSuffix(rep.Keys, "*")
			for _, b := range env.Backends {
				for _, k := range scratchKeys {
					if r, err := testenv.Do(b, "EXISTS", prefix+k); err != nil || r != ":0" {
						t.Errorf("EXISTS %s%s on %s = %q, %v", prefix, k, b, r, err)
					}
				}
			}
		})
	}
}

func TestDoctorNamespaceAndPassword(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	// Redis without requirepass refuses AUTH: doctor reports it up front.
	_, _, err := runArgs(t, "doctor", "--addr", env.Backends[0], "--password", "nope")
	if !errors.Is(err, delayq.ErrAuth) || !strings.Contains(err.Error(), env.Backends[0]) {
		t.Errorf("err = %v, want an auth error naming the address", err)
	}
	stdout, _, err := runArgs(t, "doctor", "--addr", env.Backends[0], "--namespace", "other", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || !strings.HasPrefix(rep.Keys, "other:doctor:{") {
		t.Errorf("keys %q (%v)", rep.Keys, err)
	}
}

func TestDoctorUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	stdout, _, err := runArgs(t, "doctor", "--addr", addr, "--timeout", "500ms")
	var ue *usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want a plain error naming %s", err, addr)
	}
	if stdout != "" {
		t.Errorf("stdout %q", stdout)
	}
}

func TestDoctorUsage(t *testing.T) {
	stdout, _, err := runArgs(t, "doctor", "-h")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"-addr", "-password", "-namespace", "-json", "-samples", "-timeout"} {
		if !strings.Contains(stdout, f) {
			t.Errorf("help lacks %s:\n%s", f, stdout)
		}
	}
	for _, args := range [][]string{
		{"doctor", "extra"},
		{"doctor", "--samples", "0"},
		{"doctor", "--timeout", "0s"},
		{"doctor", "--topic", "t"},
	} {
		_, _, err := runArgs(t, args...)
		checkUsageError(t, args, err)
	}
}

// TestDoctorProxies checks each proxy of a list: with two proxies, both
// pass; with a dead one first, its report fails to connect, the live
// one's passes, and the run exits with an error naming both.
func TestDoctorProxies(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	stdout, _, err := runArgs(t, "doctor", "--addr", strings.Join(env.Proxies, ","), "--json")
	var reps []doctorReport
	if err != nil || json.Unmarshal([]byte(stdout), &reps) != nil || len(reps) != 2 {
		t.Fatalf("doctor of two proxies: %v\n%s", err, stdout)
	}
	for i, rep := range reps {
		if rep.Addr != env.Proxies[i] || rep.Failed != 0 || rep.Passed == 0 {
			t.Errorf("report %d: %s, %d passed, %d failed", i, rep.Addr, rep.Passed, rep.Failed)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	stdout, _, err = runArgs(t, "doctor", "--addr", dead+","+env.Proxies[1], "--json", "--timeout", "500ms")
	reps = nil
	if err == nil || !strings.Contains(err.Error(), dead) || json.Unmarshal([]byte(stdout), &reps) != nil || len(reps) != 2 {
		t.Fatalf("doctor with a dead proxy first: %v\n%s", err, stdout)
	}
	if reps[0].Failed != 1 || reps[0].Checks[0].Name != "connect" || reps[1].Failed != 0 {
		t.Errorf("reports: dead %+v; live %d failed", reps[0], reps[1].Failed)
	}
}

// TestDoctorClocks: a member whose heartbeat was written by a clock an
// hour ahead, and a rate limit taken from by one, are hinted about; the
// members on time are not.
func TestDoctorClocks(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if _, err := st.EnsureTopic(ctx, "skewed", 2, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	ahead := now.Add(time.Hour)
	for id, at := range map[string]time.Time{"ahead": ahead, "ontime": now} {
		if _, _, err := st.Heartbeat(ctx, lease.Beat{Topic: "skewed", ID: id, NowMS: at.UnixMilli(), ExpiresMS: at.Add(10 * time.Second).UnixMilli(), GCMS: time.Hour.Milliseconds()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.TakeTokens(ctx, "skewed", store.TokenTake{Rate: 10, Burst: 1, Want: 1, Min: 1, Now: ahead}); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runArgs(t, "doctor", "--addr", addr)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, stdout)
	}
	for _, want := range []string{"clock: member ahead of topic skewed heartbeats 1h0m0s ahead", "clock: a consumer of topic skewed took from its rate limit with a clock 1h0m0s ahead"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "member ontime") {
		t.Errorf("a member on time is hinted about:\n%s", stdout)
	}
}
