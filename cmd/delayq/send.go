package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
)

// DefaultBatch is the default of send --batch: messages per SendBatch call.
const DefaultBatch = 500

// runSend implements "delayq send": one message from flags, or JSON lines
// from stdin with --stdin.
func runSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("send",
		"--topic T [--id ID | --id-from-body] [--delay DUR | --at TIME] [--body STR | --body-file PATH]\n"+
			"       [--on-duplicate reject|replace|debounce [--max-wait DUR]] [--unique-for DUR]\n"+
			"       delayq send --topic T --stdin [--id-from-body] [--batch N] [--on-duplicate P [--max-wait DUR]] [--unique-for DUR]",
		"Enqueues one message and prints its id. An id that exists is refused (exit 1)\n"+
			"unless --on-duplicate replace or debounce says otherwise: the line then reads\n"+
			`"ID replaced, due TIME" or "ID debounced, due TIME", TIME the due stored.`+"\n"+
			`With --stdin, enqueues the JSON lines of stdin, each what the HTTP API takes:`+"\n"+
			`{"id": "...", "body": "...", "delay": "5s"} with "delay_ms": N or "at":`+"\n"+
			`"<RFC 3339>" instead of delay (none: due now), "body_base64" instead of body,`+"\n"+
			`"max_attempts": N, and "on_duplicate", "max_wait" and "unique_for" (else the`+"\n"+
			"flags'); it prints each accepted message's line on stdout and each rejected\n"+
			"line on stderr.\n\n"+
			"--unique-for keeps the id taken after the message's delivery succeeded: until\n"+
			"DUR after its ack, a send of the id is refused (exit 1), whatever --on-duplicate\n"+
			"says, saying when it was delivered and until when its id is taken. Without it,\n"+
			"a message with an id of its own gets the topic's default (delayq unique-for).",
		stdout, stderr)
	var (
		due         dueFlags
		id          = cmd.fs.String("id", "", "message `id` (default: a generated ULID)")
		idFromBody  = cmd.fs.Bool("id-from-body", false, "the id is delayq.IDFrom(body), so that the same body sent again is a duplicate; with --stdin, each line that sets no \"id\" gets IDFrom of its body")
		body        = cmd.fs.String("body", "", "message `body`")
		bodyFile    = cmd.fs.String("body-file", "", "read the body from `path` (- for stdin)")
		maxAttempts = cmd.fs.Int("max-attempts", 0, "delivery attempts of this message (default: the consumer's)")
		useStdin    = cmd.fs.Bool("stdin", false, "enqueue the JSON lines read from stdin")
		batch       = cmd.fs.Int("batch", DefaultBatch, "messages per enqueue call with --stdin")
		retryFor    = durationFlag{d: delayq.DefaultRetryFor}
		dup         duplicateFlags
		uniqueFor   durationFlag
	)
	dup.add(cmd)
	cmd.fs.Var(&uniqueFor, "unique-for", "keep the id taken for `duration` after the message's delivery succeeded, e.g. 24h: a send of it meanwhile is refused (default: the topic's, see delayq unique-for)")
	cmd.fs.Var(&retryFor, "retry-for", "while no proxy answers, dial again for up to `duration`, then fail (0: fail at once)")
	due.add(cmd, " (neither --delay nor --at: due now)")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if err := cmd.nonNegative("max-attempts", int64(*maxAttempts)); err != nil {
		return err
	}
	if err := cmd.nonNegative("retry-for", int64(retryFor.d)); err != nil {
		return err
	}
	if err := cmd.nonNegative("unique-for", int64(uniqueFor.d)); err != nil {
		return err
	}
	cmd.c.retryFor = retryFor.d
	if retryFor.d == 0 {
		cmd.c.retryFor = -1
	}
	dups, err := dup.resolve(cmd)
	if err != nil {
		return err
	}
	dups.UniqueFor = uniqueFor.d // with --stdin, for the lines that set no unique_for
	if *useStdin {
		for _, name := range []string{"id", "body", "body-file", "delay", "at", "max-attempts"} {
			if cmd.isSet(name) {
				return cmd.usageErr("--%s cannot be used with --stdin", name)
			}
		}
		if *batch < 1 {
			return cmd.usageErr("invalid value %d for flag --batch: must be at least 1", *batch)
		}
		return cmd.connect(func(client *delayq.Client) error {
			to := stdinSend{client: client, topic: cmd.c.topic, dups: dups, batch: *batch, idFromBody: *idFromBody}
			return notRetried(sendLines(ctx, to, stdin, stdout, stderr), retryFor.d)
		})
	}
	if cmd.isSet("batch") {
		return cmd.usageErr("--batch needs --stdin")
	}
	if *idFromBody && cmd.isSet("id") {
		return cmd.usageErr("--id and --id-from-body are mutually exclusive")
	}
	delay, at, err := due.resolve(cmd, false)
	if err != nil {
		return err
	}
	msg := delayq.Message{Topic: cmd.c.topic, ID: *id, Body: []byte(*body), Delay: delay, At: at, MaxAttempts: *maxAttempts,
		OnDuplicate: dups.OnDuplicate, MaxWait: dups.MaxWait, UniqueFor: dups.UniqueFor}
	if cmd.isSet("body-file") {
		if cmd.isSet("body") {
			return cmd.usageErr("--body and --body-file are mutually exclusive")
		}
		if msg.Body, err = readBody(*bodyFile, stdin); err != nil {
			return err
		}
	}
	if *idFromBody {
		msg.ID = delayq.IDFrom(string(msg.Body))
	}
	return cmd.connect(func(client *delayq.Client) error {
		got, err := client.Send(ctx, msg)
		if err != nil {
			return notRetried(err, retryFor.d)
		}
		_, err = fmt.Fprintln(stdout, sentLine(got))
		return err
	})
}

