package delayq

import (
	"crypto/sha256"
	"encoding/binary"
)

// IDFrom returns a message id derived from parts, for uniqueness by
// content: "one reminder per user per day" is
//
//	c.Send(ctx, delayq.Message{Topic: "reminders", ID: delayq.IDFrom(user, day), Delay: time.Hour})
//
// and a second send of the same user and day is a duplicate (see
// Message.OnDuplicate). The id is 26 characters of Crockford base32, the
// first 128 bits of the SHA-256 of the parts, each preceded by its length
// as a uvarint, so that parts never run into each other: IDFrom("a", "bc")
// differs from IDFrom("ab", "c"), and IDFrom() from IDFrom("") and from
// IDFrom("", ""). This is a stable contract: the same parts give the same
// id in every process, on every machine, in every version of delayq.
// Unlike NewID's ids, these are not time-sortable.
func IDFrom(parts ...string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return encode128((*[16]byte)(sum[:16]))
}
