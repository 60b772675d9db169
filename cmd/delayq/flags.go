package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// Environment variables that supply defaults for the common flags.
const (
	envAddr     = "DELAYQ_ADDR"     // default of --addr
	envPassword = "DELAYQ_PASSWORD" // used when --password is not given
)

// defaultAddr is the default of --addr when DELAYQ_ADDR is not set.
const defaultAddr = "127.0.0.1:6379"

// usageError is a mistake in the command line: main prints it and exits 2.
type usageError struct {
	cmd string // the command whose usage applies ("" for the top level)
	err error
}

// Error returns the message of the underlying error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError of command cmd with a formatted message.
func usagef(cmd, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if cmd != "" {
		err = fmt.Errorf("%s: %w", cmd, err)
	}
	return &usageError{cmd: cmd, err: err}
}

// errHelp is returned by parse when -h or --help was asked for and the
// usage has been printed: the command then ends successfully.
var errHelp = errors.New("help requested")

// common holds the flags every subcommand takes.
type common struct {
	addr       string
	password   string
	namespace  string
	topic      string
	partitions int
	logLevel   slog.Level
	// retryFor is delayq.Options.RetryFor: 0 for the default, negative
	// for no retry (send --retry-for 0).
	retryFor time.Duration
}

// command is one subcommand's flag set together with the common flags.
type command struct {
	name  string // as typed after "delayq", e.g. "dead list"
	args  string // synopsis of the arguments, shown by -h
	about string // one paragraph shown by -h
	fs    *flag.FlagSet
	c     common
	// needsTopic makes parse require --topic.
	needsTopic bool
	// id, when set (idCommand), is a --id flag parse requires.
	id     *string
	stdout io.Writer // where -h prints the usage
}

// newCommand returns a command whose flag set already has the common
// flags. The usage printed by -h goes to stdout.
func newCommand(name, args, about string, stdout io.Writer) *command {
	cmd := newConnCommand(name, args, about, stdout)
	cmd.needsTopic = true
	cmd.fs.StringVar(&cmd.c.topic, "topic", "", "`topic` name (required)")
	cmd.fs.IntVar(&cmd.c.partitions, "partitions", 0, "partition `count` of a topic that send, sub, import or schedule add creates (default 16); a topic that exists keeps its stored count, and another count only warns")
	cmd.addLogLevel()
	return cmd
}

// addLogLevel registers --log-level (default warn) on cmd.
func (cmd *command) addLogLevel() {
	cmd.fs.TextVar(&cmd.c.logLevel, "log-level", slog.LevelWarn, "log `level`: debug, info, warn or error")
}

// newConnCommand returns a command with only the flags that say where
// Redis is: --addr, --password and --namespace.
func newConnCommand(name, args, about string, stdout io.Writer) *command {
	cmd := &command{name: name, args: args, about: about, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := cmd.fs
	addr := defaultAddr
	if v, ok := os.LookupEnv(envAddr); ok && v != "" {
		addr = v
	}
	fs.StringVar(&cmd.c.addr, "addr", addr, "`host:port` of Redis or of a Twemproxy/Codis proxy, or several proxies separated by commas (env "+envAddr+")")
	fs.StringVar(&cmd.c.password, "password", "", "Redis `password` (default $"+envPassword+")")
	fs.StringVar(&cmd.c.namespace, "namespace", delayq.DefaultNamespace, "key `prefix`")
	// Parse errors are returned, not printed; -h prints the usage to stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cmd.stdout = stdout
	return cmd
}

// printUsage prints the synopsis, description and flags of the command.
func (cmd *command) printUsage() {
	fmt.Fprintf(cmd.stdout, "Usage: delayq %s %s\n\n%s\n\nFlags:\n", cmd.name, cmd.args, cmd.about)
	cmd.fs.SetOutput(cmd.stdout)
	cmd.fs.PrintDefaults()
	cmd.fs.SetOutput(io.Discard)
}

// parse parses args. It returns errHelp after printing the usage for -h,
// and a usageError for bad flags, stray arguments or a missing --topic.
func (cmd *command) parse(args []string) error {
	if err := cmd.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cmd.printUsage()
			return errHelp
		}
		return usagef(cmd.name, "%v", err)
	}
	if cmd.fs.NArg() > 0 {
		return usagef(cmd.name, "unexpected argument %q", cmd.fs.Arg(0))
	}
	if cmd.needsTopic && cmd.c.topic == "" {
		return usagef(cmd.name, "--topic is required")
	}
	if cmd.id != nil && *cmd.id == "" {
		return usagef(cmd.name, "--id is required")
	}
	if cmd.c.password == "" {
		cmd.c.password = os.Getenv(envPassword)
	}
	return nil
}

