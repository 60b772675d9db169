package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/gomodule/redigo/redis"
)

// doctorTTL is the expiry set on every scratch key, so that keys of an
// interrupted run do not stay behind.
const doctorTTL = 10 * time.Minute

// runDoctor implements "delayq doctor": it runs every command shape of the
// portable set (docs/portability.md) against --addr, checks each reply, measures round trips,
// prints a line per check, hints about the deployment and a summary. It
// fails when a check failed or the server could not be reached.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newConnCommand("doctor", "[--addr A[,A2...]] [--password P] [--backends B1,B2] [--json]",
		"Checks that a Redis server or a Twemproxy/Codis proxy runs every command delayq sends\n"+
			"(the portable set): each command shape runs on scratch keys <namespace>:doctor:{<random>}:*\n"+
			"and its reply is checked; then it measures round trips, removes its keys, prints hints\n"+
			"about the deployment and a summary. With --backends it also reads, straight from each\n"+
			"Redis server behind the proxy (INFO, never through the proxy), its version,\n"+
			"maxmemory-policy and appendonly, and warns with the fix when one puts messages at risk.\n"+
			"With several proxies in --addr (separated by commas) it checks each in turn, and\n"+
			"--json prints a list of reports. Exit status 1 when a check fails (warnings do not fail).",
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
	addrs, err := store.SplitAddrs(cmd.c.addr)
	if err != nil {
		return cmd.usageErr("invalid value %q for flag --addr: %v", cmd.c.addr, err)
	}
	opts := portable.DialOptions{
		Password: cmd.c.password, ConnectTimeout: *timeout, ReadTimeout: *timeout, WriteTimeout: *timeout,
	}
	// Each proxy of a list in turn: any of them may serve a process.
	var reps []*doctorReport
	failed, checks := 0, 0
	for _, addr := range addrs {
		d, err := newDoctor(ctx, addr, cmd.c.namespace, opts)
		if err != nil {
			if len(addrs) == 1 {
				return fmt.Errorf("doctor: %w", err)
			}
			rep := &doctorReport{Addr: addr, Hints: []string{}}
			rep.add(checkResult{Name: "connect", Error: err.Error()})
			reps = append(reps, rep)
		} else {
			reps = append(reps, d.run(ctx, *samples))
		}
		rep := reps[len(reps)-1]
		failed, checks = failed+rep.Failed, checks+rep.Failed+rep.Passed
	}
	if *backends != "" {
		for _, b := range strings.Split(*backends, ",") {
			reps[0].addBackend(ctx, strings.TrimSpace(b), cmd.c.password)
		}
		failed, checks = 0, 0
		for _, rep := range reps {
			failed, checks = failed+rep.Failed, checks+rep.Failed+rep.Passed
		}
	}
	for i, rep := range reps {
		switch {
		case *asJSON && len(reps) == 1:
			err = writeJSON(stdout, rep)
		case *asJSON:
			if i == 0 {
				err = writeJSON(stdout, reps) // one report per address
			}
		default:
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			err = writeDoctorText(stdout, rep)
		}
		if err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed on %s", failed, checks, strings.Join(addrs, ", "))
	}
	return nil
}

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
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
}

// backendReport is what doctor read straight from one backend.
type backendReport struct {
	Addr            string   `json:"addr"`
	Version         string   `json:"version,omitempty"`
	MaxmemoryPolicy string   `json:"maxmemory_policy,omitempty"`
	AppendOnly      bool     `json:"appendonly"`
	Error           string   `json:"error,omitempty"`
	Warnings        []string `json:"warnings"`
}

// addBackend reads backend addr's settings (a failed check when it cannot)
// and warns, with the fix, about each that puts messages at risk.
func (rep *doctorReport) addBackend(ctx context.Context, addr, password string) {
	br := backendReport{Addr: addr, Warnings: []string{}}
	bi, err := portable.BackendSettings(ctx, addr, password)
	if err != nil {
		br.Error = err.Error()
		rep.Failed++
		rep.Checks = append(rep.Checks, checkResult{Name: "backend " + addr, Error: err.Error()})
		rep.Backends = append(rep.Backends, br)
		return
	}
	rep.Passed++
	rep.Checks = append(rep.Checks, checkResult{Name: "backend " + addr, OK: true})
	br.Version, br.MaxmemoryPolicy, br.AppendOnly = bi.Version, bi.MaxmemoryPolicy, bi.AOF
	br.Warnings = backendWarnings(bi)
	rep.Backends = append(rep.Backends, br)
}

