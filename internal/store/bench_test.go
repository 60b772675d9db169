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
// waits for its write, such as a single Enqueue.
//
//	go test -run '^$' -bench RoundTrip ./internal/store
func BenchmarkRoundTrip(b *testing.B) {
	env := testenv.Start(b, testenv.Options{Backends: 2})
	val := make([]byte, 268)
	for _, tg := range env.Targets() {
		s, err := Open(Options{Conn: Conn{Addr: tg.Addr}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
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
