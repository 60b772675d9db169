package main

import (
	"fmt"
	"io"
	"strings"
)

// subcommand is one subcommand of a command made of them, such as "list"
// of "delayq dead": its name and what runs it with the arguments after
// the name.
type subcommand struct {
	name string
	run  func(args []string) error
}

// runSubcommand runs the subcommand of command name that args[0] names.
// Help (-h, --help, help) prints usage to stdout; no subcommand, or one
// not in subs, prints it to stderr and is a usage error.
func runSubcommand(name, usage string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef(name, "missing subcommand: %s", subcommandList(subs))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:])
		}
	}
	fmt.Fprint(stderr, usage)
	return usagef(name, "unknown subcommand %q", args[0])
}

// subcommandList names subs in order: "list, requeue or purge".
func subcommandList(subs []subcommand) string {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
