package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// runDoctor implements "delayq doctor": it runs every command shape of the
// portable set (docs/portability.md) against --addr, checks each reply, measures round trips,
// prints a line per check, hints about the deployment and a summary. It
// fails when a check failed or the server could not be reached.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newConnCommand("doctor", "[--addr A[,A2...]] [--password P] [--backends B1,B2 | --cluster] [--json]",
		"Checks that a Redis server or a Twemproxy/Codis proxy runs every command delayq sends\n"+
			"(the portable set): each command shape runs on scratch keys <namespace>:doctor:{<random>}:*\n"+
			"and its reply is checked; then it measures round trips, removes its keys, prints hints\n"+
			"about the deployment and a summary. With --backends it also reads, straight from each\n"+
			"Redis server behind the proxy (INFO, never through the proxy), its version,\n"+
			"maxmemory-policy and appendonly, and warns with the fix when one puts messages at risk.\n"+
			"It also compares what the topics' consumers wrote from their clocks (heartbeats,\n"+
			"slots of a concurrency cap, a rate limit's timeline) with this host's clock, and hints\n"+
			"about each more than 5s off (delayq.MaxClockSkew).\n"+
			"With several proxies in --addr (separated by commas) it checks each in turn, and\n"+
			"--json prints a list of reports.\n"+
			"With --cluster, --addr lists seed nodes of a Redis Cluster: doctor reads the masters and\n"+
			"their replicas (CLUSTER SLOTS, and each master's INFO), runs the checks on each master\n"+
			"with scratch keys on a slot it serves, reads every node's settings as --backends does,\n"+
			"warns about a master without a replica and about cluster-require-full-coverage yes,\n"+
			"and prints how many partitions of each topic each master serves, warning when they\n"+
			"spread unevenly; --json prints an object with a report per master.\n"+
			"Exit status 1 when a check fails (warnings do not fail).",
		stdout, stderr)
	fs := cmd.fs
	asJSON := fs.Bool("json", false, "print the report as JSON")
	backends := fs.String("backends", "", "comma-separated `host:port` list of the Redis servers behind the proxy, to check their settings")
	samples := fs.Int("samples", 20, "time `n` round trips of each of PING and GET")
	timeout := fs.Duration("timeout", 3*time.Second, "connect, read and write `timeout` of each command")
	if err := cmd.parse(args); err != nil {
		return err
	}
	switch {
	case *samples < 1:
		return cmd.usageErr("invalid value %d for flag --samples: want at least 1", *samples)
	case *timeout <= 0:
		return cmd.usageErr("invalid value %v for flag --timeout: want a positive duration", *timeout)
	}
	if cmd.c.cluster && *backends != "" {
		return cmd.usageErr("--backends does not apply with --cluster: doctor reads every node's settings itself")
	}
	addrs, err := portable.SplitAddrs(cmd.c.addr)
	if err != nil {
		return cmd.usageErr("invalid value %q for flag --addr: %v", cmd.c.addr, err)
	}
	opts := portable.DialOptions{
		Password: cmd.c.password, ConnectTimeout: *timeout, ReadTimeout: *timeout, WriteTimeout: *timeout,
	}
	if cmd.c.cluster {
		return doctorCluster(ctx, stdout, clusterCheck{o: cmd.c.options(io.Discard), seeds: addrs, dial: opts, samples: *samples, asJSON: *asJSON})
	}
	reps, err := checkAddrs(ctx, addrs, cmd.c.namespace, opts, *samples)
	if err != nil {
		return err
	}
	if *backends != "" {
		for _, b := range strings.Split(*backends, ",") {
			reps[0].addBackend(ctx, strings.TrimSpace(b), cmd.c.password)
		}
	}
	// The proxies of a list share their backends: one look at the clocks.
	// The proxies of a list share their backends: one look at the clocks.
	o := cmd.c.options(io.Discard)
	o.Addr = addrs[0]
	reps[0].Hints = append(reps[0].Hints, readClockHints(ctx, o, time.Now())...)
	if err := writeDoctorReports(stdout, reps, *asJSON); err != nil {
		return err
	}
	failed, checks := 0, 0
	for _, rep := range reps {
		failed, checks = failed+rep.Failed, checks+rep.Failed+rep.Passed
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed on %s", failed, checks, strings.Join(addrs, ", "))
	}
	return nil
}

