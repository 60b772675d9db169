package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpPages returns the -h output of every command the top-level usage
// lists, and of every subcommand of those that have some, by command
// line ("dead list").
func helpPages(t *testing.T) map[string]string {
	t.Helper()
	pages := map[string]string{}
	var walk func(name string)
	walk = func(name string) {
		stdout, _, err := runArgs(t, append(strings.Fields(name), "-h")...)
		if err != nil || stdout == "" {
			t.Fatalf("%s -h: %v, %q", name, err, stdout)
		}
		if strings.Contains(stdout, "\nFlags:\n") {
			pages[name] = stdout
			return
		}
		// A command of subcommands lists them indented by a tab.
		subs := regexp.MustCompile(`(?m)^\t([a-z]+)  `).FindAllStringSubmatch(stdout, -1)
		if len(subs) == 0 {
			t.Fatalf("%s -h lists neither flags nor subcommands:\n%s", name, stdout)
		}
		for _, s := range subs {
			walk(name + " " + s[1])
		}
	}
	for _, name := range usageCommands() {
		if name != "help" && name != "version" {
			walk(name)
		}
	}
	if len(pages) < 20 {
		t.Fatalf("only %d help pages found", len(pages))
	}
	return pages
}

// usageCommands returns the commands the top-level usage lists, in
// order ("unique-for" included: names may hold a dash).
func usageCommands() []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\t([a-z][a-z-]*)  +`).FindAllStringSubmatch(usageText, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestUsageListsCommands: the usage lists the commands with a dash in
// their names too, and the one-line hint after a missing or unknown
// command names every command the usage lists, in its order.
func TestUsageListsCommands(t *testing.T) {
	names := usageCommands()
	if !slices.Contains(names, "unique-for") || !slices.Contains(names, "limits") {
		t.Fatalf("usage commands %v lack unique-for or limits", names)
	}
	hint := strings.Fields(strings.TrimPrefix(strings.Split(commandsHint, ".")[0], "Commands:"))
	var want []string
	for _, n := range names {
		if n != "help" {
			want = append(want, n)
		}
	}
	if !slices.Equal(hint, want) {
		t.Errorf("commandsHint names %v, want the usage's %v", hint, want)
	}
}

// helpFlag is one flag of a help page: its name, the placeholder of its
// value, its text and the default shown.
type helpFlag struct{ name, placeholder, text, def string }

// helpFlags parses the flags of a help page as flag.PrintDefaults writes
// them.
func helpFlags(page string) []helpFlag {
	var flags []helpFlag
	re := regexp.MustCompile(`(?m)^  -([a-z-]+)(?: (\S+))?\n((?:    \t.*\n?)+)`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		text := strings.Join(strings.Fields(m[3]), " ")
		f := helpFlag{name: m[1], placeholder: m[2], text: text}
		if d := regexp.MustCompile(` \(default "?([^")]*)"?\)$`).FindStringSubmatch(text); d != nil {
			f.def = d[1]
		}
		flags = append(flags, f)
	}
	return flags
}

// TestHelpTexts runs -h for every command and checks the flag texts: a
// placeholder is not repeated in parentheses after the text that names
// it ("duration ... (duration)"), nor is it the default value (which
// reads "-policy skip" as if skip were the only choice).
func TestHelpTexts(t *testing.T) {
	for name, page := range helpPages(t) {
		flags := helpFlags(page)
		if len(flags) < 3 {
			t.Errorf("%s -h: only %d flags parsed:\n%s", name, len(flags), page)
		}
		for _, f := range flags {
			if f.placeholder == "" {
				continue
			}
			if strings.Contains(f.text, "("+f.placeholder+")") {
				t.Errorf("%s -%s: placeholder %q repeated in parentheses: %q", name, f.name, f.placeholder, f.text)
			}
			if f.placeholder == f.def {
				t.Errorf("%s -%s: placeholder %q is the default value: %q", name, f.name, f.placeholder, f.text)
			}
		}
	}
}

// TestHelpTopicFlags: the top-level usage says which commands take
// --topic, and exactly those have it; the connection and log flags are
// where it says.
func TestHelpTopicFlags(t *testing.T) {
	m := regexp.MustCompile(`The commands on one topic \(([^)]*)\)\s+take --topic`).FindStringSubmatch(usageText)
	if m == nil {
		t.Fatalf("usage does not say which commands take --topic:\n%s", usageText)
	}
	withTopic := strings.Split(strings.Join(strings.Fields(m[1]), " "), ", ")
	usage := strings.Join(strings.Fields(usageText), " ")
	if !strings.Contains(usage, "Every other command takes --addr") ||
		!strings.Contains(usage, "Every command but worker takes --password (env DELAYQ_PASSWORD) and --namespace") ||
		!strings.Contains(usage, "every one but doctor takes --log-level") {
		t.Fatalf("usage does not say which commands take --addr and --log-level:\n%s", usageText)
	}
	for name, page := range helpPages(t) {
		has := map[string]bool{}
		for _, f := range helpFlags(page) {
			has[f.name] = true
		}
		top := strings.Fields(name)[0]
		if want := slices.Contains(withTopic, name) || slices.Contains(withTopic, top); has["topic"] != want {
			t.Errorf("%s: has --topic %v, usage says %v", name, has["topic"], want)
		}
		if !has["addr"] {
			t.Errorf("%s lacks --addr", name)
		}
		if top != "worker" && !(has["password"] && has["namespace"]) {
			t.Errorf("%s lacks --password or --namespace", name)
		}
		if top != "doctor" && !has["log-level"] {
			t.Errorf("%s lacks --log-level", name)
		}
	}
}

// TestBenchHelpListsWorkloads: bench's help names every workload it
// accepts, in the synopsis and in --workload's text.
func TestBenchHelpListsWorkloads(t *testing.T) {
	stdout, _, err := runArgs(t, "bench", "-h")
	if err != nil {
		t.Fatal(err)
	}
	var workload string
	for _, f := range helpFlags(stdout) {
		if f.name == "workload" {
			workload = f.text
		}
	}
	synopsis, _, _ := strings.Cut(stdout, "\n")
	for _, w := range benchWorkloads {
		if !strings.Contains(workload, w) || !strings.Contains(synopsis, w) {
			t.Errorf("bench -h does not name workload %q: --workload %q, synopsis %q", w, workload, synopsis)
		}
	}
	if !slices.Contains(benchWorkloads, "export") || !slices.Contains(benchWorkloads, "all") {
		t.Errorf("benchWorkloads = %v", benchWorkloads)
	}
}
