package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, _, err := runArgs(t, "version")
	if err != nil || !strings.HasPrefix(out, "delayq ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
		t.Errorf("version: %v %q", err, out)
	}
	_, _, err = runArgs(t, "version", "--addr", "x")
	checkUsageError(t, "version --addr", err, "version takes none")

	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-28T16:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"delayq v1.4.0 (revision 0123abcd, 2026-11-28T16:00:00Z) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}},
			"delayq (devel) (revision 0123abcd, modified) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8"}, "delayq (devel) (revision unknown) go1.26.8"},
	} {
		if got := versionLine(&tc.info); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
}