// checkAddrs runs the checks on each address of a list in turn (any
// proxy of a list may serve a process) and returns a report per address.
// One that cannot be reached is a report of a failed connect, or the
// error when it is the only address.
func checkAddrs(ctx context.Context, addrs []string, namespace string, opts portable.DialOptions, samples int) ([]*doctorReport, error) {
	var reps []*doctorReport
	for _, addr := range addrs {
		rep, err := checkAddr(ctx, addr, namespace, newNonce(), opts, samples)
		if err != nil && len(addrs) == 1 {
			return nil, fmt.Errorf("doctor: %w", err)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// checkAddr runs the checks on addr with the scratch keys of nonce. One
// that cannot be reached is a report of a failed connect, and the error.
func checkAddr(ctx context.Context, addr, namespace, nonce string, opts portable.DialOptions, samples int) (*doctorReport, error) {
	d, err := newDoctor(ctx, addr, namespace, nonce, opts)
	if err != nil {
		rep := &doctorReport{Addr: addr, Hints: []string{}}
		rep.add(checkResult{Name: "connect", Error: err.Error()})
		return rep, err
	}
	return d.run(ctx, samples), nil
}

// doctor holds a portable connection and the scratch keys of one run.
type doctor struct {
	addr   string
	opts   portable.DialOptions
	conn   redis.Conn // nil after the server closed it: redialed on use
	lost   bool       // the server closed a connection during the run
	prefix string     // <namespace>:doctor:{<random>}:
	script string     // a one-key script unique to this run
	sha    string     // its SHA1
}

// newNonce returns a random nonce for the scratch keys of a run.
func newNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// scratchPrefix is the prefix of the scratch keys of nonce; its hash tag
// {nonce} puts them on one slot of a cluster.
func scratchPrefix(namespace, nonce string) string { return namespace + ":doctor:{" + nonce + "}:" }

// newDoctor connects to addr, to run with the scratch keys of nonce: an
// error here names the address.
func newDoctor(ctx context.Context, addr, namespace, nonce string, o portable.DialOptions) (*doctor, error) {
	conn, err := portable.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	// A peer that wants a password, or is not Redis, fails every check
	// alike: say so once. Other failures are the checks' to report.
	if _, err := conn.Do("PING"); portable.Refused(err) {
		conn.Close()
		return nil, err
	}
	d := &doctor{
		addr: addr, opts: o, conn: conn,
		prefix: scratchPrefix(namespace, nonce),
		// The nonce makes the script new to the server, so that its first
		// EVALSHA must answer NOSCRIPT.
		script: "-- delayq doctor " + nonce + "\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])",
	}
	d.sha = redis.NewScript(1, d.script).Hash()
	if err := portable.RegisterScript(d.script); err != nil {
		conn.Close()
		return nil, err
	}
	return d, nil
}

// key returns the scratch key called name.
func (d *doctor) key(name string) string { return d.prefix + name }

// scratchKeys are the names of every key a run may create.
var scratchKeys = []string{"str", "ctr", "hash", "zset", "list", "script"}

// do sends one command, redialing first when the server closed the
// previous connection.
func (d *doctor) do(ctx context.Context, cmd string, args ...any) (any, error) {
	if d.conn == nil {
		c, err := portable.Dial(ctx, d.addr, d.opts)
		if err != nil {
			return nil, err
		}
		d.conn = c
	}
	reply, err := redis.DoContext(d.conn, ctx, cmd, args...)
	if err != nil && d.conn.Err() != nil {
		d.conn.Close()
		d.conn = nil
		d.lost = true
		return nil, fmt.Errorf("%w (connection lost)", err)
	}
	return reply, err
}

// close closes the connection.
func (d *doctor) close() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

// step is one command of a check and the reply it must get.
type step struct {
	args   []any // command name first
	expect func(reply any, err error) error
}

// doctorCheck is a named list of steps.
type doctorCheck struct {
	name  string
	steps []step
}

// run runs the checks, times round trips, cleans up and returns the report.
func (d *doctor) run(ctx context.Context, samples int) *doctorReport {
	defer d.close()
	rep := &doctorReport{Addr: d.addr, Keys: d.prefix + "*", Hints: []string{}}
	for _, c := range d.checks() {
		if ctx.Err() != nil { // interrupted: report what is left as not run
			rep.add(checkResult{Name: c.name, Error: "not run: " + ctx.Err().Error()})
			continue
		}
		rep.add(d.runCheck(ctx, c))
	}
	if ctx.Err() == nil {
		var rttErr error
		rep.RTT.Ping, rttErr = d.time(ctx, samples, "PING")
		if rttErr == nil {
			rep.RTT.Get, rttErr = d.time(ctx, samples, "GET", d.key("str"))
		}
		if rttErr != nil {
			rep.add(checkResult{Name: "round trips", Error: rttErr.Error()})
		}
	}
	rep.add(d.cleanup(ctx))
	rep.Hints = d.hints(rep)
	return rep
}

// runCheck runs the steps of c until one fails.
func (d *doctor) runCheck(ctx context.Context, c doctorCheck) checkResult {
	start := time.Now()
	res := checkResult{Name: c.name, OK: true}
	for _, s := range c.steps {
		reply, err := d.do(ctx, s.args[0].(string), s.args[1:]...)
		if err = s.expect(reply, err); err != nil {
			res.OK = false
			res.Error = fmt.Sprintf("%s: %v", shapeOf(s.args), err)
			break
		}
	}
	res.MS = ms(time.Since(start))
	return res
}

// shapeOf shows a command with its key (the scratch prefix cut) and
// arguments, shortened, for error messages.
func shapeOf(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		s := fmt.Sprint(a)
		if i == 1 {
			s = s[strings.LastIndexByte(s, ':')+1:]
		}
		if len(s) > 20 {
			s = s[:20] + "..."
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

// cleanup deletes the scratch keys and checks they are gone. It runs even
// when ctx is done.
func (d *doctor) cleanup(ctx context.Context) checkResult {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c := doctorCheck{name: "cleanup"}
	for _, k := range scratchKeys {
		c.steps = append(c.steps, step{[]any{"DEL", d.key(k)}, anyInt})
	}
	for _, k := range scratchKeys {
		c.steps = append(c.steps, step{[]any{"EXISTS", d.key(k)}, wantInt(0)})
	}
	return d.runCheck(ctx, c)
}
