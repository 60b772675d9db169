package lease

import "testing"

func TestShare(t *testing.T) {
	for _, tc := range []struct{ n, live, want int }{
		{16, 1, 16}, {16, 2, 8}, {16, 3, 6}, {64, 4, 16}, {64, 3, 22}, {1, 5, 1}, {16, 0, 16}, {5, 16, 1},
	} {
		if got := Share(tc.n, tc.live); got != tc.want {
			t.Errorf("Share(%d, %d) = %d, want %d", tc.n, tc.live, got, tc.want)
		}
		if tc.live > 0 && Share(tc.n, tc.live)*tc.live < tc.n {
			t.Errorf("Share(%d, %d) leaves partitions unowned", tc.n, tc.live)
		}
	}
}
