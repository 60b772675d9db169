package main

import (
	"io"
	"strings"
	"testing"
)

func TestCommonFlagDefaults(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		addr     string
		password string
	}{
		{"defaults", nil, nil, defaultAddr, ""},
		{"env", map[string]string{envAddr: "10.0.0.1:22121", envPassword: "pw"}, nil, "10.0.0.1:22121", "pw"},
		{"flags beat env", map[string]string{envAddr: "10.0.0.1:22121", envPassword: "pw"},
			[]string{"--addr", "h:1", "--password", "x"}, "h:1", "x"},
		{"single dash", nil, []string{"-addr", "h:2"}, "h:2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envAddr, "")
			t.Setenv(envPassword, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cmd := newCommand("x", "", "", io.Discard, io.Discard)
			if err := cmd.parse(append(tt.args, "--topic", "t")); err != nil {
				t.Fatal(err)
			}
			if cmd.c.addr != tt.addr || cmd.c.password != tt.password {
				t.Errorf("addr, password = %q, %q; want %q, %q", cmd.c.addr, cmd.c.password, tt.addr, tt.password)
			}
			if cmd.c.namespace != "dq" || cmd.c.partitions != 0 || cmd.c.logLevel.String() != "WARN" {
				t.Errorf("namespace %q, partitions %d, log level %v; want dq, 0 (not set), WARN",
					cmd.c.namespace, cmd.c.partitions, cmd.c.logLevel)
			}
		})
	}
}

// TestHelpHidesPassword checks that -h does not print $DELAYQ_PASSWORD.
func TestHelpHidesPassword(t *testing.T) {
	t.Setenv(envPassword, "s3cret")
	var out strings.Builder
	cmd := newCommand("x", "", "", &out, io.Discard)
	if err := cmd.parse([]string{"-h"}); err != errHelp {
		t.Fatalf("err = %v, want errHelp", err)
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("help shows the password:\n%s", out.String())
	}
}

func TestLogLevelFlag(t *testing.T) {
	tests := []struct {
		value   string
		want    string
		wantErr bool
	}{
		{"debug", "DEBUG", false},
		{"INFO", "INFO", false},
		{"error", "ERROR", false},
		{"loud", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			cmd := newCommand("x", "", "", io.Discard, io.Discard)
			err := cmd.parse([]string{"--topic", "t", "--log-level", tt.value})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "log-level") || !strings.Contains(err.Error(), tt.value) {
					t.Fatalf("err = %v, want one naming --log-level and %q", err, tt.value)
				}
				return
			}
			if err != nil || cmd.c.logLevel.String() != tt.want {
				t.Fatalf("level, err = %v, %v; want %s", cmd.c.logLevel, err, tt.want)
			}
		})
	}
}
