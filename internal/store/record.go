package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is what the records HASH keeps per message.
type Record struct {
	Due         int64  // unix ms the message was last scheduled for
	Created     int64  // unix ms of the enqueue
	Updated     int64  // unix ms of the last transition
	Attempts    int    // deliveries that ended (failed, timed out or died with their process)
	MaxAttempts int    // 0 = the consumer's default
	LastError   string // the last failure, empty if none
	// First is when the debounce window of the message opened (unix ms;
	// see Puts): the time of its first event since a delivery of its id
	// last started, or Started once one did (see Start). 0 for a message
	// no Replace or Debounce send wrote.
	First int64
	// Trace is the W3C traceparent of the enqueue that wrote the message
	// ("00-<trace id>-<span id>-<flags>"), empty for a message enqueued
	// outside a trace: its delivery's span is linked to it.
	Trace string
	// UniqueFor is how long (ms) the message's id stays taken after its
	// delivery succeeded: its ack leaves a Done in place of the record
	// (see Ack). 0 for none.
	UniqueFor int64
	Body      []byte
	// Corrupt is set, by the readers that return every record they find,
	// on a record that could not be decoded: its Body is then the raw
	// stored bytes and every other field is zero. It is never encoded.
	Corrupt error
}

// recordVersion is the first byte of a record without a First, whose
// header is varints; recordVersionFirst that of a record with one, whose
// header is fixed: Due, Created, Updated and First as 7-byte big-endian
// signed integers (headerFirstLen bytes with the version), so that the
// scripts that rewrite it (Put, Start) read and write it with one call of
// Lua's struct library rather than a loop over its bytes.
//
// recordTraced is a flag of the version byte: a record with a Trace has
// it set, and its trace (a uvarint length, then the bytes) follows the
// last error. recordUnique is another: a record with a UniqueFor has it,
// and its window (a uvarint of ms) follows the trace. Every reader masks
// them off the version (recordVersionMask), and every script that
// rewrites a header keeps them (see recordLua). A record without either
// is encoded as it was before they existed.
const (
	recordVersion      = 1
	recordVersionFirst = 2
	recordTraced       = 0x10
	recordUnique       = 0x20
	recordVersionMask  = 0x0f
	headerFirstLen     = 1 + 4*7
)

// Encode returns the compact binary form: the header (a version byte,
// then varints for Due, Created-Due and Updated-Created; or, for a record
// with a First, fixed-width times: see recordVersionFirst), then varints
// for Attempts and MaxAttempts, then the length-prefixed last error, then
// the length-prefixed trace when the record has one (see recordTraced),
// then the body.
func (r *Record) Encode() []byte {
	return r.AppendEncode(make([]byte, 0, r.encodedLen()))
}

// encodedLen is the length of the record's encoding.
func (r *Record) encodedLen() int {
	n := r.headerLen() + uvarintLen(uint64(r.Attempts)) + uvarintLen(uint64(r.MaxAttempts)) +
		uvarintLen(uint64(len(r.LastError))) + len(r.LastError) + len(r.Body)
	if r.Trace != "" {
		n += uvarintLen(uint64(len(r.Trace))) + len(r.Trace)
	}
	if r.UniqueFor > 0 {
		n += uvarintLen(uint64(r.UniqueFor))
	}
	return n
}

// uvarintLen is the length of binary.AppendUvarint's encoding of x.
func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// varintLen is the length of binary.AppendVarint's encoding of x.
func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// AppendEncode appends the record's encoding (see Encode) to b.
func (r *Record) AppendEncode(b []byte) []byte {
	b = r.appendHeader(b)
	b = binary.AppendUvarint(b, uint64(r.Attempts))
	b = binary.AppendUvarint(b, uint64(r.MaxAttempts))
	b = binary.AppendUvarint(b, uint64(len(r.LastError)))
	b = append(b, r.LastError...)
	if r.Trace != "" {
		b = binary.AppendUvarint(b, uint64(len(r.Trace)))
		b = append(b, r.Trace...)
	}
	if r.UniqueFor > 0 {
		b = binary.AppendUvarint(b, uint64(r.UniqueFor))
	}
	return append(b, r.Body...)
}

