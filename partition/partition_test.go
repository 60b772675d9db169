package partition

import (
	"fmt"
	"strings"
	"testing"
)

// Published murmur3 x86_32 vectors (seed 0). If these change, every queued
// message would be read from the wrong partition.
func TestMurmur3KnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x00000000},
		{"a", 0x3c2569b2},
		{"hello", 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		t.Run(tc.in, func(t *testing.T) {
			for _, n := range []int{1, 7, 16, 64, 4096} {
				if got, want := For(tc.in, n), int(tc.want%uint32(n)); got != want {
					t.Errorf("For(%q, %d) = %d, want %d", tc.in, n, got, want)
				}
			}
		})
	}
}

// A golden id -> partition table for the default 16 partitions.
func TestGoldenTable(t *testing.T) {
	golden := map[string]int{
		"hello":                      0x248bfa47 % 16,
		"order-42":                   0x4b11a18e % 16,
		"01JD3Z7X9M0000000000000000": 0xbaaf9602 % 16,
		"délai":                      0xfb39930a % 16,
	}
	literal := map[string]int{"hello": 7, "order-42": 14, "01JD3Z7X9M0000000000000000": 2, "délai": 10}
	for id, p := range golden {
		if got := For(id, 16); got != p || got != literal[id] {
			t.Errorf("For(%q, 16) = %d, want %d", id, got, literal[id])
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true}, {"a.b_c-D9", true}, {strings.Repeat("x", 100), true},
		{"", false}, {strings.Repeat("x", 101), false}, {"a{b}", false}, {"a:b", false}, {"a b", false}, {"é", false},
	} {
		t.Run(fmt.Sprintf("%.12q", tc.name), func(t *testing.T) {
			if err := ValidateTopic(tc.name); (err == nil) != tc.ok {
				t.Errorf("ValidateTopic(%q) = %v, want ok=%v", tc.name, err, tc.ok)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"order-1", true}, {"délai {x}: y", true}, {strings.Repeat("x", 200), true},
		{"", false}, {strings.Repeat("x", 201), false}, {"a\nb", false}, {"a\x00", false}, {"\xff", false}, {"a\u0085", false},
	} {
		t.Run(fmt.Sprintf("%.12q", tc.id), func(t *testing.T) {
			if err := ValidateID(tc.id); (err == nil) != tc.ok {
				t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
			}
		})
	}
}

func FuzzFor(f *testing.F) {
	f.Add("order-42", 16)
	f.Add("", 1)
	f.Fuzz(func(t *testing.T, id string, n int) {
		if n <= 0 || n > MaxPartitions {
			return
		}
		p := For(id, n)
		if p < 0 || p >= n {
			t.Fatalf("For(%q, %d) = %d out of range", id, n, p)
		}
		if For(id, n) != p {
			t.Fatalf("For(%q, %d) not deterministic", id, n)
		}
	})
}

func BenchmarkFor(b *testing.B) {
	for b.Loop() {
		For("01JD3Z7X9M0000000000000000", 16)
	}
}

// Steer stops at the first variant in the partition asked for, leaving b
// as that variant, and reports false when none of its tries is.
func TestSteer(t *testing.T) {
	vary := func(b []byte, i int) { b[len(b)-1] = byte('a' + i) }
	b := []byte("order-x")
	if !Steer(b, len(b)-1, 4, 3, 26, vary) {
		t.Fatalf("no variant of order-? in partition 3 of 4")
	}
	if For(string(b), 4) != 3 {
		t.Fatalf("Steer left %q, in partition %d", b, For(string(b), 4))
	}
	for c := byte('a'); c < b[len(b)-1]; c++ {
		if For("order-"+string(c), 4) == 3 {
			t.Fatalf("Steer chose %q, but order-%c came first", b, c)
		}
	}
	if Steer([]byte("order-x"), 6, 4, 3, 0, vary) {
		t.Error("Steer with no tries reported a match")
	}
}

// FuzzSteer checks Steer's own murmur3 against For (spaolacci/murmur3):
// the hash of any input split at any block boundary, and the variant
// Steer picks when the bytes from any position on vary.
func FuzzSteer(f *testing.F) {
	f.Add([]byte("01JD3Z7X9M0000000000000000"), uint8(24), uint16(16), uint16(5))
	f.Add([]byte("order-x"), uint8(6), uint16(4), uint16(3))
	f.Add([]byte(""), uint8(0), uint16(1), uint16(0))
	f.Add([]byte("abc"), uint8(1), uint16(7), uint16(2))
	f.Fuzz(func(t *testing.T, b []byte, fixed uint8, n, p uint16) {
		for head := 0; head <= len(b); head += 4 {
			if got, want := murmurFinish(murmurBlocks(0, b[:head]), b[head:], len(b)), sum32(string(b)); got != want {
				t.Fatalf("murmur3 of %q split at %d = %#x, want %#x", b, head, got, want)
			}
		}
		if len(b) == 0 || n == 0 {
			return
		}
		at, parts := min(int(fixed), len(b)-1), int(n%512)+1
		want := int(p) % parts
		vary := func(b []byte, i int) { b[len(b)-1] = byte(i) }
		orig := string(b)
		if !Steer(b, at, parts, want, 256, vary) {
			for i := range 256 {
				if v := orig[:len(orig)-1] + string([]byte{byte(i)}); For(v, parts) == want {
					t.Fatalf("Steer found no variant of %q in %d of %d, but %q is", orig, want, parts, v)
				}
			}
			return
		}
		if string(b[:len(b)-1]) != orig[:len(orig)-1] {
			t.Fatalf("Steer changed %q to %q beyond the last byte", orig, b)
		}
		if got := For(string(b), parts); got != want {
			t.Fatalf("Steer picked %q, in partition %d of %d, want %d", b, got, parts, want)
		}
	})
}

func BenchmarkSteer(b *testing.B) {
	id := []byte("01JD3Z7X9M0000000000000000")
	vary := func(b []byte, i int) { b[24], b[25] = byte('0'+i>>5), byte('0'+i&31) }
	for b.Loop() {
		Steer(id, 24, 16, 5, 1024, vary)
	}
}
