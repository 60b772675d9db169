package lease

import (
	"fmt"
	"testing"
)

func TestShare(t *testing.T) {
	for _, tc := range []struct{ n, live, rank, want int }{
		{16, 1, 0, 16}, {16, 2, 1, 8}, {16, 3, 0, 6}, {16, 3, 1, 5}, {16, 3, 2, 5},
		{16, 10, 5, 2}, {16, 10, 6, 1}, {64, 4, 3, 16}, {1, 5, 0, 1}, {1, 5, 1, 0},
		{16, 0, 0, 16}, {5, 16, 4, 1}, {5, 16, 5, 0}, {16, 3, -1, 5},
	} {
		if got := Share(tc.n, tc.live, tc.rank); got != tc.want {
			t.Errorf("Share(%d, %d, %d) = %d, want %d", tc.n, tc.live, tc.rank, got, tc.want)
		}
	}
	// Every split adds up to the partitions, each member owning
	// floor(n/live) or ceil(n/live), at most n mod live of them the larger.
	for n := 1; n <= 40; n++ {
		for live := 1; live <= 20; live++ {
			sum, big := 0, 0
			for r := range live {
				s := Share(n, live, r)
				sum += s
				if s != n/live && s != (n+live-1)/live {
					t.Fatalf("Share(%d, %d, %d) = %d, want floor or ceil of %d/%d", n, live, r, s, n, live)
				}
				if s > n/live {
					big++
				}
			}
			if sum != n || big > n%live {
				t.Fatalf("%d partitions over %d members: shares add up to %d, %d larger", n, live, sum, big)
			}
		}
	}
}

func TestRank(t *testing.T) {
	live := []string{"c", "a", "b10", "b2"}
	for id, want := range map[string]int{"a": 0, "b10": 1, "b2": 2, "c": 3, "d": -1, "": -1} {
		if got := Rank(live, id); got != want {
			t.Errorf("Rank(%q, %q) = %d, want %d", live, id, got, want)
		}
	}
	if fmt.Sprint(live) != "[c a b10 b2]" {
		t.Errorf("Rank reordered its argument: %v", live)
	}
}