// backendWarnings says what in bi puts accepted messages at risk, and
// the fix.
func backendWarnings(bi portable.BackendInfo) []string {
	ws := []string{}
	if !versionAtLeast(bi.Version, 3, 2) {
		ws = append(ws, fmt.Sprintf("Redis %s is older than 3.2, the oldest delayq works with (Codis 3.2 backends are 3.2.11): upgrade", bi.Version))
	}
	switch bi.MaxmemoryPolicy {
	case "noeviction":
	case "":
		ws = append(ws, "INFO does not report maxmemory_policy: make sure it is noeviction (eviction deletes messages in silence)")
	default:
		ws = append(ws, fmt.Sprintf("maxmemory-policy is %s: eviction deletes messages in silence; set maxmemory-policy noeviction", bi.MaxmemoryPolicy))
	}
	if !bi.AOF {
		ws = append(ws, "appendonly is off: a restart loses every message written since the last snapshot; "+
			"set appendonly yes (appendfsync everysec loses up to a second of writes on a host crash, always loses none)")
	}
	return ws
}

// versionAtLeast reports whether version v ("3.2.11") is at least
// major.minor; an unreadable version is not.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// checkResult is the outcome of one check.
type checkResult struct {
	Name  string  `json:"name"`
	OK    bool    `json:"ok"`
	MS    float64 `json:"ms"` // wall time of the check's commands
	Error string  `json:"error,omitempty"`
}

