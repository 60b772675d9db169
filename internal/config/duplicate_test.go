package config

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// [[topic]] on_duplicate and max_wait: the policy the HTTP API gives a
// request to the topic that sets none, and every problem named with its
// key, value, table and line.
func TestDuplicateKeys(t *testing.T) {
	const handler = "[topic.handler]\ntype = \"exec\"\ncommand = [\"cat\"]\n"
	topic := func(keys string) string { return "[[topic]]\nname = \"orders\"\n" + keys + handler }
	for _, tc := range []struct {
		keys    string
		policy  delayq.OnDuplicate
		maxWait time.Duration
	}{
		{"", delayq.Reject, 0},
		{"on_duplicate = \"reject\"\n", delayq.Reject, 0},
		{"on_duplicate = \"replace\"\n", delayq.Replace, 0},
		{"on_duplicate = \"debounce\"\n", delayq.Debounce, 0},
		{"on_duplicate = \"debounce\"\nmax_wait = \"30m\"\n", delayq.Debounce, 30 * time.Minute},
		{"max_wait = \"0s\"\n", delayq.Reject, 0},
	} {
		cfg, err := Parse([]byte(topic(tc.keys)), "c.toml")
		if err != nil {
			t.Errorf("%q: %v", tc.keys, err)
			continue
		}
		if got := cfg.Topics[0]; got.OnDuplicate != tc.policy || got.MaxWait != tc.maxWait {
			t.Errorf("%q: on_duplicate %q max_wait %v, want %q %v", tc.keys, got.OnDuplicate, got.MaxWait, tc.policy, tc.maxWait)
		}
	}

	const at = ` in [[topic]] "orders" at c.toml line 3: `
	for _, tc := range []struct{ keys, want string }{
		{"on_duplicate = \"merge\"\n", `invalid value of "on_duplicate"` + at + `"merge" is not a policy; want "reject", "replace" or "debounce"`},
		{"on_duplicate = \"Debounce\"\n", `invalid value of "on_duplicate"` + at + `"Debounce" is not a policy`},
		{"on_duplicate = \"\"\n", `invalid value of "on_duplicate"` + at + `"" is not a policy`},
		{"on_duplicate = true\n", `invalid value of "on_duplicate"` + at + `got a boolean; want "reject", "replace" or "debounce"`},
		{"max_wait = \"soon\"\n", `invalid value of "max_wait"` + at + `"soon" is not a duration`},
		{"max_wait = 30\n", `invalid value of "max_wait"` + at + `got an integer; want a duration string`},
		{"max_wait = \"30m\"\n", `invalid value of "max_wait"` + at + `30m0s bounds a debounce window, and on_duplicate is "reject"; set on_duplicate = "debounce", or remove max_wait`},
		{"max_wait = \"30m\"\non_duplicate = \"replace\"\n", `invalid value of "max_wait"` + at + `30m0s bounds a debounce window, and on_duplicate is "replace"`},
		{"max_wait = \"-1m\"\non_duplicate = \"debounce\"\n", `invalid value of "max_wait"` + at + `-1m0s is negative`},
	} {
		_, err := Parse([]byte(topic(tc.keys)), "c.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error\n  %v\nwant one containing\n  %s", tc.keys, err, tc.want)
		}
	}

	// Validate checks a Config changed after Parse.
	cfg, err := Parse([]byte(topic("")), "c.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Topics[0].OnDuplicate = "merge"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `invalid value of "on_duplicate" in [[topic]] "orders": "merge" is not a policy`) {
		t.Errorf("Validate of on_duplicate \"merge\": %v", err)
	}
}
