package config

import (
	"fmt"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// rawAuto is the schema of a [topic.auto_partitions] table.
type rawAuto struct {
	Min         value `toml:"min"`
	Max         value `toml:"max"`
	GrowAfter   value `toml:"grow_after"`
	ShrinkAfter value `toml:"shrink_after"`
	Cooldown    value `toml:"cooldown"`
}

// autoTable names the [topic.auto_partitions] table of the i-th topic in
// errors.
func autoTable(topic string, i int) string {
	return "[topic.auto_partitions] of " + topicName(topic, i)
}

// partitions converts the partitions key of the i-th topic, whose path
// is path: a count, or "auto" with the optional [topic.auto_partitions]
// table raw.
func (c converter) partitions(x value, raw *rawAuto, t *Topic, path, table string, i int) {
	at := child(path, table, "partitions")
	if s, ok := x.v.(string); x.set && ok {
		if s != "auto" {
			c.ps.add(at, "%q: want a count such as 16, or \"auto\" for a count that follows the live consumers", s)
			return
		}
		t.AutoPartitions = &delayq.AutoPartitions{}
	} else {
		c.integer(x, &t.Partitions, at)
		if x.set && t.Partitions == 0 {
			c.ps.add(at, "partition count 0 is out of range 1..%d; want a count such as 16, \"auto\", or no key for the default", partition.MaxPartitions)
		}
	}
	if raw == nil {
		return
	}
	ap, atable := path+".auto_partitions", autoTable(t.Name, i)
	if t.AutoPartitions == nil {
		c.ps.add(child(ap, atable, "min"), "the table applies to partitions = \"auto\" only; set it in [[topic]], or remove the table")
		return
	}
	a := t.AutoPartitions
	c.integer(raw.Min, &a.Min, child(ap, atable, "min"))
	c.integer(raw.Max, &a.Max, child(ap, atable, "max"))
	c.duration(raw.GrowAfter, &a.GrowAfter, child(ap, atable, "grow_after"))
	c.duration(raw.ShrinkAfter, &a.ShrinkAfter, child(ap, atable, "shrink_after"))
	c.duration(raw.Cooldown, &a.Cooldown, child(ap, atable, "cooldown"))
}

// validateAuto checks the automatic count of the i-th topic, when it has
// one.
func (t *Topic) validateAuto(ps *problems, i int) {
	a := t.AutoPartitions
	if a == nil {
		return
	}
	at := func(key string) place {
		return child(fmt.Sprintf("topic[%d].auto_partitions", i), autoTable(t.Name, i), key)
	}
	switch {
	case a.Min < 0 || a.Min > partition.MaxPartitions:
		ps.add(at("min"), "%d is out of range 1..%d; want the smallest count, or no key for 1", a.Min, partition.MaxPartitions)
	case a.Max < 0 || a.Max > partition.MaxPartitions:
		ps.add(at("max"), "%d is out of range 1..%d; want the largest count, or no key for 64", a.Max, partition.MaxPartitions)
	case a.Max != 0 && a.Max < max(a.Min, 1):
		ps.add(at("max"), "%d is below min (%d); want the largest count", a.Max, max(a.Min, 1))
	}
	for key, d := range map[string]float64{"grow_after": a.GrowAfter.Seconds(), "shrink_after": a.ShrinkAfter.Seconds(), "cooldown": a.Cooldown.Seconds()} {
		if d < 0 {
			ps.add(at(key), "%vs is negative; want a duration such as \"30s\", or no key for the default", d)
		}
	}
}
