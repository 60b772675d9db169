package config

import (
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestLocate(t *testing.T) {
	src := `# comment with key = "value" and [table]
top = 1

[redis] # trailing comment
addr = "a = b" # not a key
"quoted.key" = 'x'
password = """
[worker]
fake = "in a multi-line string"
"""
namespace = '''
lease = 1'''

[[topic]]
name = "one"
backoff = [
  "1s", # a comment inside
  "2s",
]
when = 1979-05-27 07:32:00Z
[topic.handler]
headers = { A = "1",
  B = "2" }

[[topic]]
name = "two"
handler.type = "exec"
handler.command = ["x",
  "y"]

[worker]
id = "\"tricky\" \\"
`
	if _, err := toml.Decode(src, new(map[string]any)); err != nil {
		t.Fatalf("the test document is not valid TOML: %v", err)
	}
	l := locate(src)
	for path, want := range map[string]int{
		"top":                        2,
		"redis":                      4,
		"redis.addr":                 5,
		"redis.quoted.key":           6,
		"redis.password":             7,
		"redis.namespace":            11,
		"topic[0]":                   14,
		"topic[0].name":              15,
		"topic[0].backoff":           16,
		"topic[0].backoff[1]":        18,
		"topic[0].when":              20,
		"topic[0].handler":           21,
		"topic[0].handler.headers":   22,
		"topic[0].handler.headers.B": 23,
		"topic[1]":                   25,
		"topic[1].name":              26,
		"topic[1].handler.type":      27,
		"topic[1].handler.command":   28,
		"worker.id":                  32,
		"worker":                     31,
		// Not keys: the nearest enclosing key.
		"topic[1].handler.command[1]": 29,
		"topic[0].handler.url":        21,
		"nothing.at.all":              0,
	} {
		if got := l.line(path); got != want {
			t.Errorf("line(%q) = %d, want %d", path, got, want)
		}
	}
	if _, ok := l.lines["worker.fake"]; ok {
		t.Error("a key inside a multi-line string was located")
	}
	if _, ok := l.lines["redis.lease"]; ok {
		t.Error("a key inside a literal multi-line string was located")
	}
	hits := l.find([]string{"topic", "name"})
	if len(hits) != 2 || hits[0].path != "topic[0].name" || hits[1].line != 26 {
		t.Errorf("find topic.name: %+v", hits)
	}
}

// FuzzParse checks that Parse never panics, that whatever it accepts
// passes Validate, and that its errors are *Error values or syntax errors
// naming the source.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../config.toml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", minimal,
		"[worker]\npolll_interval = \"1s\"\n",
		"[[topic]]\nname = \"a\"\nhandler = { type = \"http\", url = \"http://x\", headers = { A = \"b\" } }\n",
		"[[topic]]\nname = \"a\"\n[topic.handler]\ntype = \"exec\"\ncommand = [\"x\"]\n[[topic]]\nname = \"a\"\n",
		"a = \"\"\"\n[x]\n\"\"\"\nb = [1,\n2]\n[c.d]\n\"e.f\" = { g = 1 }\n",
		"[redis]\npool_size = 1e3\ndial_timeout = 1979-05-27\n",
		"[[topic]]\nbackoff = [\"1s\", [\"2s\"]]\n",
		"[[topic.handler]]\n",
		"[[topic]]\nname = \"a\"\n[topic.limits]\nrate = \"600/m\"\nburst = 3\nconcurrency = 2\n",
		"[[topic]]\n[topic.limits]\nrate = inf\nburst = 1e3\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.toml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.toml") && !strings.Contains(err.Error(), "fuzz.toml") {
				t.Errorf("error does not name the source: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("Parse accepted a config that Validate rejects: %v\n%s", err, data)
		}
	})
}
