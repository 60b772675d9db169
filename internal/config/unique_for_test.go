package config

import (
	"strings"
	"testing"
	"time"
)

// [[topic]] unique_for: the topic's default uniqueness window, nil when
// the key is absent (the worker then leaves the stored one alone), "0s"
// a window of none; every problem named with its key, value, table,
// file and line.
func TestUniqueForKey(t *testing.T) {
	const handler = "[topic.handler]\ntype = \"exec\"\ncommand = [\"cat\"]\n"
	topic := func(keys string) string { return "[[topic]]\nname = \"orders\"\n" + keys + handler }
	cfg, err := Parse([]byte(topic("")), "c.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Topics[0].UniqueFor != nil {
		t.Errorf("no unique_for key: %v, want nil", *cfg.Topics[0].UniqueFor)
	}
	for keys, want := range map[string]time.Duration{
		"unique_for = \"24h\"\n":   24 * time.Hour,
		"unique_for = \"0s\"\n":    0,
		"unique_for = \"1h30m\"\n": 90 * time.Minute,
	} {
		cfg, err := Parse([]byte(topic(keys)), "c.toml")
		if err != nil {
			t.Errorf("%q: %v", keys, err)
			continue
		}
		if got := cfg.Topics[0].UniqueFor; got == nil || *got != want {
			t.Errorf("%q: unique_for %v, want %v", keys, got, want)
		}
	}

	const at = ` in [[topic]] "orders" at c.toml line 3: `
	for _, tc := range []struct{ keys, want string }{
		{"unique_for = \"-1h\"\n", `invalid value of "unique_for"` + at + `-1h0m0s is negative; want a duration such as "24h", "0s" for no window`},
		{"unique_for = \"a day\"\n", `invalid value of "unique_for"` + at + `"a day" is not a duration`},
		{"unique_for = 86400\n", `invalid value of "unique_for"` + at + `got an integer; want a duration string`},
		{"unique_for = true\n", `invalid value of "unique_for"` + at + `got a boolean; want a duration string`},
	} {
		_, err := Parse([]byte(topic(tc.keys)), "c.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error\n  %v\nwant one containing\n  %s", tc.keys, err, tc.want)
		}
	}

	// Validate checks a Config changed after Parse.
	d := -time.Minute
	cfg.Topics[0].UniqueFor = &d
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `invalid value of "unique_for" in [[topic]] "orders": -1m0s is negative`) {
		t.Errorf("Validate of unique_for -1m: %v", err)
	}
}
