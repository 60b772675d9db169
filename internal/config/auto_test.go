package config

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// partitions = "auto" with its optional [topic.auto_partitions] table,
// and every problem named with its key, value, table and line.
func TestAutoPartitionsTables(t *testing.T) {
	for _, tc := range []struct {
		keys, table string
		count       int
		want        *delayq.AutoPartitions
	}{
		{"", "", 0, nil},
		{"partitions = 8", "", 8, nil},
		{`partitions = "auto"`, "", 0, &delayq.AutoPartitions{}},
		{`partitions = "auto"`, "[topic.auto_partitions]\nmin = 4\nmax = 64\ngrow_after = \"20s\"\nshrink_after = \"30m\"\ncooldown = \"1m\"\n", 0,
			&delayq.AutoPartitions{Min: 4, Max: 64, GrowAfter: 20 * time.Second, ShrinkAfter: 30 * time.Minute, Cooldown: time.Minute}},
	} {
		cfg, err := Parse(orders(tc.keys+"\n", tc.table), "c.toml")
		if err != nil {
			t.Errorf("%q %q: %v", tc.keys, tc.table, err)
			continue
		}
		tp := cfg.Topics[0]
		if got := tp.AutoPartitions; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want || tp.Partitions != tc.count {
			t.Errorf("%q %q: partitions %d, auto %+v; want %d, %+v", tc.keys, tc.table, tp.Partitions, got, tc.count, tc.want)
		}
	}

	for _, tc := range []struct{ keys, table, want string }{
		{`partitions = "many"`, "",
			`invalid value of "partitions" in [[topic]] "orders" at c.toml line 3: "many": want a count such as 16, or "auto"`},
		{"partitions = 8", "[topic.auto_partitions]\nmin = 4\n",
			`invalid value of "min" in [topic.auto_partitions] of topic "orders" at c.toml line 8: the table applies to partitions = "auto" only`},
		{`partitions = "auto"`, "[topic.auto_partitions]\nmin = 8\nmax = 4\n",
			`invalid value of "max" in [topic.auto_partitions] of topic "orders" at c.toml line 9: 4 is below min (8)`},
		{`partitions = "auto"`, "[topic.auto_partitions]\nmax = 100000\n",
			`invalid value of "max" in [topic.auto_partitions] of topic "orders" at c.toml line 8: 100000 is out of range`},
		{`partitions = "auto"`, "[topic.auto_partitions]\ncooldown = \"-1s\"\n",
			`invalid value of "cooldown" in [topic.auto_partitions] of topic "orders" at c.toml line 8: -1s is negative`},
		{`partitions = "auto"`, "[topic.auto_partitions]\ngrow_after = 5\n",
			`invalid value of "grow_after" in [topic.auto_partitions] of topic "orders" at c.toml line 8:`},
	} {
		_, err := Parse(orders(tc.keys+"\n", tc.table), "c.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: error %v, want it to contain %q", tc.keys, tc.table, err, tc.want)
		}
	}
}
