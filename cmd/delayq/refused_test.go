package main

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// Wrong credentials, an address that cannot be one and a peer that does
// not speak Redis fail within 2 s, saying which; send does not retry
// them as an outage, and the worker exits at start.
func TestRefusedFailsFast(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true, Password: "right"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	web := ln.Addr().String()

	for _, tc := range []struct {
		args []string
		want error
		says []string
	}{
		{[]string{"send", "--addr", env.Backends[0], "--password", "wrong", "--topic", "t"}, delayq.ErrAuth, []string{env.Backends[0], "refused the credentials", "WRONGPASS"}},
		{[]string{"send", "--addr", env.Backends[0], "--topic", "t"}, delayq.ErrAuth, []string{"NOAUTH"}},
		{[]string{"send", "--addr", web, "--topic", "t"}, delayq.ErrNotRedis, []string{web + " does not speak Redis"}},
		{[]string{"doctor", "--addr", web}, delayq.ErrNotRedis, []string{web + " does not speak Redis"}},
		{[]string{"doctor", "--addr", env.Backends[0], "--password", "wrong"}, delayq.ErrAuth, []string{"refused the credentials"}},
	} {
		start := time.Now()
		_, _, err := runArgs(t, tc.args...)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%v: took %v", tc.args, took)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%v: err = %v, want %v", tc.args, err, tc.want)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%v: err = %v, want it to say %q", tc.args, err, s)
			}
		}
		if strings.Contains(err.Error(), "Twemproxy") || strings.Contains(err.Error(), "outage") {
			t.Errorf("%v: err = %v", tc.args, err)
		}
	}

	// The worker says the same at start, and stops.
	for _, c := range []struct{ addr, says string }{{env.Backends[0], "refused the credentials"}, {web, "does not speak Redis"}} {
		p := writeWorkerConfig(t, "[redis]\naddr = \""+c.addr+"\"\npassword = \"wrong\"\n"+workerExecTopic)
		rw := launchWorker(t, p)
		select {
		case err := <-rw.done:
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("worker on %s: %v, want it to say %q", c.addr, err, c.says)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("worker on %s still runs", c.addr)
			rw.cancel()
		}
	}
}
