package lease

import "sort"

// Share returns the number of partitions the member of rank rank (0-based,
// in the order of the live members' ids) aims to own when live members
// share partitions: floor(partitions/live), one more for the first
// partitions mod live ranks. The shares add up to partitions, so with
// every member at its share all partitions are owned and no member is
// left with none while there are partitions to spare; a member above its
// share hands extras over so that the others find free ones. A rank out
// of range (a member not yet counted) gets the smaller share.
func Share(partitions, live, rank int) int {
	if live < 1 {
		live = 1
	}
	n := partitions / live
	if rank >= 0 && rank < partitions%live {
		n++
	}
	return n
}

// Rank returns the place of id among the live members' ids in
// lexicographic order, or -1 if id is not among them. Every member sorts
// the same ids the same way, so the ranks are distinct and agreed on.
func Rank(live []string, id string) int {
	ids := append([]string(nil), live...)
	sort.Strings(ids)
	i := sort.SearchStrings(ids, id)
	if i < len(ids) && ids[i] == id {
		return i
	}
	return -1
}