// notRetried says that err, a failure to reach Redis, was not retried
// because --retry-for is 0.
func notRetried(err error, retryFor time.Duration) error {
	if retryFor == 0 && errors.Is(err, delayq.ErrUnavailable) {
		return fmt.Errorf("%w (not retried: --retry-for 0)", err)
	}
	return err
}

// readBody returns the contents of the file at path, or of stdin for "-".
func readBody(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read body from stdin: %w", err)
		}
		return b, nil
	}
	return os.ReadFile(path)
}

// parseLine decodes one JSON line into a message of topic, in the form
// the HTTP API takes (httpapi.DecodeMessage), so that a line and a
// request body mean the same; dups (the flags) apply where the line sets
// no on_duplicate, max_wait or unique_for. Unknown fields are rejected, so that a
// misspelt "delay_ms" does not make a message due now. The body's size
// is left to the client's limit. On error, the message still carries the
// id when one was read.
func parseLine(topic string, dups httpapi.Duplicates, line []byte) (delayq.Message, error) {
	m, err := httpapi.DecodeMessage(bytes.NewReader(line), topic, math.MaxInt, dups)
	if err != nil && m.ID == "" {
		// A second, lenient pass recovers the id for the error message.
		var idOnly struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(bytes.NewReader(line)).Decode(&idOnly) // the first value, if the line holds more
		m.ID = idOnly.ID
	}
	return m, err
}

// pendingLine is a read line waiting for its batch to be sent.
type pendingLine struct {
	line int
	msg  delayq.Message
	res  delayq.SendResult // what its enqueue did, once sent
	err  error             // the reason it was rejected, when it was
}

// rejection formats the stderr line that reports a rejected message. A
// message refused because its id is a delivered message's, within its
// uniqueness window, says "finished" first, as the HTTP API's outcome:
// `line 3: id "x": finished: duplicate message id: "x" in topic t was
// delivered at TIME; its id is taken until TIME`.
func rejection(line int, id string, err error) string {
	reason := strings.TrimPrefix(err.Error(), "delayq: ")
	var fe *delayq.FinishedError
	if errors.As(err, &fe) {
		reason = string(delayq.OutcomeFinished) + ": " + reason
	}
	return fmt.Sprintf("line %d: id %q: %s", line, id, reason)
}

// lineSender reads JSON lines and enqueues them in batches, reporting each
// line's outcome in line order.
type lineSender struct {
	client   *delayq.Client
	out      *bufio.Writer
	stderr   io.Writer
	batch    []pendingLine
	accepted int
	rejected int
}

// stdinSend is where and how "delayq send --stdin" enqueues the lines it
// reads (see sendLines).
type stdinSend struct {
	client *delayq.Client
	topic  string
	dups   httpapi.Duplicates // applies where a line sets no on_duplicate, max_wait or unique_for
	batch  int                // lines per enqueue call
	// idFromBody gives each line that sets no id (or an empty one) the
	// id delayq.IDFrom(body), body as decoded (send --id-from-body).
	idFromBody bool
}

// sendLines enqueues the JSON lines read from r into to.topic, to.batch
// at a time. Each accepted message's line (sentLine: its id, and what
// became of an id that existed) goes to stdout; rejected lines are
// reported on stderr as `line N: id "X": reason`. It returns an error
// when any line was rejected or when an enqueue call failed as a whole.
func sendLines(ctx context.Context, to stdinSend, r io.Reader, stdout, stderr io.Writer) error {
	s := &lineSender{client: to.client, out: bufio.NewWriter(stdout), stderr: stderr}
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n') // no length limit: bodies may be over 1 MiB
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("read stdin line %d: %w", n, rerr)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			m, err := parseLine(to.topic, to.dups, line)
			if err == nil && m.ID == "" && to.idFromBody {
				m.ID = delayq.IDFrom(string(m.Body))
			}
			s.batch = append(s.batch, pendingLine{line: n, msg: m, err: err})
		}
		if len(s.batch) >= to.batch || (rerr != nil && len(s.batch) > 0) {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
		if rerr != nil {
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped at line %d: %w", n, err)
		}
	}
	if s.rejected > 0 {
		n := s.accepted + s.rejected
		return fmt.Errorf("%d of %d %s rejected", s.rejected, n, plural(n, "message", "messages"))
	}
	return nil
}

// flush enqueues the valid messages of the batch and reports every line.
func (s *lineSender) flush(ctx context.Context) error {
	defer func() { s.batch = s.batch[:0] }()
	var msgs []delayq.Message
	var idx []int
	for i, p := range s.batch {
		if p.err == nil {
			msgs = append(msgs, p.msg)
			idx = append(idx, i)
		}
	}
	if len(msgs) > 0 {
		res, err := s.client.SendBatch(ctx, msgs)
		if err != nil {
			s.out.Flush()
			return fmt.Errorf("enqueue lines %d to %d: %w", s.batch[0].line, s.batch[len(s.batch)-1].line, err)
		}
		for j, r := range res {
			s.batch[idx[j]].msg.ID, s.batch[idx[j]].res, s.batch[idx[j]].err = r.ID, r, r.Err
		}
	}
	for _, p := range s.batch {
		if p.err != nil {
			s.rejected++
			fmt.Fprintln(s.stderr, rejection(p.line, p.msg.ID, p.err))
			continue
		}
		s.accepted++
		fmt.Fprintln(s.out, sentLine(p.res))
	}
	return s.out.Flush()
}
