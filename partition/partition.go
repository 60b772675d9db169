package partition

import (
	"fmt"
	"hash"
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
// ..., tries-1 it lets vary rewrite part of b in place, and returns true at
// the first variant with For(string(b), n) == p (b is then that variant),
// false if none of them is. Generated ids use it to share partitions.
func Steer(b []byte, n, p, tries int, vary func(b []byte, i int)) bool {
	x := hashers.Get().(*hasher) // not murmur3.Sum32: see sum32
	defer hashers.Put(x)
	for i := range tries {
		vary(b, i)
		x.h.Reset()
		x.h.Write(b)
		if int(x.h.Sum32()%uint32(n)) == p {
			return true
		}
	}
	return false
}
