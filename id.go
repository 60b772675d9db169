package delayq

import (
	crand "crypto/rand"
	"math/rand/v2"
	"time"

	"github.com/delayq/delayq/internal/store"
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
	crand.Read(b[6:])
	return encode128(&b)
}

// encode128 renders b, 128 bits, as 26 Crockford base32 digits, most
// significant first (2 leading pad bits: the first digit is 0 to 7).
// NewID and IDFrom share it, and IDFrom's ids are a stable contract: do
// not change it.
func encode128(b *[16]byte) string {
	var out [26]byte
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

// Generated ids are steered into shared partitions, steerChunk messages
// at a time, like Kafka's sticky partitioner: the messages of a batch (or
// of concurrent single calls) then travel in a command or two instead of
// one or two per partition. Ids given by the caller keep their partition.
// Beyond maxSteerPartitions most ids would need more than the 1024 variants
// steerBytes tries, and ids are not steered.
const (
	steerChunk         = 512
	maxSteerPartitions = 256
	steerTries         = 4
)

// segmentMax is the most generated ids given one prefix, and so stored
// as one segment when due far enough ahead (see keys.SegmentField). Reading,
// deleting or rescheduling a message of a segment reads the whole segment
// (deleting and rescheduling rewrite it), so this bounds their cost;
// beyond 16 the memory saved per message is a few bytes.
const segmentMax = 16

// steerer gives generated ids their partitions (see place): each
// steerChunk of them goes to a partition chosen at random, and up to
// segmentMax of them share a prefix, a new id's first
// store.SegmentPrefixLen characters. Each id is that prefix, two
// characters for its place among the ids sharing it, and two chosen to
// land it in the partition. When no choice of the two lands there (for
// about 2% of places with 256 partitions), the next place is tried, up to
// steerTries; a message for which all fail (about one in 10^7 at 256)
// gets an id of its own, in that id's partition. A new topic starts a new
// chunk. The zero value is ready to use.
type steerer struct {
	topic        string
	target, left int
	place        int  // the next id's place among those sharing the prefix
	started      bool // a prefix was drawn
	id           [26]byte
}

// next returns a new id of topic, a topic of n partitions, and its
// partition.
func (s *steerer) next(now time.Time, topic string, n int) (string, int) {
	if s.left == 0 || topic != s.topic {
		s.topic, s.target, s.left = topic, rand.IntN(n), steerChunk
	}
	if !s.started {
		s.place, s.started = segmentMax, true
	}
	for range steerTries {
		if s.place == segmentMax {
			copy(s.id[:], NewID(now)[:store.SegmentPrefixLen])
			s.place = 0
		}
		s.id[22], s.id[23] = crockford[s.place>>5], crockford[s.place&31]
		s.place++ // once only, steered or not: the next try is another id
		if steerBytes(&s.id, s.target, n) {
			s.left--
			return string(s.id[:]), s.target
		}
	}
	id := NewID(now)
	return id, partition.For(id, n)
}
