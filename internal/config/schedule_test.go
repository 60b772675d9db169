package config

import (
	"strings"
	"testing"
)

// [[topic.schedule]] tables: parsed in file order, and every problem
// named with its key, table and line.
func TestScheduleTables(t *testing.T) {
	cfg, err := Parse(orders("", `
[[topic.schedule]]
name = "unpaid"
spec = "*/10 * * * *"
body = "check"

[[topic.schedule]]
name = "report"
spec = "0 3 * * *"
tz = "Asia/Shanghai"
max_attempts = 3
policy = "all"
`), "c.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Topics[0].Schedules
	if len(s) != 2 || s[0].Name != "unpaid" || s[0].Body != "check" || s[1].TZ != "Asia/Shanghai" || s[1].MaxAttempts != 3 || s[1].Policy != "all" {
		t.Errorf("schedules: %+v", s)
	}
	if d := s[1].Delayq(); d.TimeZone != "Asia/Shanghai" || string(d.Policy) != "all" {
		t.Errorf("as the library's: %+v", d)
	}

	_, err = Parse(orders("", `
[[topic.schedule]]
name = "report"
spec = "61 * * * *"
tz = "Mars/Olympus"
policy = "some"
colour = "red"
max_attempts = -1

[[topic.schedule]]
name = "report"
spec = "@every 1s"

[[topic.schedule]]
name = "a:b"

[[topic.schedule]]
spec = "@hourly"
`), "c.toml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`invalid value of "spec" in [[topic.schedule]] "report" of topic "orders" at c.toml line 9: "61 * * * *" is not a cron spec (end of range (61) above maximum (59)`,
		`invalid value of "tz" in [[topic.schedule]] "report" of topic "orders" at c.toml line 10: "Mars/Olympus" is not an IANA zone name`,
		`invalid value of "policy" in [[topic.schedule]] "report" of topic "orders" at c.toml line 11: "some" is not a policy`,
		`unknown key "colour" in [topic.schedule] of topic "orders" at c.toml line 12; known keys: name, spec, tz, body, max_attempts, policy`,
		`invalid value of "max_attempts" in [[topic.schedule]] "report" of topic "orders" at c.toml line 13: -1 is negative`,
		`invalid value of "name" in [[topic.schedule]] "report" of topic "orders" at c.toml line 16: duplicate schedule name "report"; it is the name of [[topic.schedule]] #1 of this topic already (line 8)`,
		`invalid value of "name" in [[topic.schedule]] "a:b" of topic "orders" at c.toml line 20: schedule name "a:b" has ':'`,
		`invalid value of "spec" in [[topic.schedule]] "a:b" of topic "orders" at c.toml line 19: missing; want a cron spec`,
		`invalid value of "name" in [[topic.schedule]] #4 of topic "orders" at c.toml line 22: missing`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks\n  %s\ngot:\n%v", want, err)
		}
	}
}
