package keys

import (
	"slices"
	"testing"
)

func TestGolden(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Scheduled("dq", "orders", 3), "dq:{orders:3}:s"},
		{InFlight("dq", "orders", 3), "dq:{orders:3}:i"},
		{Dead("dq", "orders", 3), "dq:{orders:3}:d"},
		{Records("dq", "orders", 3), "dq:{orders:3}:m"},
		{Lease("dq", "orders", 3), "dq:{orders:3}:lease"},
		{Epoch("dq", "orders", 3), "dq:{orders:3}:epoch"},
		{Owner("dq", "orders", 3), "dq:{orders:3}:owner"},
		{Meta("dq", "orders"), "dq:{orders}:meta"},
		{Members("dq", "orders"), "dq:{orders}:members"},
		{Changes("dq", "orders"), "dq:{orders}:changes"},
		{GavePrefix, "\x00gave:"},
		{Topics("app1"), "app1:topics"},
		{Scheduled("app1", "a.b-c_d", 15), "app1:{a.b-c_d:15}:s"},
		{Fence, "\x00fence"},
	} {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestOfPartition(t *testing.T) {
	want := []string{
		"dq:{orders:3}:s", "dq:{orders:3}:i", "dq:{orders:3}:d", "dq:{orders:3}:m",
		"dq:{orders:3}:lease", "dq:{orders:3}:epoch", "dq:{orders:3}:owner",
	}
	if got := OfPartition("dq", "orders", 3); !slices.Equal(got, want) {
		t.Errorf("OfPartition = %q, want %q", got, want)
	}
}
