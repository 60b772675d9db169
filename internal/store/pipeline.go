package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// How the store sends its commands: pipelines of one-key commands and
// scripts (EVALSHA, then EVAL on NOSCRIPT), on a connection of their own
// (do, script, steps) or on the caller's, and the helpers that build their
// arguments and read their replies.

// cmd is one command of a pipeline.
type cmd struct {
	name string
	args []any
}

// pipe sends cmds in one write and returns their replies in order. A
// command's redis error is returned in its reply slot as a redis.Error;
// a connection error fails the whole call, and so does a refusal of the
// credentials (portable.AuthError: NOAUTH, WRONGPASS), once every reply
// is read.
func pipe(ctx context.Context, c redis.Conn, cmds []cmd) ([]any, error) {
	if len(cmds) == 1 {
		r, err := redis.DoContext(c, ctx, cmds[0].name, cmds[0].args...)
		var re redis.Error
		if errors.As(err, &re) && !errors.Is(err, portable.ErrAuth) {
			return []any{re}, nil
		}
		return []any{r}, err
	}
	for _, k := range cmds {
		if err := c.Send(k.name, k.args...); err != nil {
			return nil, err
		}
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	var refused error
	for i := range cmds {
		r, err := redis.ReceiveContext(c, ctx)
		var re redis.Error
		switch {
		case errors.Is(err, portable.ErrAuth):
			refused = err
		case errors.As(err, &re):
			out[i] = re
		case err != nil:
			return nil, err
		default:
			out[i] = r
		}
	}
	if refused != nil {
		return nil, refused
	}
	return out, nil
}

// scriptCall starts the arguments of a pipelined EVALSHA of sc on key,
// with room for n more: pipeScripts sends it, and resends it as EVAL.
func scriptCall(sc *redis.Script, key string, n int) []any {
	return append(make([]any, 0, 3+n), sc.Hash(), 1, key)
}

// pipeScripts sends cmds, EVALSHA of the package's scripts among them, in
// one pipeline; the EVALSHAs a server answered NOSCRIPT (it had not seen
// the script, or restarted) are sent again as EVAL. Only those: the others
// ran.
func pipeScripts(ctx context.Context, c redis.Conn, cmds []cmd) ([]any, error) {
	r, err := pipe(ctx, c, cmds)
	if err != nil {
		return nil, err
	}
	var again []int
	for i, v := range r {
		if e, ok := v.(redis.Error); ok && strings.HasPrefix(string(e), "NOSCRIPT ") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return r, nil
	}
	evals := make([]cmd, len(again))
	for j, i := range again {
		evals[j] = cmd{"EVAL", append([]any{scriptSources[cmds[i].args[0].(string)]}, cmds[i].args[1:]...)}
	}
	r2, err := pipe(ctx, c, evals)
	if err != nil {
		return nil, err
	}
	for j, i := range again {
		r[i] = r2[j]
	}
	return r, nil
}

// roundTrip sends cmds in one pipeline on c, EVALSHAs among them (see
// pipeScripts), and returns their replies, or the first error among them:
// the connection's, or a command's.
func roundTrip(ctx context.Context, c redis.Conn, cmds []cmd) ([]any, error) {
	r, err := pipeScripts(ctx, c, cmds)
	if err == nil {
		err = firstErr(r)
	}
	return r, err
}

// firstErr returns the first redis error among replies.
func firstErr(replies []any) error {
	for _, r := range replies {
		if e, ok := r.(redis.Error); ok {
			return e
		}
	}
	return nil
}

// do sends cmds in one pipeline on a connection of its own (see
// roundTrip) and returns their replies, or the first error among them.
func (s *Store) do(ctx context.Context, cmds ...cmd) ([]any, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return roundTrip(ctx, c, cmds)
}

// script runs one of the package's scripts (see scripts.go): EVALSHA,
// then EVAL on NOSCRIPT.
func (s *Store) script(ctx context.Context, sc *redis.Script, keysAndArgs ...any) (any, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return sc.DoContext(ctx, c, keysAndArgs...)
}

// steps runs groups of commands one after the other on one connection:
// the commands of a group are pipelined, and a group is sent only after the
// previous group's replies came back.
func (s *Store) steps(ctx context.Context, groups ...[]cmd) ([][]any, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := make([][]any, 0, len(groups))
	for _, g := range groups {
		if len(g) == 0 {
			out = append(out, nil)
			continue
		}
		replies, err := roundTrip(ctx, c, g)
		if err != nil {
			return out, err
		}
		out = append(out, replies)
	}
	return out, nil
}

// scanPage reads an HSCAN reply: the cursor to go on from ("0" when the
// scan ended) and the fields and values, in pairs.
func scanPage(r any) (next string, kv [][]byte, err error) {
	parts, err := redis.Values(r, nil)
	if err != nil || len(parts) != 2 {
		return "", nil, fmt.Errorf("bad HSCAN reply: %v", err)
	}
	next, _ = redis.String(parts[0], nil)
	kv, _ = redis.ByteSlices(parts[1], nil)
	return next, kv, nil
}

// itoa formats n in decimal, for score bounds such as "(" + itoa(n).
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// intsOf reads a script's reply of one integer per id, n of them.
func intsOf(r any, n int) ([]int, error) {
	vals, err := redis.Ints(r, nil)
	if err != nil || len(vals) != n {
		return nil, fmt.Errorf("bad reply %v (%v), want %d integers", r, err, n)
	}
	return vals, nil
}

// scoresCmd reads the scores of ids in ZSET key in one command
// (scoresScript), where a ZSCORE each would cost a command an id.
func scoresCmd(key string, ids []any) cmd {
	return cmd{"EVALSHA", append(scriptCall(scoresScript, key, len(ids)), ids...)}
}

// scoresOf reads scoresCmd's reply for n ids: each id's score, and
// whether it is a member.
func scoresOf(r any, n int) ([]int64, []bool, error) {
	vals, err := redis.Strings(r, nil)
	if err != nil || len(vals) != n {
		return nil, nil, fmt.Errorf("bad reply %v (%v), want %d scores", r, err, n)
	}
	scores, in := make([]int64, n), make([]bool, n)
	for i, v := range vals {
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("bad score %q: %w", v, err)
		}
		scores[i], in[i] = int64(f), true
	}
	return scores, in, nil
}

func strs(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