// usageErr returns a usageError of this command.
func (cmd *command) usageErr(format string, args ...any) error {
	return usagef(cmd.name, format, args...)
}

// isSet reports whether the flag called name was given on the command line.
func (cmd *command) isSet(name string) bool {
	set := false
	cmd.fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// client returns a Client configured by the common flags, logging text
// to stderr at --log-level. The caller closes it.
func (c *common) client(stderr io.Writer) (*delayq.Client, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	return delayq.New(delayq.Options{
		Addr:       c.addr,
		Password:   c.password,
		Namespace:  c.namespace,
		Partitions: c.partitions,
		Logger:     log,
		RetryFor:   c.retryFor,
	})
}

// durationFlag is a flag.Value for a time.Duration whose parse errors
// keep time.ParseDuration's reason (flag.Duration says only "parse error").
type durationFlag struct{ d time.Duration }

// String returns the duration, or "" when unset.
func (f *durationFlag) String() string {
	if f == nil || f.d == 0 {
		return ""
	}
	return f.d.String()
}

// Set parses s with time.ParseDuration.
func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "time: "))
	}
	f.d = d
	return nil
}

// timeFlag is a flag.Value for an RFC 3339 time (fractional seconds allowed).
type timeFlag struct{ t time.Time }

// String returns the time in RFC 3339, or "" when unset.
func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

// Set parses s as RFC 3339.
func (f *timeFlag) Set(s string) error {
	t, err := parseTime(s)
	if err != nil {
		return err
	}
	f.t = t
	return nil
}

// parseTime parses an RFC 3339 time, with or without fractional seconds,
// and returns an error that says which format was expected.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time like 2006-01-02T15:04:05Z07:00")
	}
	return t, nil
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

// String returns the values joined by commas.
func (f *stringsFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

// Set appends s.
func (f *stringsFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// dueFlags are the --delay and --at flags that say when a message is due.
type dueFlags struct {
	delay durationFlag
	at    timeFlag
}

// add registers --delay and --at on cmd; note ends their help texts.
func (d *dueFlags) add(cmd *command, note string) {
	cmd.fs.Var(&d.delay, "delay", "due after `duration`, e.g. 1m30s"+note)
	cmd.fs.Var(&d.at, "at", "due at `time` (RFC 3339), e.g. 2030-01-02T15:04:05Z"+note)
}

// resolve checks that at most one of --delay and --at was given (exactly
// one when required) and returns what was given: a delay, a time, or
// neither (both zero).
func (d *dueFlags) resolve(cmd *command, required bool) (time.Duration, time.Time, error) {
	delaySet, atSet := cmd.isSet("delay"), cmd.isSet("at")
	switch {
	case delaySet && atSet:
		return 0, time.Time{}, cmd.usageErr("--delay and --at are mutually exclusive")
	case delaySet && d.delay.d < 0:
		return 0, time.Time{}, cmd.usageErr("invalid value %q for flag --delay: negative", d.delay.d)
	case !delaySet && !atSet && required:
		return 0, time.Time{}, cmd.usageErr("one of --delay or --at is required")
	}
	return d.delay.d, d.at.t, nil
}

// nonNegative returns a usage error naming flag --name when v, its value,
// is negative.
func (cmd *command) nonNegative(name string, v int64) error {
	if v < 0 {
		return cmd.usageErr("invalid value %q for flag --%s: negative", cmd.fs.Lookup(name).Value.String(), name)
	}
	return nil
}
