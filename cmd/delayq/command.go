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
	"github.com/delayq/delayq/partition"
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
	cmd  string // the command whose usage applies ("" for the top level)
	err  error
	hint string // printed after the error instead of the -h hint; "" for none
}

// Error returns the message of the underlying error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *usageError) Unwrap() error { return e.err }

// valueErr returns the usageError of a bad flag value of command cmd: one
// line, which names the flag, the value and what is allowed, with no
// hint to run -h after it.
func valueErr(cmd, format string, args ...any) error {
	return &usageError{err: fmt.Errorf("%s: %s", cmd, fmt.Sprintf(format, args...))}
}

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
	cluster    bool // --cluster
	topic      string
	partitions int
	logLevel   slog.Level
	// retryFor is delayq.Options.RetryFor: 0 for the default, negative
	// for no retry (send --retry-for 0).
	retryFor time.Duration
}

// command is one command's flag set, with the common flags it takes, and
// where it writes.
type command struct {
	name  string // as typed after "delayq", e.g. "dead list"
	args  string // synopsis of the arguments, shown by -h
	about string // one paragraph shown by -h
	fs    *flag.FlagSet
	c     common
	// needsTopic makes parse require --topic.
	needsTopic bool
	// id, when set (idCommand), is a --id flag parse requires.
	id *string
	// createsNoTopic makes parse refuse --partitions, which says the
	// count of a topic the command would create.
	createsNoTopic bool
	stdout         io.Writer // where -h prints the usage
	stderr         io.Writer // where the client logs
	// raw holds each flag given as the user typed its value, by name.
	raw map[string]string
	// setErr is the error of the first flag value that failed to parse,
	// named with --.
	setErr error
}

// newCommand returns a command whose flag set already has the common
// flags. The usage printed by -h goes to stdout; the client's logs go to
// stderr.
func newCommand(name, args, about string, stdout, stderr io.Writer) *command {
	cmd := newConnCommand(name, args, about, stdout, stderr)
	cmd.needsTopic = true
	cmd.fs.StringVar(&cmd.c.topic, "topic", "", "`topic` name (required)")
	cmd.fs.IntVar(&cmd.c.partitions, "partitions", 0, "partition `count` of a topic that send, sub, import or schedule add creates (default 16); a topic that exists keeps its stored count, and another count only warns")
	cmd.addLogLevel(slog.LevelWarn)
	return cmd
}

// addLogLevel registers --log-level, whose default is def, on cmd.
func (cmd *command) addLogLevel(def slog.Level) {
	cmd.fs.TextVar(&cmd.c.logLevel, "log-level", def, "log `level`: debug, info, warn or error")
}

// newConnCommand returns a command with only the flags that say where
// Redis is: --addr, --password and --namespace.
func newConnCommand(name, args, about string, stdout, stderr io.Writer) *command {
	cmd := newBareCommand(name, args, about, stdout, stderr)
	fs := cmd.fs
	addr := defaultAddr
	if v, ok := os.LookupEnv(envAddr); ok && v != "" {
		addr = v
	}
	fs.StringVar(&cmd.c.addr, "addr", addr, "`host:port` of Redis or of a Twemproxy/Codis proxy, or several proxies separated by commas (env "+envAddr+")")
	fs.StringVar(&cmd.c.password, "password", "", "Redis `password` (default $"+envPassword+")")
	fs.StringVar(&cmd.c.namespace, "namespace", delayq.DefaultNamespace, "key `prefix`")
	fs.BoolVar(&cmd.c.cluster, "cluster", false, "--addr lists seed nodes of a Redis Cluster, separated by commas")
	return cmd
}

