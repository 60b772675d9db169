package delayq

import (
	"crypto/rand"
	"time"

	"github.com/delayq/delayq/partition"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewID returns a 26-character, time-sortable id in the ULID format: 48
// bits of unix milliseconds then 80 random bits, in Crockford base32.
// Safe for concurrent use.
func NewID(t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	rand.Read(b[6:])
	var out [26]byte
	// 128 bits as 26 base32 digits, most significant first (2 leading pad bits).
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// steerBytes chooses the last two characters of b, a NewID being built
// (10 of its 80 random bits), so that b lands in partition p of n: true
// if one of the 1024 choices does. None does for about 2% of ids with
// n = 256, and more often beyond.
func steerBytes(b *[26]byte, p, n int) bool {
	return partition.Steer(b[:], 24, n, p, 1024, func(b []byte, i int) {
		b[24], b[25] = crockford[i>>5], crockford[i&31]
	})
}
