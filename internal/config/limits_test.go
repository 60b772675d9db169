package config

import (
	"strings"
	"testing"

	"github.com/delayq/delayq"
)

// [topic.limits] tables: a rate as a string ParseRate reads or a number
// per second, nil without the table, and every problem named with its
// key, value, table and line.
func TestLimitsTables(t *testing.T) {
	for _, tc := range []struct {
		table string
		want  *delayq.Limits
	}{
		{"", nil},
		{"[topic.limits]\nrate = \"200/s\"\nburst = 50\nconcurrency = 20\n", &delayq.Limits{Rate: 200, Burst: 50, Concurrency: 20}},
		{"[topic.limits]\nrate = \"600/m\"\n", &delayq.Limits{Rate: 10}},
		{"[topic.limits]\nrate = 150\n", &delayq.Limits{Rate: 150}},
		{"[topic.limits]\nrate = 0.5\n", &delayq.Limits{Rate: 0.5}},
		{"[topic.limits]\nconcurrency = 3\n", &delayq.Limits{Concurrency: 3}},
	} {
		cfg, err := Parse(orders("", tc.table), "c.toml")
		if err != nil {
			t.Errorf("%q: %v", tc.table, err)
			continue
		}
		got := cfg.Topics[0].Limits
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%q: limits %+v, want %+v", tc.table, got, tc.want)
		}
	}

	for _, tc := range []struct{ table, want string }{
		{"[topic.limits]\nrate = \"fast\"\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: "fast" is not a rate; want a number above 0 per s, m or h such as "200/s"`},
		{"[topic.limits]\nrate = \"5/d\"\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: "5/d" is not a rate`},
		{"[topic.limits]\nrate = true\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: got a boolean; want a rate such as "200/s"`},
		{"[topic.limits]\nrate = -3\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: -3 is negative`},
		{"[topic.limits]\nrate = \"1e-9/s\"\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: 1e-09 per second is below the slowest rate limit, 1/h; to stop deliveries, pause the topic`},
		{"[topic.limits]\nrate = 0.0001\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: 0.0001 per second is below the slowest rate limit, 1/h`},
		{"[topic.limits]\nrate = nan\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: NaN is not a rate`},
		{"[topic.limits]\nrate = \"10/s\"\nburst = -1\n",
			`invalid value of "burst" in [topic.limits] of topic "orders" at c.toml line 8: -1 is negative`},
		{"[topic.limits]\nconcurrency = 4\nburst = 5\n",
			`invalid value of "burst" in [topic.limits] of topic "orders" at c.toml line 8: burst 5 without a rate`},
		{"[topic.limits]\nconcurrency = \"4\"\n",
			`invalid value of "concurrency" in [topic.limits] of topic "orders" at c.toml line 7: got a string; want an integer`},
		{"[topic.limits]\nconcurrency = -4\n",
			`invalid value of "concurrency" in [topic.limits] of topic "orders" at c.toml line 7: -4 is negative`},
		{"[topic.limits]\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 6: the table limits nothing (no rate above 0, no concurrency above 0); want rate`},
		{"[topic.limits]\nrate = 0\nconcurrency = 0\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: the table limits nothing`},
		{"[topic.limits]\nrate = \"0/s\"\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: the table limits nothing`},
		{"[topic.limits]\nrate = 1e9\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: 1000000000/s is above 1000000/s, which is no limit`},
		{"[topic.limits]\nrate = \"2000000/s\"\n",
			`invalid value of "rate" in [topic.limits] of topic "orders" at c.toml line 7: 2000000/s is above 1000000/s`},
		{"[topic.limits]\nrate = \"1/s\"\nper_host = 3\n",
			`unknown key "per_host" in [topic.limits] of topic "orders" at c.toml line 8; known keys: rate, burst, concurrency`},
	} {
		_, err := Parse(orders("", tc.table), "c.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error\n  %v\nwant one containing\n  %s", tc.table, err, tc.want)
		}
	}
}
