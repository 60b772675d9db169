package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// delayqBin is the path of the delayq binary every test runs. TestMain sets
// it: $DELAYQ_BIN when set (a relative path is taken from the module root),
// else a binary built once into a temp dir.
var delayqBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if p := os.Getenv("DELAYQ_BIN"); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join("..", p) // relative to the module root, like make's paths
		}
		abs, err := filepath.Abs(p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "test: DELAYQ_BIN: %v\n", err)
			return 1
		}
		delayqBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "delayq-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "test: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	delayqBin = filepath.Join(dir, "delayq")
	build := exec.Command("go", "build", "-o", delayqBin, "./cmd/delayq")
	build.Dir = ".." // the module root: this package lives in test/
	build.Stdout = os.Stderr
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "test: go build ./cmd/delayq: %v\n", err)
		return 1
	}
	return m.Run()
}

// cliTimeout bounds one short-lived CLI invocation (send, get, delete...).
const cliTimeout = 30 * time.Second

// result is the outcome of one finished delayq process.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int // exit status; -1 when killed by a signal
}

func (r result) String() string {
	return fmt.Sprintf("delayq %s: exit %d\nstdout: %s\nstderr: %s",
		strings.Join(r.args, " "), r.code, clip(r.stdout), clip(r.stderr))
}

// clip shortens s for failure messages.
func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// newCmd returns an exec.Cmd of the delayq binary that inherits the test's
// environment (DELAYQ_COMMAND_AUDIT included) except DELAYQ_ADDR, so that
// every address is explicit.
func newCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, delayqBin, args...)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYQ_ADDR=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// cli runs delayq with args to completion, feeding it stdin, and returns its
// outputs and exit status. It fails t if the process cannot be run or
// outlives cliTimeout.
func cli(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := newCmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run delayq %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("delayq %s did not finish within %v\n%s", strings.Join(args, " "), cliTimeout, r)
	}
	return r
}

// mustCLI is cli that fails t unless the exit status is 0.
func mustCLI(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	r := cli(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0, got %s", r)
	}
	return r
}

// wantExit fails t unless r exited with code and its stderr contains every
// one of subs (case-insensitive).
func wantExit(t testing.TB, r result, code int, subs ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("want exit %d, got %s", code, r)
		return
	}
	low := strings.ToLower(r.stderr)
	for _, s := range subs {
		if !strings.Contains(low, strings.ToLower(s)) {
			t.Errorf("stderr lacks %q: %s", s, r)
		}
	}
}

// waitFor polls cond every 20ms until it returns true, and fails t with
// what (formatted with args) when timeout passes first.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(what, args...))
	}
}

// poll polls cond until it returns true (true) or timeout passes (false).
var poll = testenv.Poll

// delivery is one JSON line printed by "delayq sub", decoded.
type delivery struct {
	Topic       string  `json:"topic"`
	ID          string  `json:"id"`
	Partition   int     `json:"partition"`
	Token       int64   `json:"token"`
	Attempt     int     `json:"attempt"`
	Due         string  `json:"due"`
	DeliveredAt string  `json:"delivered_at"`
	Body        *string `json:"body"`
	BodyBase64  string  `json:"body_base64"`

	// Filled in by the reader.
	sub  int       // which sub process printed it
	due  time.Time // Due parsed
	at   time.Time // DeliveredAt parsed
	body []byte    // Body or BodyBase64 decoded
	seen time.Time // when the test read the line
}

// parseDelivery decodes one line of sub's output.
func parseDelivery(line []byte) (delivery, error) {
	var d delivery
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("bad delivery line %q: %v", line, err)
	}
	var err error
	if d.due, err = time.Parse(time.RFC3339Nano, d.Due); err != nil {
		return d, fmt.Errorf("bad due in %q: %v", line, err)
	}
	if d.at, err = time.Parse(time.RFC3339Nano, d.DeliveredAt); err != nil {
		return d, fmt.Errorf("bad delivered_at in %q: %v", line, err)
	}
	switch {
	case d.Body != nil && d.BodyBase64 != "":
		return d, fmt.Errorf("both body and body_base64 in %q", line)
	case d.Body != nil:
		d.body = []byte(*d.Body)
	case d.BodyBase64 != "":
		if d.body, err = base64.StdEncoding.DecodeString(d.BodyBase64); err != nil {
			return d, fmt.Errorf("bad body_base64 in %q: %v", line, err)
		}
	}
	return d, nil
}

