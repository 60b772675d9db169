package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Error is a problem with one key of a configuration: an unknown key or
// an invalid value. Parse and Validate return one per problem, joined
// with errors.Join; get the first with errors.As.
type Error struct {
	Source  string // file name; "" when the config did not come from a file
	Line    int    // 1-based line of the key; 0 when unknown
	Path    string // the key's full name, with array indices: "topic[1].handler.url"
	Table   string // the key's table as written: "[worker]", `[[topic]] "orders"`; "" for the top level
	Key     string // the key's own name: "url"
	Unknown bool   // the key is none of its table's keys
	// Msg says, for an unknown key, which keys the table has; otherwise
	// what is wrong with the value and what was expected.
	Msg string

	also string // path of a related key whose line Parse appends to Msg
}

// Error returns, for example,
//
//	unknown key "polll_interval" in [worker] at config.toml line 12; known keys: id, lease, poll_interval, idle_poll_interval, shutdown_timeout
//	invalid value of "lease" in [worker] at config.toml line 5: -3s is negative; want a duration of at least 30ms such as "10s"
func (e *Error) Error() string {
	var b strings.Builder
	if e.Unknown {
		fmt.Fprintf(&b, "unknown key %q", e.Key)
	} else {
		fmt.Fprintf(&b, "invalid value of %q", e.Key)
	}
	if e.Table != "" {
		b.WriteString(" in " + e.Table)
	}
	switch {
	case e.Source != "" && e.Line > 0:
		fmt.Fprintf(&b, " at %s line %d", e.Source, e.Line)
	case e.Source != "":
		b.WriteString(" in " + e.Source)
	case e.Line > 0:
		fmt.Fprintf(&b, " at line %d", e.Line)
	}
	if e.Unknown {
		b.WriteString("; ")
	} else {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// place is where a key is: its path, its table as shown in errors, and
// its own name.
type place struct {
	path, table, key string
}

// child returns the place of key in the table whose path is tablePath and
// whose display name is table.
func child(tablePath, table, key string) place {
	p := key
	if tablePath != "" {
		p = tablePath + "." + key
	}
	return place{path: p, table: table, key: key}
}

// problems collects Errors.
type problems []*Error

func (ps *problems) add(at place, format string, args ...any) {
	*ps = append(*ps, &Error{Path: at.path, Table: at.table, Key: at.key, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems, ordered by line, as one error (nil if none).
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}
