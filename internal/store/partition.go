package store

// TopicPartition names a partition of a topic: the one value the commands
// on a partition's keys take.
type TopicPartition struct {
	Topic string
	P     int
}
