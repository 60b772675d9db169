package delayq

import (
	"strings"
	"testing"
)

// TestIDFromGolden pins IDFrom's ids: they are a stable contract (the
// same parts give the same id forever), so any change of the length
// prefixes, the hash, the bits kept or the rendering fails here. The ids
// were computed once, by an independent implementation (math/big base32
// of the first 16 bytes of sha256 of the uvarint-prefixed parts).
func TestIDFromGolden(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{nil, "73P324567W3GA9NYZMS2CPZE94"},
		{[]string{""}, "3E6G5SSZXKFAC9S9A4WTXQG2HC"},
		{[]string{"", ""}, "4PMABD497JGQ37QVMKRC7RMC4H"},
		{[]string{"a", "bc"}, "7A3K375CBTBJCX4WTG78MRJSFF"},
		{[]string{"ab", "c"}, "61A2TKD86Q8M7NT10DHPP8YT94"},
		{[]string{"a", "b", "c"}, "5CCY6TK7KEKTZHHTPDST1970VE"},
		{[]string{"user-42", "2030-01-02"}, "40889W2FRE7A68TKBHWYN7HWRT"},
		{[]string{"order-1001"}, "30NAVMV08786CNYF6V3BBGVTGN"},
		{[]string{"héllo", "世界"}, "1ZVSK9VRJVJ445SVP2B91BSTJB"},
		{[]string{strings.Repeat("x", 300)}, "4NX63K1PB60PP7MM7VHQYD7S3B"}, // a two-byte length
	} {
		if got := IDFrom(tc.parts...); got != tc.want {
			t.Errorf("IDFrom(%.40q) = %s, want %s", tc.parts, got, tc.want)
		}
	}
	// An empty slice is no parts, as a call without arguments.
	if got, want := IDFrom([]string{}...), IDFrom(); got != want {
		t.Errorf("IDFrom([]string{}...) = %s, IDFrom() = %s", got, want)
	}
}

// TestIDFromUnambiguous: parts are joined so that no two lists of parts
// meet, whatever their contents.
func TestIDFromUnambiguous(t *testing.T) {
	lists := [][]string{
		{}, {""}, {"", ""}, {"", "", ""},
		{"a", "bc"}, {"ab", "c"}, {"abc"}, {"a", "b", "c"}, {"a", "", "bc"}, {"", "abc"}, {"abc", ""},
		{"\x01a"}, {"a\x00"}, {"\x00", "a"}, {"\x01", "a"}, // a part that looks like a length prefix
		{strings.Repeat("x", 127)}, {strings.Repeat("x", 128)}, {strings.Repeat("x", 127), "x"},
	}
	seen := map[string][]string{}
	for _, parts := range lists {
		id := IDFrom(parts...)
		if other, ok := seen[id]; ok {
			t.Errorf("IDFrom(%.20q) = IDFrom(%.20q) = %s", parts, other, id)
		}
		seen[id] = parts
		if again := IDFrom(parts...); again != id {
			t.Errorf("IDFrom(%.20q) = %s, then %s", parts, id, again)
		}
	}
}

// TestIDFromFormat: an id is 26 characters of the Crockford alphabet, the
// first 0 to 7 (128 bits), and a valid id for Send, not one reserved
// for schedules.
func TestIDFromFormat(t *testing.T) {
	for i := range 1000 {
		id := IDFrom("user", strings.Repeat("d", i))
		if len(id) != 26 || strings.Trim(id, crockford) != "" || id[0] > '7' {
			t.Fatalf("IDFrom = %q: not 26 Crockford base32 digits of 128 bits", id)
		}
		if err := validateID(id); err != nil {
			t.Fatalf("IDFrom = %q: %v", id, err)
		}
		if strings.HasPrefix(id, ScheduleIDPrefix) {
			t.Fatalf("IDFrom = %q: reserved for schedules", id)
		}
	}
}

// TestEncode128 pins the rendering NewID and IDFrom share: 128 bits, most
// significant digit first, 2 leading pad bits.
func TestEncode128(t *testing.T) {
	var b [16]byte
	if got := encode128(&b); got != strings.Repeat("0", 26) {
		t.Errorf("encode128(0) = %s", got)
	}
	b[15] = 33
	if got := encode128(&b); got != strings.Repeat("0", 24)+"11" {
		t.Errorf("encode128(33) = %s", got)
	}
	for i := range b {
		b[i] = 0xff
	}
	if got := encode128(&b); got != "7"+strings.Repeat("Z", 25) {
		t.Errorf("encode128(2^128-1) = %s", got)
	}
	b = [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	if got, want := encode128(&b), "014D2PF2DBSQQZXQ5TK1V58CGG"; got != want {
		t.Errorf("encode128(0123456789abcdeffedcba9876543210) = %s, want %s", got, want)
	}
}
