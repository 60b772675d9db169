package config

import (
	"github.com/delayq/delayq"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// schemaKeys returns every key of the file's schema (rawConfig) by table,
// "" for the top level: {"worker": {"id", "lease", ...}, "topic.handler":
// {...}, ...}.
func schemaKeys() map[string][]string {
	keys := map[string][]string{}
	var walk func(table string, t reflect.Type)
	walk = func(table string, t reflect.Type) {
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(value{}) {
				walk(strings.TrimPrefix(table+"."+name, "."), ft)
				continue
			}
			keys[table] = append(keys[table], name)
		}
	}
	walk("", reflect.TypeOf(rawConfig{}))
	return keys
}

// exampleKeys collects the keys each table of the TOML text holds, commented
// out ("# key = ...") or not, as config.toml and docs/worker.md's
// examples write them.
func exampleKeys(text string, into map[string]map[string]bool) {
	header := regexp.MustCompile(`^#?\s*\[\[?([a-z._]+)\]\]?\s*(#.*)?$`)
	key := regexp.MustCompile(`^#?\s*([a-z_]+)\s*=`)
	table := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1]
			continue
		}
		if m := key.FindStringSubmatch(line); m != nil && table != "" {
			if into[table] == nil {
				into[table] = map[string]bool{}
			}
			into[table][m[1]] = true
		}
	}
}

// workerDoc is the page that documents every key of the worker's file.
const workerDoc = "docs/worker.md"

// docKeys returns the keys docs/worker.md documents by table: those of
// its table of the worker's config (rows "| `[worker]` | `id` (...), ...
// |") and those of its TOML examples.
func docKeys(t *testing.T) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../" + workerDoc)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `\\[\\[?([a-z._]+)\\]\\]?` \\|(.*)\\|$")
	word := regexp.MustCompile("`([a-z_]+)")
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		if keys[m[1]] == nil {
			keys[m[1]] = map[string]bool{}
		}
		for _, w := range word.FindAllStringSubmatch(m[2], -1) {
			keys[m[1]][w[1]] = true
		}
	}
	for _, block := range regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		exampleKeys(block[1], keys)
	}
	return keys
}

// TestEveryKeyDocumented: each key the config file takes is in
// docs/worker.md's table (or TOML examples) and in the shipped
// config.toml.
func TestEveryKeyDocumented(t *testing.T) {
	schema := schemaKeys()
	if len(schema["worker"]) < 5 || len(schema["topic.handler"]) < 5 || len(schema["topic.schedule"]) < 5 {
		t.Fatalf("schema keys not found: %v", schema)
	}
	documented := docKeys(t)
	data, err := os.ReadFile("../../config.toml")
	if err != nil {
		t.Fatal(err)
	}
	sample := map[string]map[string]bool{}
	exampleKeys(string(data), sample)
	tables := make([]string, 0, len(schema))
	for table := range schema {
		tables = append(tables, table)
	}
	sort.Strings(tables)
	for _, table := range tables {
		if table == "" {
			t.Errorf("top-level keys %v: the file has only tables", schema[table])
			continue
		}
		for _, k := range schema[table] {
			if !documented[table][k] {
				t.Errorf("%s does not document [%s] %s", workerDoc, table, k)
			}
			if !sample[table][k] {
				t.Errorf("config.toml does not show [%s] %s", table, k)
			}
		}
	}
}

// docSection returns the text of the section of doc (a path from the
// repository's root) whose heading is title, up to the next heading of
// its level or above (for a page's "# " title: its introduction, up to
// its first "## ").
func docSection(t *testing.T, doc, title string) string {
	t.Helper()
	data, err := os.ReadFile("../../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut("\n"+string(data), "\n"+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", doc, title)
	}
	level := title[:strings.IndexByte(title, ' ')+1]
	for _, h := range []string{"\n## ", "\n" + level} {
		if i := strings.Index(after, h); i >= 0 {
			after = after[:i]
		}
	}
	return after
}

// TestBodyCapDocumented: where the documents show how to enqueue (the
// library and send in README.md, the HTTP API in docs/http-api.md), they
// state the default body cap and how to change it.
func TestBodyCapDocumented(t *testing.T) {
	if delayq.DefaultMaxBodyBytes != 1<<20 || DefaultMaxBodyBytes != delayq.DefaultMaxBodyBytes {
		t.Fatalf("the default body cap is %d bytes (HTTP: %d): update README.md, docs/http-api.md and this test", delayq.DefaultMaxBodyBytes, DefaultMaxBodyBytes)
	}
	for _, tc := range []struct{ doc, section, how string }{
		{"README.md", "## The library", "Options.MaxBodyBytes"},
		{"README.md", "## The command line", "1 MiB"},
		{"docs/http-api.md", "# The HTTP API", "max_body_bytes"},
	} {
		text := strings.Join(strings.Fields(docSection(t, tc.doc, tc.section)), " ")
		if !strings.Contains(text, "1 MiB") || !strings.Contains(text, tc.how) {
			t.Errorf("%s's %q does not state the body cap (1 MiB) and %s", tc.doc, tc.section, tc.how)
		}
	}
}
