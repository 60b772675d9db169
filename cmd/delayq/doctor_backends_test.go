package main

import (
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
)

// --backends reads each backend's settings straight from it and warns,
// with the fix, about those that put messages at risk; a proxy given as a
// backend is a failed check.
func TestDoctorBackends(t *testing.T) {
	plain := testenv.Start(t, testenv.Options{Backends: 2})
	aof := testenv.Start(t, testenv.Options{Backends: 1, AppendOnly: true})
	stdout, _, err := runArgs(t, "doctor", "--addr", plain.Proxy, "--backends", strings.Join(plain.Backends, ","))
	if err != nil {
		t.Fatalf("doctor --backends: %v\n%s", err, stdout)
	}
	for _, b := range plain.Backends {
		for _, want := range []string{
			"backend " + b + ": redis ", ", maxmemory-policy noeviction, appendonly no",
			"warn backend " + b + ": appendonly is off",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
	}
	if strings.Contains(stdout, "maxmemory-policy is") {
		t.Errorf("a warning about maxmemory-policy with noeviction:\n%s", stdout)
	}

	stdout, _, err = runArgs(t, "doctor", "--addr", aof.Proxy, "--backends", aof.Backends[0])
	if err != nil {
		t.Fatalf("doctor --backends (appendonly): %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "appendonly yes") || strings.Contains(stdout, "warn backend") {
		t.Errorf("appendonly yes and noeviction: want no warning:\n%s", stdout)
	}

	stdout, _, err = runArgs(t, "doctor", "--addr", plain.Proxy, "--backends", plain.Proxy)
	if err == nil || !strings.Contains(stdout, "backend "+plain.Proxy+": INFO on "+plain.Proxy) {
		t.Errorf("the proxy as a backend: err %v, want a failed check naming it:\n%s", err, stdout)
	}
}

func TestBackendWarnings(t *testing.T) {
	for _, tc := range []struct {
		bi   portable.BackendInfo
		want []string
	}{
		{portable.BackendInfo{Version: "7.0.15", MaxmemoryPolicy: "noeviction", AOF: true}, nil},
		{portable.BackendInfo{Version: "3.2.11", MaxmemoryPolicy: "noeviction", AOF: true}, nil},
		{portable.BackendInfo{Version: "3.0.7", MaxmemoryPolicy: "noeviction", AOF: true}, []string{"older than 3.2"}},
		{portable.BackendInfo{Version: "6.2.6", MaxmemoryPolicy: "allkeys-lru", AOF: true}, []string{"maxmemory-policy is allkeys-lru"}},
		{portable.BackendInfo{Version: "6.2.6", MaxmemoryPolicy: "noeviction"}, []string{"appendonly is off"}},
	} {
		got := backendWarnings(tc.bi)
		if len(got) != len(tc.want) {
			t.Errorf("%+v: warnings %q, want %d", tc.bi, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%+v: warning %q, want it to say %q", tc.bi, got[i], w)
			}
		}
	}
}