// versionByte is the first byte of the record's encoding.
func (r *Record) versionByte() byte {
	v := byte(recordVersion)
	if r.First != 0 {
		v = recordVersionFirst
	}
	if r.Trace != "" {
		v |= recordTraced
	}
	if r.UniqueFor > 0 {
		v |= recordUnique
	}
	return v
}

func (r *Record) appendHeader(b []byte) []byte {
	b = append(b, r.versionByte())
	if r.First != 0 {
		for _, t := range [4]int64{r.Due, r.Created, r.Updated, r.First} {
			b = append(b, byte(t>>48), byte(t>>40), byte(t>>32), byte(t>>24), byte(t>>16), byte(t>>8), byte(t))
		}
		return b
	}
	b = binary.AppendVarint(b, r.Due)
	b = binary.AppendVarint(b, r.Created-r.Due)
	return binary.AppendVarint(b, r.Updated-r.Created)
}

// Header returns the first bytes of the record's encoding: its version
// (with its flags), due and times. Every write that replaces a record while it may be in
// flight (Put) moves its Updated forward, so a record whose stored bytes
// still begin with the header read at its claim is the record claimed:
// an outcome compares it (see Ack and Move.Was) rather than the whole
// record.
func (r *Record) Header() []byte { return r.appendHeader(make([]byte, 0, r.headerLen())) }

// headerLen is the length of the record's header (see Header).
func (r *Record) headerLen() int {
	if r.First != 0 {
		return headerFirstLen
	}
	return 1 + varintLen(r.Due) + varintLen(r.Created-r.Due) + varintLen(r.Updated-r.Created)
}

// ErrBadRecord is wrapped by decoding errors.
var ErrBadRecord = errors.New("delayq: bad record")

// DecodeRecord parses what Encode produced. The record's Body is the end
// of b, not a copy: b must not be changed or reused afterwards (a reply's
// bytes are not).
func DecodeRecord(b []byte) (*Record, error) {
	if isDone(b) {
		return nil, ErrDoneRecord
	}
	if len(b) == 0 || b[0]&^(recordVersionMask|recordTraced|recordUnique) != 0 ||
		(b[0]&recordVersionMask != recordVersion && b[0]&recordVersionMask != recordVersionFirst) {
		return nil, fmt.Errorf("%w: unknown version", ErrBadRecord)
	}
	var r Record
	b0 := b[0]
	traced := b0&recordTraced != 0
	if b[0]&recordVersionMask == recordVersionFirst {
		if len(b) < headerFirstLen {
			return nil, fmt.Errorf("%w: truncated header", ErrBadRecord)
		}
		var t [4]int64
		for i := range t {
			f := b[1+7*i : 8+7*i]
			t[i] = int64(f[0])<<56>>8 | int64(f[1])<<40 | int64(f[2])<<32 | int64(f[3])<<24 | int64(f[4])<<16 | int64(f[5])<<8 | int64(f[6])
		}
		r.Due, r.Created, r.Updated, r.First = t[0], t[1], t[2], t[3]
		b = b[headerFirstLen:]
	} else {
		b = b[1:]
		var vals [3]int64
		for i := range vals {
			v, n := binary.Varint(b)
			if n <= 0 {
				return nil, fmt.Errorf("%w: truncated header", ErrBadRecord)
			}
			vals[i], b = v, b[n:]
		}
		r.Due = vals[0]
		r.Created = r.Due + vals[1]
		r.Updated = r.Created + vals[2]
	}
	var uvals [3]uint64
	for i := range uvals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: truncated header", ErrBadRecord)
		}
		uvals[i], b = v, b[n:]
	}
	if uvals[0] > 1<<31 || uvals[1] > 1<<31 {
		return nil, fmt.Errorf("%w: attempts out of range", ErrBadRecord)
	}
	r.Attempts, r.MaxAttempts = int(uvals[0]), int(uvals[1])
	if uvals[2] > uint64(len(b)) {
		return nil, fmt.Errorf("%w: last error of %d bytes past the end", ErrBadRecord, uvals[2])
	}
	r.LastError, b = string(b[:uvals[2]]), b[uvals[2]:]
	if traced {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: trace past the end", ErrBadRecord)
		}
		r.Trace, b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	if b0&recordUnique != 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > 1<<62 {
			return nil, fmt.Errorf("%w: bad uniqueness window", ErrBadRecord)
		}
		r.UniqueFor, b = int64(n), b[k:]
	}
	r.Body = b[:len(b):len(b)] // full: an append to Body copies
	return &r, nil
}

