package lease

// Share returns the number of partitions each of live members aims to
// own: ceil(partitions / live). With every member at its share, all
// partitions are owned; a member above it releases extras (after draining
// them) so that a newcomer finds free partitions.
func Share(partitions, live int) int {
	if live < 1 {
		live = 1
	}
	return (partitions + live - 1) / live
}