// rttStats summarizes timed round trips, in milliseconds.
type rttStats struct {
	Samples  int     `json:"samples"`
	MinMS    float64 `json:"min_ms"`
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
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

// newDoctor connects to addr: an error here names the address.
func newDoctor(ctx context.Context, addr, namespace string, o portable.DialOptions) (*doctor, error) {
	conn, err := portable.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	d := &doctor{
		addr: addr, opts: o, conn: conn,
		prefix: namespace + ":doctor:{" + nonce + "}:",
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// time times n round trips of one command.
func (d *doctor) time(ctx context.Context, n int, cmd string, args ...any) (*rttStats, error) {
	durs := make([]time.Duration, n)
	for i := range durs {
		start := time.Now()
		if _, err := d.do(ctx, cmd, args...); err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		durs[i] = time.Since(start)
	}
	slices.Sort(durs)
	return &rttStats{Samples: n, MinMS: ms(durs[0]), MedianMS: ms(durs[n/2]), MaxMS: ms(durs[n-1])}, nil
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

// checks lists every command shape of the portable set (internal/portable,
// docs/portability.md), in an order where each check finds the state the
// ones before it left.
func (d *doctor) checks() []doctorCheck {
	str, ctr, h, z, l, sk := d.key("str"), d.key("ctr"), d.key("hash"), d.key("zset"), d.key("list"), d.key("script")
	ttl := doctorTTL.Milliseconds()
	expire := func(k string) step { return step{[]any{"PEXPIRE", k, ttl}, wantInt(1)} }
	s := func(expect func(any, error) error, args ...any) step { return step{args, expect} }
	return []doctorCheck{
		{"PING", []step{s(wantString("PONG"), "PING")}},
		{"SET NX PX", []step{
			s(wantString("OK"), "SET", str, "v1", "NX", "PX", ttl),
			s(wantNil, "SET", str, "v0", "NX", "PX", ttl),
		}},
		{"SET PX", []step{s(wantString("OK"), "SET", str, "v2", "PX", ttl)}},
		{"GET", []step{s(wantString("v2"), "GET", str), s(wantNil, "GET", ctr)}},
		{"EXISTS", []step{s(wantInt(1), "EXISTS", str), s(wantInt(0), "EXISTS", ctr)}},
		{"PEXPIRE", []step{s(wantInt(1), "PEXPIRE", str, ttl/2), s(wantInt(0), "PEXPIRE", ctr, ttl)}},
		{"PTTL", []step{s(wantIntIn(1, ttl/2), "PTTL", str), s(wantInt(-2), "PTTL", ctr)}},
		{"INCR", []step{s(wantInt(1), "INCR", ctr), expire(ctr)}},
		{"INCRBY", []step{s(wantInt(42), "INCRBY", ctr, 41)}},
		{"DEL", []step{s(wantInt(1), "DEL", ctr), s(wantInt(0), "DEL", ctr)}},

		{"HSET", []step{s(wantInt(1), "HSET", h, "f1", "v1"), expire(h), s(wantInt(0), "HSET", h, "f1", "v1")}},
		{"HSETNX", []step{s(wantInt(0), "HSETNX", h, "f1", "x"), s(wantInt(1), "HSETNX", h, "f2", "v2")}},
		{"HMSET", []step{s(wantString("OK"), "HMSET", h, "f3", "v3", "f4", "v4")}},
		{"HMGET", []step{s(wantStrings("v1", "v2", "v3", nilValue), "HMGET", h, "f1", "f2", "f3", "none")}},
		{"HGET", []step{s(wantString("v4"), "HGET", h, "f4"), s(wantNil, "HGET", h, "none")}},
		{"HINCRBY", []step{s(wantInt(3), "HINCRBY", h, "n", 3)}},
		{"HLEN", []step{s(wantInt(5), "HLEN", h)}},
		{"HDEL", []step{s(wantInt(2), "HDEL", h, "f3", "f4", "none")}},
		{"HSCAN", []step{s(wantScan(map[string]string{"f1": "v1", "f2": "v2", "n": "3"}), "HSCAN", h, "0", "COUNT", 100)}},

		{"ZADD", []step{s(wantInt(2), "ZADD", z, 1, "a", 2, "b"), expire(z)}},
		{"ZADD NX", []step{s(wantInt(1), "ZADD", z, "NX", 9, "a", 3, "c")}}, // a kept, c added
		{"ZADD XX CH", []step{
			s(wantInt(0), "ZADD", z, "XX", 6, "a"),
			s(wantInt(1), "ZADD", z, "XX", "CH", 5, "a", 7, "x"), // a changed, x not added
		}},
		{"ZADD CH", []step{s(wantInt(2), "ZADD", z, "CH", 10, "c", 4, "d")}}, // b=2 d=4 a=5 c=10
		{"ZRANGEBYSCORE WITHSCORES LIMIT", []step{
			s(wantStrings("b", "2", "d", "4"), "ZRANGEBYSCORE", z, "-inf", "+inf", "WITHSCORES", "LIMIT", 0, 2),
			s(wantStrings("d", "a"), "ZRANGEBYSCORE", z, 3, 9),
			s(wantStrings("d"), "ZRANGEBYSCORE", z, "(2", "(5"), // exclusive bounds: members' leaving scores
		}},
		{"ZREVRANGEBYSCORE", []step{
			s(wantStrings("a", "d", "b"), "ZREVRANGEBYSCORE", z, 9, 0),
			s(wantStrings("c", "10"), "ZREVRANGEBYSCORE", z, "+inf", "-inf", "WITHSCORES", "LIMIT", 0, 1),
		}},
		{"ZRANGE", []step{
			s(wantStrings("b", "d", "a", "c"), "ZRANGE", z, 0, -1),
			s(wantStrings("b", "2"), "ZRANGE", z, 0, 0, "WITHSCORES"),
		}},
		{"ZSCORE", []step{s(wantString("5"), "ZSCORE", z, "a"), s(wantNil, "ZSCORE", z, "x")}},
		{"ZCARD", []step{s(wantInt(4), "ZCARD", z)}},
		{"ZCOUNT", []step{s(wantInt(2), "ZCOUNT", z, 3, 6)}},
		{"ZSCAN", []step{s(wantScan(map[string]string{"a": "5", "b": "2", "c": "10", "d": "4"}), "ZSCAN", z, "0", "COUNT", 100)}},
		{"ZREM", []step{s(wantInt(1), "ZREM", z, "b", "none"), s(wantInt(3), "ZCARD", z)}},

		{"LPUSH", []step{s(wantInt(1), "LPUSH", l, "x"), expire(l)}},
		{"RPUSH", []step{s(wantInt(4), "RPUSH", l, "y", "z", "y")}},
		{"LRANGE", []step{s(wantStrings("x", "y", "z", "y"), "LRANGE", l, 0, -1)}},
		{"LLEN", []step{s(wantInt(4), "LLEN", l)}},
		{"LREM", []step{s(wantInt(2), "LREM", l, 0, "y"), s(wantStrings("x", "z"), "LRANGE", l, 0, -1)}},

		{"EVALSHA NOSCRIPT", []step{
			s(wantNoScript, "EVALSHA", d.sha, 1, sk, 5),
			s(wantString("PONG"), "PING"), // the connection survived the error
		}},
		{"EVAL", []step{s(wantInt(5), "EVAL", d.script, 1, sk, 5)}},
		{"EVALSHA", []step{s(wantInt(10), "EVALSHA", d.sha, 1, sk, 5)}},
		// Segments are read by scripts with Lua's struct library.
		{"EVAL struct", []step{s(wantInt(7), "EVAL", "return struct.unpack('>I4', struct.pack('>I4', 7))", 1, sk)}},
	}
}

// nilValue stands for a nil element in wantStrings.
const nilValue = "\x00nil"

func wantString(want string) func(any, error) error {
	return func(reply any, err error) error {
		got, err := redis.String(reply, err)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}
}

func wantInt(want int64) func(any, error) error {
	return wantIntIn(want, want)
}

func wantIntIn(lo, hi int64) func(any, error) error {
	return func(reply any, err error) error {
		got, err := redis.Int64(reply, err)
		if err != nil {
			return err
		}
		if got < lo || got > hi {
			if lo == hi {
				return fmt.Errorf("got %d, want %d", got, lo)
			}
			return fmt.Errorf("got %d, want %d to %d", got, lo, hi)
		}
		return nil
	}
}

// anyInt accepts any integer reply.
func anyInt(reply any, err error) error {
	_, err = redis.Int64(reply, err)
	return err
}

func wantNil(reply any, err error) error {
	if err != nil {
		return err
	}
	if reply != nil {
		return fmt.Errorf("got %v, want nil", reply)
	}
	return nil
}

// wantStrings wants an array of bulk strings (nilValue for a nil).
func wantStrings(want ...string) func(any, error) error {
	return func(reply any, err error) error {
		vals, err := redis.Values(reply, err)
		if err != nil {
			return err
		}
		got := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				got[i] = nilValue
				continue
			}
			s, err := redis.String(v, nil)
			if err != nil {
				return fmt.Errorf("element %d: %v", i, err)
			}
			got[i] = s
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}
}

// wantScan wants an HSCAN or ZSCAN reply that ends the scan (cursor 0)
// and holds exactly the pairs of want. With COUNT 100 a small hash or
// sorted set comes back whole.
func wantScan(want map[string]string) func(any, error) error {
	return func(reply any, err error) error {
		vals, err := redis.Values(reply, err)
		if err != nil {
			return err
		}
		if len(vals) != 2 {
			return fmt.Errorf("got %d elements, want cursor and items", len(vals))
		}
		cursor, err := redis.String(vals[0], nil)
		if err != nil {
			return fmt.Errorf("cursor: %v", err)
		}
		items, err := redis.StringMap(vals[1], nil)
		if err != nil {
			return fmt.Errorf("items: %v", err)
		}
		if cursor != "0" || len(items) != len(want) {
			return fmt.Errorf("got cursor %s and %v, want cursor 0 and %v", cursor, items, want)
		}
		for k, v := range want {
			if items[k] != v {
				return fmt.Errorf("got %v, want %v", items, want)
			}
		}
		return nil
	}
}

// wantNoScript wants the NOSCRIPT error of an EVALSHA of an unknown
// script (matched by its text, as redigo's own fallback does).
func wantNoScript(reply any, err error) error {
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr) && strings.HasPrefix(string(rerr), "NOSCRIPT"):
		return nil
	case err != nil:
		return fmt.Errorf("got error %q, want NOSCRIPT", err)
	}
	return fmt.Errorf("got %v, want a NOSCRIPT error", reply)
}

// hints returns what the report suggests about the deployment.
func (d *doctor) hints(rep *doctorReport) []string {
	var hs []string
	if p, g := rep.RTT.Ping, rep.RTT.Get; p != nil && g != nil {
		if g.MedianMS >= 1.5*p.MedianMS && g.MedianMS-p.MedianMS >= 0.02 {
			hs = append(hs, fmt.Sprintf("PING answers faster than GET (median %.3fms vs %.3fms): a proxy that answers PING itself "+
				"(Twemproxy or Codis) is probably in front. With Twemproxy, set auto_eject_hosts: false.", p.MedianMS, g.MedianMS))
		} else {
			hs = append(hs, fmt.Sprintf("PING and GET take about as long (median %.3fms vs %.3fms): probably Redis itself, "+
				"or a proxy that forwards PING.", p.MedianMS, g.MedianMS))
		}
		if g.MedianMS > 2 {
			hs = append(hs, fmt.Sprintf("GET takes %.2fms at the median: every poll and claim pays that; run workers close to Redis.", g.MedianMS))
		}
	}
	if c := rep.find("EVAL"); c != nil {
		if sha := rep.find("EVALSHA"); c.OK && sha != nil && sha.OK {
			hs = append(hs, "EVAL and EVALSHA work: one-key scripts are allowed.")
		} else {
			hs = append(hs, "scripts do not work here: delayq needs one-key EVAL and EVALSHA.")
		}
	}
	if c := rep.find("EVAL struct"); c != nil && !c.OK {
		hs = append(hs, "scripts cannot use Lua's struct library: delayq's scripts read segments with it.")
	}
	if c := rep.find("EVALSHA NOSCRIPT"); c != nil {
		if c.OK {
			hs = append(hs, "an unknown EVALSHA answers NOSCRIPT on a live connection: the EVALSHA-then-EVAL fallback works.")
		} else {
			hs = append(hs, "an unknown EVALSHA does not answer NOSCRIPT on a live connection: delayq cannot load its scripts.")
		}
	}
	if d.lost {
		hs = append(hs, "the server closed the connection after a command, as Twemproxy does with a command shape it does not know.")
	}
	if d.opts.Password != "" {
		hs = append(hs, "AUTH was accepted.")
	}
	return hs
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
	n := rep.Passed + rep.Failed
	if rep.Failed == 0 {
		fmt.Fprintf(&b, "all %d checks passed\n", n)
	} else {
		fmt.Fprintf(&b, "%d of %d checks failed: delayq will not work through this server\n", rep.Failed, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
