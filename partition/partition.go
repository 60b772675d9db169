package partition

import (
	"fmt"
	"hash"
	"math/bits"
	"sync"
	"unicode/utf8"

	"github.com/spaolacci/murmur3"
)

const (
	// MaxTopicLen is the longest topic name accepted.
	MaxTopicLen = 100
	// MaxIDLen is the longest message id accepted, in bytes.
	MaxIDLen = 200
	// MaxPartitions is the largest partition count a topic may have.
	MaxPartitions = 4096
)

// For returns the partition of id in a topic of n partitions:
// murmur3_32(id, seed 0) % n. n must be at least 1.
// It is safe for concurrent use.
func For(id string, n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("partition.For: n = %d", n))
	}
	return int(sum32(id) % uint32(n))
}

// sum32 is murmur3_32 with seed 0. It uses the streaming hasher, not
// murmur3.Sum32: Sum32 (v1.1.0) computes a pointer one past the end of its
// input, which the race detector's checkptr aborts on when the input fills
// its allocation exactly (spaolacci/murmur3 issue 34). Both give the same
// sums (TestMurmur3KnownAnswers).
func sum32(id string) uint32 {
	x := hashers.Get().(*hasher)
	x.buf = append(x.buf[:0], id...)
	x.h.Reset()
	x.h.Write(x.buf)
	sum := x.h.Sum32()
	hashers.Put(x)
	return sum
}

// hasher is a streaming hasher and a buffer for the bytes of an id, kept
// in a pool: hashing every id enqueued, read or deleted then allocates
// nothing.
type hasher struct {
	h   hash.Hash32
	buf []byte
}

var hashers = sync.Pool{New: func() any { return &hasher{h: murmur3.New32()} }}

// ValidateTopic reports whether name is a valid topic name:
// 1 to 100 characters of [A-Za-z0-9._-].
func ValidateTopic(name string) error {
	if name == "" {
		return fmt.Errorf("topic name is empty")
	}
	if len(name) > MaxTopicLen {
		return fmt.Errorf("topic name %.20q... is %d bytes, the limit is %d", name, len(name), MaxTopicLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("topic name %q has %q at byte %d: only A-Z a-z 0-9 . _ - are allowed", name, c, i)
		}
	}
	return nil
}

// ValidateID reports whether id is a valid message id: 1 to 200 bytes of
// UTF-8 without control characters.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("message id is empty")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("message id %.20q... is %d bytes, the limit is %d", id, len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("message id %q is not valid UTF-8", id)
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("message id %q has control character %U at byte %d", id, r, i)
		}
	}
	return nil
}

// ValidateCount reports whether n is a usable partition count.
func ValidateCount(n int) error {
	if n < 1 || n > MaxPartitions {
		return fmt.Errorf("partition count %d is out of range 1..%d", n, MaxPartitions)
	}
	return nil
}

// Steer searches for a variant of b in partition p of n: for i = 0, 1,
// ..., tries-1 it lets vary rewrite b[fixed:] in place (never b[:fixed]),
// and returns true at the first variant with For(string(b), n) == p (b is
// then that variant), false if none of them is. Generated ids use it to
// share partitions.
//
// The murmur3 state after the 4-byte blocks of b[:fixed] is computed once,
// so a try hashes only what follows them: a few ns for a 26-byte id whose
// last two bytes vary, instead of hashing all 26 bytes anew. TestSteer and
// FuzzSteer check the variant it picks against For, which hashes with
// github.com/spaolacci/murmur3.
func Steer(b []byte, fixed, n, p, tries int, vary func(b []byte, i int)) bool {
	if fixed < 0 || fixed > len(b) {
		panic(fmt.Sprintf("partition.Steer: fixed = %d, len(b) = %d", fixed, len(b)))
	}
	head := fixed &^ 3
	h := murmurBlocks(0, b[:head])
	for i := range tries {
		vary(b, i)
		if int(murmurFinish(h, b[head:], len(b))%uint32(n)) == p {
			return true
		}
	}
	return false
}

// The murmur3 x86 32-bit hash (seed 0) in two parts, so that a prefix's
// state can be reused: murmurBlocks mixes whole 4-byte blocks into h,
// murmurFinish mixes the rest of the input (rest, of any length) and the
// total length, then finalizes.
const (
	murmurC1 = 0xcc9e2d51
	murmurC2 = 0x1b873593
)

func murmurBlocks(h uint32, b []byte) uint32 {
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= murmurC1
		k = bits.RotateLeft32(k, 15)
		k *= murmurC2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	return h
}

func murmurFinish(h uint32, rest []byte, total int) uint32 {
	h = murmurBlocks(h, rest)
	tail := rest[len(rest)&^3:]
	var k uint32
	switch len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= murmurC1
		k = bits.RotateLeft32(k, 15)
		k *= murmurC2
		h ^= k
	}
	h ^= uint32(total)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
