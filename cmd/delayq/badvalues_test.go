package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// TestBadValuesNameTheFlag checks that every value the library refuses
// comes back as a one-line usage error (exit 2) that names the flag as
// typed, with two dashes, the value as typed and what is allowed, and
// never a library field name.
func TestBadValuesNameTheFlag(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t16", "--id", "a", "--partitions", "16"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"pause", "--topic", "t16", "--until", "2020-01-02T03:04:05Z"}, []string{`invalid value "2020-01-02T03:04:05Z" for flag --until: is not in the future`}},
		{[]string{"sub", "--topic", "t16", "--lease", "1ms"}, []string{`invalid value "1ms" for flag --lease: is shorter than 30ms`}},
		{[]string{"sub", "--topic", "t16", "--concurrency", "0"}, []string{`invalid value "0" for flag --concurrency: want 1 or more`}},
		{[]string{"sub", "--topic", "t16", "--lease", "soon"}, []string{`invalid value "soon" for flag --lease`}},
		{[]string{"send", "--topic", "t16", "--id", "b", "--partitions", "-1"}, []string{`invalid value "-1" for flag --partitions: want 1 to`}},
		{[]string{"send", "--topic", "t16", "--id", "b", "--partitions", "0"}, []string{`invalid value "0" for flag --partitions: want 1 to`, "leave it out"}},
		{[]string{"partitions", "--topic", "t16", "--set", "0"}, []string{`invalid value "0" for flag --set: is out of range 1..`}},
		{[]string{"partitions", "--topic", "t16", "--set", "6"}, []string{`invalid value "6" for flag --set: is not a multiple or a divisor`, "16 partitions"}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--max", "100000"}, []string{`invalid value "100000" for flag --max: is out of range`}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--min", "0"}, []string{`invalid value "0" for flag --min: want 1 or more`, "leave it out for the default, 1"}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--max", "0"}, []string{`invalid value "0" for flag --max: want 1 or more`, "leave it out"}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--grow-after", "0s"}, []string{`invalid value "0s" for flag --grow-after: want a positive duration`, "10s"}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--shrink-after", "0"}, []string{`invalid value "0" for flag --shrink-after: want a positive duration`, "10m0s"}},
		{[]string{"partitions", "--topic", "t16", "--auto", "--cooldown", "-1s"}, []string{`invalid value "-1s" for flag --cooldown: want a positive duration`}},
		{[]string{"limits", "--topic", "t16", "--rate", "1e9/s"}, []string{`invalid value "1e9/s" for flag --rate: is above 1000000/s`}},
		{[]string{"limits", "--topic", "t16", "--rate", "fast"}, []string{`invalid value "fast" for flag --rate`}},
		{[]string{"schedule", "add", "--topic", "t16", "--name", "r", "--spec", "61 * * * *"}, []string{`invalid value "61 * * * *" for flag --spec: is not a cron spec`}},
		{[]string{"schedule", "add", "--topic", "t16", "--name", "r", "--spec", "@daily", "--tz", "Mars/Base"}, []string{`invalid value "Mars/Base" for flag --tz: is not an IANA zone name`}},
		{[]string{"send", "--topic", "t16", "--id", "b", "--on-duplicate", "debounce", "--max-wait", "-1m"}, []string{`invalid value "-1m" for flag --max-wait: negative`}},
		{[]string{"get", "--topic", "t16", "--id", "a", "--nope"}, []string{"flag provided but not defined: --nope"}},
		{[]string{"send", "--topic", "t16", "--id", "b", "--addr", "127.0.0.1:99999"}, []string{`invalid value "127.0.0.1:99999" for flag --addr: address "127.0.0.1:99999": port 99999 is out of range (1-65535)`}},
	} {
		args := append(tc.args[:1:1], append([]string{"--addr", addr}, tc.args[1:]...)...)
		if tc.args[0] == "schedule" {
			args = append(tc.args[:2:2], append([]string{"--addr", addr}, tc.args[2:]...)...)
		}
		_, _, err := runArgs(t, args...)
		checkUsageError(t, tc.args, err, tc.want...)
		if err == nil {
			continue
		}
		msg := err.Error()
		for _, lib := range []string{"Options.", "Limits.", "SetPartitions", "Schedule.", "invalid argument", " -" + strings.TrimPrefix(tc.args[len(tc.args)-2], "--") + " "} {
			if strings.Contains(msg, lib) {
				t.Errorf("%v: error %q says %q", tc.args, msg, lib)
			}
		}
		var ue *usageError
		if errors.As(err, &ue) && strings.Contains(msg, "for flag") && ue.cmd != "" {
			t.Errorf("%v: a bad value is one line, with no -h hint after it", tc.args)
		}
	}
}