// newBareCommand returns a command with no flags yet.
func newBareCommand(name, args, about string, stdout, stderr io.Writer) *command {
	cmd := &command{name: name, args: args, about: about, fs: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	// Parse errors are returned, not printed; -h prints the usage to stdout.
	cmd.fs.SetOutput(io.Discard)
	cmd.fs.Usage = func() {}
	return cmd
}

// printUsage prints the synopsis, description and flags of the command.
func (cmd *command) printUsage() {
	fmt.Fprintf(cmd.stdout, "Usage: delayq %s %s\n\n%s\n\nFlags:\n", cmd.name, cmd.args, cmd.about)
	// PrintDefaults compares each value with its type's zero value:
	// show it the values themselves, not recordRaw's wrappers.
	cmd.fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(type) {
		case *rawValue:
			f.Value = v.Value
		case *rawBool:
			f.Value = v.Value
		}
	})
	cmd.fs.SetOutput(cmd.stdout)
	cmd.fs.PrintDefaults()
	cmd.fs.SetOutput(io.Discard)
}

// parse parses args. It returns errHelp after printing the usage for -h,
// and a usageError for bad flags, stray arguments, a missing --topic or
// --id, or a --partitions the command refuses.
func (cmd *command) parse(args []string) error {
	cmd.recordRaw()
	if err := cmd.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cmd.printUsage()
			return errHelp
		}
		if cmd.setErr != nil {
			return cmd.setErr
		}
		return usagef(cmd.name, "%s", dashDash(err))
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
	if cmd.createsNoTopic && cmd.isSet("partitions") {
		return usagef(cmd.name, "--partitions does not apply: %s creates no topic", cmd.name)
	}
	if cmd.isSet("partitions") && partition.ValidateCount(cmd.c.partitions) != nil {
		// 0 would mean the default to the library: say so, not do it.
		return valueErr(cmd.name, "invalid value %q for flag --partitions: want 1 to %d (leave it out for the default, %d)",
			cmd.value("partitions"), partition.MaxPartitions, delayq.DefaultPartitions)
	}
	if cmd.c.password == "" {
		cmd.c.password = os.Getenv(envPassword)
	}
	return nil
}

// recordRaw makes every flag of cmd keep the text it was given in
// cmd.raw, so that a value refused later (by the library) is quoted as
// typed, and a value that fails to parse is named --flag in cmd.setErr.
func (cmd *command) recordRaw() {
	if cmd.raw != nil {
		return
	}
	cmd.raw = map[string]string{}
	cmd.fs.VisitAll(func(f *flag.Flag) {
		r := rawValue{Value: f.Value, name: f.Name, cmd: cmd}
		if b, ok := f.Value.(boolFlag); ok && b.IsBoolFlag() {
			f.Value = &rawBool{r}
			return
		}
		f.Value = &r
	})
}

// boolFlag is the interface of the flag package's bool values.
type boolFlag interface {
	flag.Value
	IsBoolFlag() bool
}

// rawValue records the text given to the flag.Value it wraps.
type rawValue struct {
	flag.Value
	name string
	cmd  *command
}

// Set records s and sets the wrapped value; its error names the flag
// with two dashes, as every message of delayq does.
func (v *rawValue) Set(s string) error {
	v.cmd.raw[v.name] = s
	if err := v.Value.Set(s); err != nil {
		if v.cmd.setErr == nil {
			v.cmd.setErr = valueErr(v.cmd.name, "invalid value %q for flag --%s: %v", s, v.name, err)
		}
		return err
	}
	return nil
}

// rawBool is a rawValue of a bool flag, which takes no argument.
type rawBool struct{ rawValue }

// IsBoolFlag reports that the flag takes no argument.
func (v *rawBool) IsBoolFlag() bool { return true }

// dashDash returns the message of an error of flag.FlagSet.Parse with
// the flag it names spelled --name: the flag package spells it -name
// ("flag provided but not defined: -frob"), and delayq's help and every
// other message use --name. The flag package has no typed errors, so
// this rewrites the one dash after the colon of its known messages.
func dashDash(err error) string {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: -", "flag needs an argument: -"} {
		if strings.HasPrefix(msg, p) && !strings.HasPrefix(msg, p+"-") {
			return p + "-" + msg[len(p):]
		}
	}
	return msg
}