// end is the line "sub --ends" prints when a handler returns.
type end struct {
	Ended   string `json:"ended"`
	Attempt int    `json:"attempt"`
	EndedAt string `json:"ended_at"`

	sub int       // which sub process printed it
	at  time.Time // EndedAt parsed
}

func parseEnd(line []byte) (end, error) {
	var e end
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("bad end line %q: %v", line, err)
	}
	var err error
	if e.at, err = time.Parse(time.RFC3339Nano, e.EndedAt); err != nil {
		return e, fmt.Errorf("bad ended_at in %q: %v", line, err)
	}
	return e, nil
}

// sent is what the ledger knows of an enqueued message.
type sent struct {
	body     []byte
	earliest time.Time // no delivery may start before this (due, at the latest estimate)
	deleted  bool      // deleted before its due time: must never be delivered
}

// ledger records every message the test enqueued and every delivery the
// sub processes printed. It is safe for concurrent use.
type ledger struct {
	mu        sync.Mutex
	sent      map[string]*sent
	delivered map[string][]delivery
	all       []delivery // in the order read
	ends      []end      // handlers' ends, of subs run with --ends
	errs      []string   // unparseable lines
}

func newLedger() *ledger {
	return &ledger{sent: map[string]*sent{}, delivered: map[string][]delivery{}}
}

// expect records an enqueued message.
func (l *ledger) expect(id string, body []byte, earliest time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[id] = &sent{body: body, earliest: earliest}
}

// markDeleted records that id was deleted and must never be delivered.
func (l *ledger) markDeleted(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[id].deleted = true
}

// setEarliest moves the earliest allowed delivery of id (reschedule).
func (l *ledger) setEarliest(id string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[id].earliest = t
}

func (l *ledger) add(d delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered[d.ID] = append(l.delivered[d.ID], d)
	l.all = append(l.all, d)
}

func (l *ledger) addEnd(e end) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, e)
}

func (l *ledger) addErr(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, s)
}

// count returns the number of deliveries read so far.
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// missing returns the ids expected (not deleted) that have not been
// delivered yet.
func (l *ledger) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, s := range l.sent {
		if !s.deleted && len(l.delivered[id]) == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// deliveries returns a copy of the deliveries of id.
func (l *ledger) deliveries(id string) []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivery(nil), l.delivered[id]...)
}

// dues returns the earliest due of each message sent: its due as sent, or
// as rescheduled since.
func (l *ledger) dues() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	due := make(map[string]time.Time, len(l.sent))
	for id, s := range l.sent {
		due[id] = s.earliest
	}
	return due
}

// snapshot returns a copy of every delivery read.
func (l *ledger) snapshot() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivery(nil), l.all...)
}

// sub is a running "delayq sub" process whose stdout lines go to a ledger.
type sub struct {
	idx    int
	args   []string
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	done   chan struct{} // closed when the process exited and stdout was read
	err    error         // Wait's result, valid after done
}

