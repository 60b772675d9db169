package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/delayq/delayq/internal/portable"
)

// expected are shapes any full test run sends; their absence means the
// audit did not see the suite (the environment variable was lost).
var expected = []string{"EVALSHA 1", "HSETNX", "ZADD", "HMGET", "SET NX PX", "INCR"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: auditcheck AUDIT_LOG")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditcheck:", err)
		os.Exit(1)
	}
	defer f.Close()
	rep, err := portable.ReadAudit(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditcheck:", err)
		os.Exit(1)
	}
	var shapes []string
	for s := range rep.Shapes {
		shapes = append(shapes, s)
	}
	sort.Strings(shapes)
	fmt.Printf("auditcheck: %d distinct command shapes sent by the test run:\n", len(shapes))
	for _, s := range shapes {
		fmt.Printf("  %-36s (recorded by %d processes)\n", s, rep.Shapes[s])
	}
	failed := false
	for _, l := range rep.Refused {
		fmt.Printf("REFUSED: %s\n", l)
		failed = true
	}
	for _, s := range rep.Unknown {
		fmt.Printf("NOT PORTABLE: %s\n", s)
		failed = true
	}
	for _, s := range expected {
		if rep.Shapes[s] == 0 {
			fmt.Printf("MISSING: %s was never recorded: was DELAYQ_COMMAND_AUDIT passed to every process?\n", s)
			failed = true
		}
	}
	if failed {
		fmt.Println("auditcheck: FAIL")
		os.Exit(1)
	}
	fmt.Println("auditcheck: every command was in the portable set, with one key")
}