// value returns the text the flag called name was given, as typed, or
// its current value when it was not given.
func (cmd *command) value(name string) string {
	if s, ok := cmd.raw[name]; ok {
		return s
	}
	if f := cmd.fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// fieldFlags maps the fields of the library's options (as
// delayq.FieldError names them) to the flags that set them. A command
// that has the flag reports the library's refusal of its value as a
// usage error naming the flag: library field names never reach the
// command line.
var fieldFlags = map[string]string{
	"Options.Addr":                     "addr",
	"Options.Partitions":               "partitions",
	"ConsumerOptions.Lease":            "lease",
	"ConsumerOptions.Concurrency":      "concurrency",
	"ConsumerOptions.Prefetch":         "prefetch",
	"ConsumerOptions.MaxAttempts":      "max-attempts",
	"ConsumerOptions.Timeout":          "handler-timeout",
	"ConsumerOptions.PollInterval":     "poll",
	"ConsumerOptions.IdlePollInterval": "poll",
	"ConsumerOptions.Limit":            "count",
	"ConsumerOptions.ClaimBatch":       "claim-batch",
	"PauseOptions.Until":               "until",
	"Limits.Rate":                      "rate",
	"Limits.Burst":                     "burst",
	"Limits.Concurrency":               "concurrency",
	"AutoPartitions.Min":               "min",
	"AutoPartitions.Max":               "max",
	"SetPartitions.n":                  "set",
	"Schedule.Spec":                    "spec",
	"Schedule.Policy":                  "policy",
	"Schedule.MaxAttempts":             "max-attempts",
	"Schedule.TimeZone":                "tz",
}

// flagError returns err as a usage error naming the flag, when err is a
// *delayq.FieldError of a field one of cmd's flags sets and that flag
// was given (or, for PauseOptions.Until, --for: a pause's end comes from
// either); otherwise err unchanged.
func (cmd *command) flagError(err error) error {
	var fe *delayq.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	name := fieldFlags[fe.Field]
	if fe.Field == "PauseOptions.Until" && cmd.isSet("for") {
		name = "for"
	}
	if strings.HasPrefix(fe.Field, "ConsumerOptions.Backoff[") {
		name = "backoff"
	}
	if name == "" || cmd.fs.Lookup(name) == nil {
		return err
	}
	return valueErr(cmd.name, "invalid value %q for flag --%s: %s", cmd.value(name), name, fe.Reason)
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

// run parses args, then connects (see connect): the whole of a command
// whose flags need no check beyond parse's.
func (cmd *command) run(args []string, do func(*delayq.Client) error) error {
	if err := cmd.parse(args); err != nil {
		return err
	}
	return cmd.connect(do)
}

// connect makes a Client configured by the common flags, logging to the
// command's stderr, runs do with it and closes it. Every command that
// talks to Redis through a Client does so once its flags are parsed and
// checked.
func (cmd *command) connect(do func(*delayq.Client) error) error {
	client, err := cmd.c.client(cmd.stderr)
	if err != nil {
		return cmd.flagError(err)
	}
	defer client.Close()
	return cmd.flagError(do(client))
}

// logger returns a logger writing text to w at --log-level.
func (c *common) logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: c.logLevel}))
}

// client returns a Client configured by the common flags, logging text
// to stderr at --log-level. The caller closes it.
func (c *common) client(stderr io.Writer) (*delayq.Client, error) {
	return delayq.New(c.options(stderr))
}

// options returns the client options the common flags say, logging text
// to stderr at --log-level.
func (c *common) options(stderr io.Writer) delayq.Options {
	return delayq.Options{
		Addr:       c.addr,
		Password:   c.password,
		Namespace:  c.namespace,
		Cluster:    c.cluster,
		Partitions: c.partitions,
		Logger:     c.logger(stderr),
		RetryFor:   c.retryFor,
	}
}

// nonNegative returns a usage error naming flag --name when v, its value,
// is negative.
func (cmd *command) nonNegative(name string, v int64) error {
	if v < 0 {
		return valueErr(cmd.name, "invalid value %q for flag --%s: negative", cmd.value(name), name)
	}
	return nil
}