// startSub starts "delayq sub args..." as sub number idx, decoding each
// stdout line into l. A cleanup kills it if the test did not stop it.
func startSub(t testing.TB, l *ledger, idx int, args ...string) *sub {
	t.Helper()
	args = append([]string{"sub"}, args...)
	cmd := newCmd(context.Background(), args...)
	s := &sub{idx: idx, args: args, cmd: cmd, stderr: &testenv.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C of the test does not reach it
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start delayq %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		defer close(s.done)
		readLines(stdout, func(line []byte) {
			if bytes.HasPrefix(line, []byte(`{"ended":`)) {
				e, err := parseEnd(line)
				if err != nil {
					l.addErr(fmt.Sprintf("sub %d: %v", idx, err))
					return
				}
				e.sub = idx
				l.addEnd(e)
				return
			}
			d, err := parseDelivery(line)
			if err != nil {
				l.addErr(fmt.Sprintf("sub %d: %v", idx, err))
				return
			}
			d.sub, d.seen = idx, time.Now()
			l.add(d)
		})
		s.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// readLines calls fn for each line of r (without its newline) until EOF.
func readLines(r io.Reader, fn func([]byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			fn(bytes.TrimRight(line, "\r\n"))
		}
		if err != nil {
			return
		}
	}
}

// exited reports whether the process has exited (and its output was read).
func (s *sub) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// exitCode returns the exit status of an exited process (-1: signalled).
func (s *sub) exitCode() int {
	if s.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// wait waits up to timeout for the process to exit and returns its exit
// status; it fails t (after SIGKILL) when the process does not exit.
func (s *sub) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
		return s.exitCode()
	case <-time.After(timeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("delayq %s (sub %d) did not exit within %v; killed\nstderr: %s",
			strings.Join(s.args, " "), s.idx, timeout, clip(s.stderr.String()))
		return -1
	}
}

// stop sends SIGTERM and waits up to timeout for the exit status.
func (s *sub) stop(t testing.TB, timeout time.Duration) int {
	t.Helper()
	if !s.exited() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	return s.wait(t, timeout)
}

// topicStats is the JSON of "delayq stats --json" (delayq.TopicStats).
type topicStats struct {
	Topic      string `json:"topic"`
	Count      int    `json:"partition_count"`
	Scheduled  int64  `json:"scheduled"`
	DueNow     int64  `json:"due_now"`
	LagMS      int64  `json:"lag_ms"`
	Consumers  int    `json:"consumers"`
	InFlight   int64  `json:"inflight"`
	Dead       int64  `json:"dead"`
	Partitions []struct {
		Partition int        `json:"partition"`
		Scheduled int64      `json:"scheduled"`
		DueNow    int64      `json:"due_now"`
		InFlight  int64      `json:"inflight"`
		Dead      int64      `json:"dead"`
		OldestDue *time.Time `json:"oldest_due"`
		Owner     string     `json:"owner"`
		Token     int64      `json:"token"`
	} `json:"partitions"`
	Pause struct {
		Paused      bool       `json:"paused"`
		PausedUntil *time.Time `json:"paused_until"`
	} `json:"pause"`
	Limits *struct {
		Rate        string `json:"rate"`
		Burst       int    `json:"burst"`
		Concurrency int    `json:"concurrency"`
		Started     int64  `json:"started_last_second"`
		Running     int64  `json:"running"`
	} `json:"limits"`
}

// stats runs "delayq stats --json" and decodes it; extra holds more flags.
func stats(t testing.TB, addr, topic string, extra ...string) topicStats {
	t.Helper()
	ts, r := tryStats(t, addr, topic, extra...)
	if r.code != 0 {
		t.Fatalf("want exit 0, got %s", r)
	}
	return ts
}

// tryStats is stats for a topic that may not exist yet: the zero
// topicStats and the failed run when "delayq stats" fails.
func tryStats(t testing.TB, addr, topic string, extra ...string) (topicStats, result) {
	t.Helper()
	r := cli(t, "", append([]string{"stats", "--addr", addr, "--topic", topic, "--json"}, extra...)...)
	if r.code != 0 {
		return topicStats{}, r
	}
	var ts topicStats
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		t.Fatalf("decode stats --json: %v\n%s", err, r)
	}
	return ts, r
}

// owners returns how many partitions have an owner, and the distinct
// owners.
func (ts topicStats) owners() (owned int, who map[string]int) {
	who = map[string]int{}
	for _, p := range ts.Partitions {
		if p.Owner != "" {
			owned++
			who[p.Owner]++
		}
	}
	return owned, who
}

// infoJSON is the output of "delayq get" and of "dead list --json" lines.
type infoJSON struct {
	Topic       string  `json:"topic"`
	ID          string  `json:"id"`
	Partition   int     `json:"partition"`
	State       string  `json:"state"`
	Due         string  `json:"due"`
	Deadline    string  `json:"deadline"`
	DiedAt      string  `json:"died_at"`
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	Created     string  `json:"created"`
	Updated     string  `json:"updated"`
	LastError   string  `json:"last_error"`
	Body        *string `json:"body"`
	BodyBase64  string  `json:"body_base64"`
}

// decodeInfo decodes get's output, failing t on unknown fields.
func decodeInfo(t testing.TB, s string) infoJSON {
	t.Helper()
	var in infoJSON
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("decode message JSON: %v\n%s", err, s)
	}
	return in
}

// mustTime parses an RFC 3339 time or fails t.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parse time %q: %v", s, err)
	}
	return tm
}

// firstLateness returns the 99th percentile and the largest lateness of
// the first attempts in l, each from its message's own due.
func (l *ledger) firstLateness() (p99, worst time.Duration) {
	var lates []time.Duration
	for _, d := range l.snapshot() {
		if d.Attempt == 1 {
			lates = append(lates, d.at.Sub(d.due))
		}
	}
	if len(lates) == 0 {
		return 0, 0
	}
	sort.Slice(lates, func(i, j int) bool { return lates[i] < lates[j] })
	return percentile(lates, 99), lates[len(lates)-1]
}

// percentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(ds)) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	if rank > len(ds) {
		rank = len(ds)
	}
	return ds[rank-1]
}

// lines splits s into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
