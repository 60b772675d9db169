package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/delayq/delayq"
)

// main runs the command line until it finishes or SIGINT/SIGTERM, and
// turns its error into an exit status. It is the only place that exits.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "delayq: ") {
		msg = "delayq: " + msg // library errors carry the prefix already
	}
	fmt.Fprintln(os.Stderr, msg)
	var ue *usageError
	if errors.As(err, &ue) {
		switch {
		case ue.hint != "":
			fmt.Fprintln(os.Stderr, ue.hint)
		case ue.cmd != "":
			fmt.Fprintf(os.Stderr, "Run 'delayq %s -h' for usage.\n", ue.cmd)
		}
		os.Exit(2)
	}
	if errors.Is(err, delayq.ErrRunning) {
		os.Exit(exitRunning)
	}
	os.Exit(1)
}

// commandsHint follows the error of a missing or unknown command: the
// error comes first, then this one line, not the whole help.
const commandsHint = "Commands: send sub get delete reschedule stats partitions pause resume limits unique-for\n" +
	"dead export import schedule topic worker ui bench doctor version. Run 'delayq help' for more."

// exitRunning is the exit status of a delete or reschedule that came
// after a delivery of the message started (delayq.ErrRunning).
const exitRunning = 3

// usageText lists the commands.
const usageText = `delayq is a Redis delay queue that works behind Twemproxy and Codis.

Usage:

	delayq <command> [flags]

Commands:

	send        enqueue a message, or JSON lines from stdin (--stdin)
	sub         consume a topic, printing each delivery as a JSON line
	get         print a message as JSON
	delete      delete a message
	reschedule  move a scheduled message to a new due time
	stats       print the counters of every partition of a topic
	partitions  print a topic's partition count, or change it (--set N)
	pause       pause a topic's deliveries, for a time or until resumed
	resume      resume a paused topic
	limits      print or set a topic's fleet-wide rate and concurrency limits
	unique-for  print or set a topic's default uniqueness window (ids kept after delivery)
	dead        list, requeue or purge dead messages (dead list|requeue|purge)
	export      write every message of a topic as JSON lines (backups, moves)
	import      write the JSON lines of an export into a topic
	schedule    recurring messages: schedule add|list|pause|resume|delete
	topic       list the topics and their partition counts (topic list), or delete
	            a topic no longer used (topic delete; --force if it holds messages)
	worker      run the worker daemon (webhooks, commands, HTTP API, metrics, dashboard)
	ui          serve the web dashboard on its own (--listen, --token, --read-only)
	bench       run the benchmarks: enqueue, burst, spread, duenow, export
	doctor      check that every command delayq needs works through a server or proxy
	version     print the version and VCS revision of this binary
	help        print this help, or "help <command>" for a command's flags

The commands on one topic (send, sub, get, delete, reschedule, stats,
partitions, pause, resume, limits, unique-for, dead, export, import,
schedule, topic delete) take --topic (required) and --partitions (the
count of a topic the command creates: only send, sub, import and schedule
add create one; an existing topic keeps its stored count). version takes
no flags. Every other command takes --addr (default 127.0.0.1:6379, env
DELAYQ_ADDR; the worker's overrides its --config file).
Every command but worker takes --password (env DELAYQ_PASSWORD) and
--namespace (the worker reads them from its --config file), and every one
but doctor takes --log-level. Run "delayq <command> -h" for the flags of a
command.
`

// run executes the command line args (without the program name), reading
// stdin and writing to stdout and stderr, until the command is done or ctx
// is. It returns a *usageError for a bad command line.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// dispatch runs the command named by args[0].
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{err: errors.New("no command"), hint: commandsHint}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && rest[0] != "help" && !strings.HasPrefix(rest[0], "-") {
			return dispatch(ctx, append(rest[:1:1], "-h"), stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usageText)
		return nil
	case "send":
		return runSend(ctx, rest, stdin, stdout, stderr)
	case "sub":
		return runSub(ctx, rest, stdout, stderr)
	case "get":
		return runGet(ctx, rest, stdout, stderr)
	case "delete":
		return runDelete(ctx, rest, stdout, stderr)
	case "reschedule":
		return runReschedule(ctx, rest, stdout, stderr)
	case "stats":
		return runStats(ctx, rest, stdout, stderr)
	case "partitions":
		return runPartitions(ctx, rest, stdout, stderr)
	case "pause":
		return runPause(ctx, rest, stdout, stderr)
	case "resume":
		return runResume(ctx, rest, stdout, stderr)
	case "limits":
		return runLimits(ctx, rest, stdout, stderr)
	case "unique-for":
		return runUniqueFor(ctx, rest, stdout, stderr)
	case "dead":
		return runDead(ctx, rest, stdout, stderr)
	case "export":
		return runExport(ctx, rest, stdout, stderr)
	case "import":
		return runImport(ctx, rest, stdin, stdout, stderr)
	case "schedule":
		return runSchedule(ctx, rest, stdin, stdout, stderr)
	case "topic":
		return runTopic(ctx, rest, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, rest, stdout, stderr)
	case "worker":
		return runWorker(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "ui":
		return runUI(ctx, rest, stdout, stderr)
	case "version":
		return runVersion(rest, stdout)
	}
	return &usageError{err: fmt.Errorf("unknown command %q", name), hint: commandsHint}
}
