package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// runVersion implements "delayq version": the module version and the VCS
// revision the binary was built from, as the Go toolchain recorded them.
func runVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			_, err := fmt.Fprintln(stdout, "Usage: delayq version\n\nPrints the module version and the VCS revision this binary was built from.")
			if err == nil {
				err = errHelp
			}
			return err
		}
		return usagef("version", "unexpected argument %q: version takes none", args[0])
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		_, err := fmt.Fprintln(stdout, "delayq: no build information (built without module support)")
		return err
	}
	_, err := fmt.Fprintln(stdout, versionLine(info))
	return err
}

// versionLine says info as "delayq v1.2.0 (revision 0123abcd, 2026-11-28T16:00:00Z,
// modified) go1.24.0": the main module's version ("(devel)" for a build
// from a work tree), then what the VCS settings hold, if any.
func versionLine(info *debug.BuildInfo) string {
	s := map[string]string{}
	for _, kv := range info.Settings {
		s[kv.Key] = kv.Value
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var vcs []string
	if r := s["vcs.revision"]; r != "" {
		vcs = append(vcs, "revision "+r)
	} else {
		vcs = append(vcs, "revision unknown")
	}
	if t := s["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if s["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	return fmt.Sprintf("delayq %s (%s) %s", version, strings.Join(vcs, ", "), info.GoVersion)
}
