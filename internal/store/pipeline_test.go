package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// BenchmarkRoundTrip times one pipelined round trip of k one-field HSETs
// of 268-byte values (a record's size for a 256-byte body) on k partition
// keys, directly and through Twemproxy: the floor under any operation that
// waits for its write, such as a single Send.
//
//	go test -run '^$' -bench RoundTrip ./internal/store
func BenchmarkRoundTrip(b *testing.B) {
	env := testenv.Start(b, testenv.Options{Backends: 2})
	val := make([]byte, 268)
	for _, tg := range env.Targets() {
		s := openTest(b, tg.Addr)
		for _, k := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/pipeline=%d", tg.Name, k), func(b *testing.B) {
				cmds := make([]cmd, k)
				for i := range b.N {
					for j := range cmds {
						cmds[j] = cmd{"HSET", []any{fmt.Sprintf("rt:{t:%d}:m", j), i, val}}
					}
					if _, err := s.do(context.Background(), cmds...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestScoresCmd reads the scores of members and non-members of a ZSET in
// one command, directly and through Twemproxy.
func TestScoresCmd(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			s := openTest(t, tg.Addr)
			key := "scores:{t:0}:s"
			if _, err := s.do(ctx, cmd{"ZADD", []any{key, 1795914320169, "a", 0, "c"}}); err != nil {
				t.Fatal(err)
			}
			r, err := s.do(ctx, scoresCmd(key, []any{"a", "b", "c"}))
			if err != nil {
				t.Fatal(err)
			}
			scores, in, err := scoresOf(r[0], 3)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(scores, in) != "[1795914320169 0 0] [true false true]" {
				t.Errorf("scores %v, members %v; want [1795914320169 0 0] [true false true]", scores, in)
			}
			if _, _, err := scoresOf(r[0], 2); err == nil {
				t.Error("a reply of 3 scores read as 2: no error")
			}
		})
	}
}