// decodeOne decodes a stored record: nil for none (or a Done: the
// message is finished), a Corrupt record for bytes that do not decode.
func decodeOne(b []byte) *Record {
	if b == nil || isDone(b) {
		return nil
	}
	r, err := DecodeRecord(b)
	if err != nil {
		return &Record{Body: b, Corrupt: err}
	}
	return r
}

// decodeAll decodes an HMGET reply of n records: nil for missing ones
// (and Dones), Corrupt set on undecodable ones.
func decodeAll(raw [][]byte, n int) []*Record {
	recs := make([]*Record, n)
	for i, b := range raw {
		recs[i] = decodeOne(b)
	}
	return recs
}

// Done is what the records HASH keeps of a message whose delivery
// succeeded while it had a uniqueness window (Record.UniqueFor): its id
// stays taken until Until, and sends of it are refused (see Puts and
// AddMany). Once Until has passed it counts as no record at all, and the
// partition's reconciler removes it.
type Done struct {
	Finished int64 // unix ms of the ack
	Until    int64 // unix ms the id is free again
}

// recordVersionDone is the first byte of a Done's encoding: the version,
// then Finished as a 6-byte big-endian signed integer and the window
// (Until - Finished, ms) as a 5-byte unsigned one: doneLen bytes in all,
// few enough for Redis to keep the value in its smallest string
// allocation but one. No record has this version.
const (
	recordVersionDone = 3
	doneLen           = 1 + 6 + 5
	// MaxWindow is the longest uniqueness window (ms) a Done can hold:
	// 2^40-1, about 34 years.
	MaxWindow = 1<<40 - 1
)

// ErrDoneRecord is DecodeRecord's error for a Done (see DecodeDone).
var ErrDoneRecord = errors.New("delayq: a finished message's id, not a record")

// Encode returns the Done's stored form. Its window (Until - Finished)
// must be within 0 and MaxWindow.
func (d Done) Encode() []byte {
	f, w := d.Finished, d.Until-d.Finished
	return []byte{recordVersionDone, byte(f >> 40), byte(f >> 32), byte(f >> 24), byte(f >> 16), byte(f >> 8), byte(f),
		byte(w >> 32), byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}
}

// isDone reports whether stored bytes b are a Done.
func isDone(b []byte) bool { return len(b) == doneLen && b[0] == recordVersionDone }

// DecodeDone parses a Done, and reports whether b is one.
func DecodeDone(b []byte) (Done, bool) {
	if !isDone(b) {
		return Done{}, false
	}
	f := int64(b[1])<<56>>16 | int64(b[2])<<32 | int64(b[3])<<24 | int64(b[4])<<16 | int64(b[5])<<8 | int64(b[6])
	w := int64(b[7])<<32 | int64(b[8])<<24 | int64(b[9])<<16 | int64(b[10])<<8 | int64(b[11])
	return Done{Finished: f, Until: f + w}, true
}
