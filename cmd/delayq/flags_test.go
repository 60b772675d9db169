package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestDurationAndTimeFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		delay   time.Duration
		at      time.Time
		wantErr []string // substrings of the error; nil for success
	}{
		{"neither", nil, 0, time.Time{}, nil},
		{"delay", []string{"--delay", "1m30s"}, 90 * time.Second, time.Time{}, nil},
		{"at", []string{"--at", "2030-01-02T03:04:05Z"}, 0, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), nil},
		{"at nanos and offset", []string{"--at", "2030-01-02T04:04:05.123456789+01:00"}, 0,
			time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC), nil},
		{"bad delay", []string{"--delay", "soon"}, 0, time.Time{}, []string{"-delay", `"soon"`, "invalid duration"}},
		{"delay without unit", []string{"--delay", "10"}, 0, time.Time{}, []string{"-delay", `"10"`, "missing unit"}},
		{"bad at", []string{"--at", "2030-01-02"}, 0, time.Time{}, []string{"-at", `"2030-01-02"`, "RFC 3339"}},
		{"both", []string{"--delay", "1s", "--at", "2030-01-02T03:04:05Z"}, 0, time.Time{}, []string{"--delay and --at"}},
		{"negative", []string{"--delay", "-5s"}, 0, time.Time{}, []string{"--delay", `"-5s"`, "negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newCommand("x", "", "", io.Discard, io.Discard)
			var due dueFlags
			due.add(cmd, "")
			err := cmd.parse(append(tt.args, "--topic", "t"))
			var delay time.Duration
			var at time.Time
			if err == nil {
				delay, at, err = due.resolve(cmd, false)
			}
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if delay != tt.delay || !at.Equal(tt.at) {
				t.Errorf("delay, at = %v, %v; want %v, %v", delay, at, tt.delay, tt.at)
			}
		})
	}
}

func TestStringsFlagRepeats(t *testing.T) {
	cmd := newCommand("x", "", "", io.Discard, io.Discard)
	var ids stringsFlag
	cmd.fs.Var(&ids, "id", "")
	if err := cmd.parse([]string{"--id", "a", "-id", "b", "--id=c", "--topic", "t"}); err != nil {
		t.Fatal(err)
	}
	if got := ids.String(); got != "a,b,c" {
		t.Errorf("ids = %q, want a,b,c", got)
	}
}
