package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// partitionsPoll is how often "partitions --wait" reads the progress.
var partitionsPoll = time.Second

// runPartitions implements "delayq partitions": it prints the topic's
// partition count and the progress of a change of it, with --set starts
// one and with --cancel cancels it.
func runPartitions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("partitions", "--topic T [--set N [--force] | --cancel | --auto [on|off] [--min N] [--max M] [--grow-after D] [--shrink-after D] [--cooldown D]] [--wait] [--json]",
		partitionsAbout, stdout, stderr)
	f := addPartitionsFlags(cmd)
	if err := cmd.parse(autoValue(args)); err != nil {
		return err
	}
	if err := f.check(cmd); err != nil {
		return err
	}
	return cmd.connect(func(client *delayq.Client) error {
		info, err := f.apply(ctx, cmd, client)
		if err != nil {
			return err
		}
		w := &progressWriter{out: stdout, json: f.json, tty: isTerminal(stdout)}
		if !f.wait || info.Next == 0 {
			return finalPartitions(w, info, stderr)
		}
		return followChange(ctx, client, cmd.c.topic, w, info)
	})
}

// partitionsAbout is the description "delayq partitions -h" prints.
const partitionsAbout = "Prints the topic's partition count, as stored in Redis: the count every\n" +
	"producer, consumer and command of the topic uses, whatever their --partitions\n" +
	"flag or config says, and the progress of a change of it: the source partitions\n" +
	"done, the messages moved, what is left to move and the settle time left.\n\n" +
	"--set N changes the count of the live topic to N, a multiple or a divisor of\n" +
	"it; the consumers of the topic (delayq sub, or a worker) move the messages and\n" +
	"end the change, half a minute after it began at the earliest. Asking again for\n" +
	"the same N is harmless; another N is refused while a change runs, except the\n" +
	"count it started from, which cancels it. A count past max(64, 32 per live\n" +
	"consumer) is refused unless --force: each partition costs its owner a lease and\n" +
	"a polling loop (see docs/partitions.md).\n\n" +
	"--cancel cancels the running change: the consumers move the messages moved\n" +
	"already back, and the topic ends at its old count; no message is lost.\n\n" +
	"On a topic with --auto, --set and --cancel are refused and change nothing: the\n" +
	"automatic count would undo them. Run --auto off first, then set or cancel.\n\n" +
	"--auto lets the count follow the live consumers (--auto off gives it back to\n" +
	"--set): doubled, up to --max (default 64), once the consumers outnumber the\n" +
	"partitions for --grow-after (10s); halved, down to --min (default 1), once\n" +
	"they are at most half of them for --shrink-after (10m); never within\n" +
	"--cooldown (10s) of the end of the last change. The topic's consumers check\n" +
	"every 5s and begin the change; the settings are stored, and --auto again\n" +
	"replaces them (flags not given take their defaults).\n\n" +
	"--wait follows the change until it ends: one updating line on a terminal, a\n" +
	"line per change of state otherwise. With no consumer running on the topic,\n" +
	"nothing would end it: --wait then says so and exits with status 1 at once,\n" +
	"the change started (it ends once a consumer runs). Interrupted, the change goes\n" +
	"on without the command."

// partitionsFlags are the flags of "delayq partitions" beyond the common
// ones.
type partitionsFlags struct {
	set                 int // --set N
	cancel, force, wait bool
	json                bool
	auto                onOff
	// settings are the automatic count's: --min, --max, --grow-after,
	// --shrink-after and --cooldown.
	settings delayq.AutoPartitions
}

// addPartitionsFlags registers the flags of "delayq partitions" on cmd.
func addPartitionsFlags(cmd *command) *partitionsFlags {
	f := &partitionsFlags{}
	fs, a := cmd.fs, &f.settings
	fs.IntVar(&f.set, "set", 0, "change the partition count to `N`")
	fs.BoolVar(&f.cancel, "cancel", false, "cancel the running change: the topic goes back to its old count")
	fs.BoolVar(&f.force, "force", false, "with --set, allow a count past max(64, 32 per live consumer)")
	fs.BoolVar(&f.wait, "wait", false, "follow the change until it ends")
	fs.BoolVar(&f.json, "json", false, "print the delayq.PartitionsInfo value as JSON")
	fs.Var(&f.auto, "auto", "let the count follow the live consumers (on, the default with no value), or stop it (off)")
	fs.IntVar(&a.Min, "min", 0, "with --auto, the smallest `count` (default 1)")
	fs.IntVar(&a.Max, "max", 0, "with --auto, the largest `count` (default 64)")
	fs.DurationVar(&a.GrowAfter, "grow-after", delayq.DefaultAutoGrowAfter, "with --auto, how long the consumers must outnumber the partitions before the count doubles")
	fs.DurationVar(&a.ShrinkAfter, "shrink-after", delayq.DefaultAutoShrinkAfter, "with --auto, how long the consumers must be at most half the partitions before the count halves")
	fs.DurationVar(&a.Cooldown, "cooldown", delayq.DefaultAutoCooldown, "with --auto, the time after a change ends before the next may begin")
	return f
}

// check refuses the parsed flags that do not go together: the settings
// of an automatic count without --auto (on), --auto with --set or
// --cancel, --partitions, --cancel with --set, and --force without --set.
func (f *partitionsFlags) check(cmd *command) error {
	autoFlags := []string{"min", "max", "grow-after", "shrink-after", "cooldown"}
	for _, name := range autoFlags {
		if cmd.isSet(name) && (!cmd.isSet("auto") || !f.auto.on) {
			return cmd.usageErr("--%s applies to --auto (on) only", name)
		}
	}
	if err := f.checkSettings(cmd); err != nil {
		return err
	}
	if cmd.isSet("auto") && (cmd.isSet("set") || f.cancel) {
		return cmd.usageErr("--auto excludes --set and --cancel: the count is automatic or set by hand")
	}
	if cmd.isSet("partitions") {
		return cmd.usageErr("--partitions does not apply: use --set N to change the count")
	}
	if f.cancel && cmd.isSet("set") {
		return cmd.usageErr("--cancel and --set exclude each other")
	}
	if f.force && !cmd.isSet("set") {
		return cmd.usageErr("--force applies to --set only")
	}
	return nil
}

// checkSettings refuses a zero or negative --min, --max, --grow-after,
// --shrink-after or --cooldown: the library reads a zero as "the
// default", so "--min 0" would silently mean --min 1; a value given is
// meant as typed, and the way to the default is to leave the flag out.
func (f *partitionsFlags) checkSettings(cmd *command) error {
	a := f.settings
	for _, c := range []struct {
		name  string
		bad   bool
		want  string
		deflt string
	}{
		{"min", a.Min < 1, "want 1 or more", "1"},
		{"max", a.Max < 1, "want 1 or more", fmt.Sprintf("the larger of %d and --min", delayq.MinPartitionsCeiling)},
		{"grow-after", a.GrowAfter <= 0, "want a positive duration", delayq.DefaultAutoGrowAfter.String()},
		{"shrink-after", a.ShrinkAfter <= 0, "want a positive duration", delayq.DefaultAutoShrinkAfter.String()},
		{"cooldown", a.Cooldown <= 0, "want a positive duration", delayq.DefaultAutoCooldown.String()},
	} {
		if cmd.isSet(c.name) && c.bad {
			return valueErr(cmd.name, "invalid value %q for flag --%s: %s (leave it out for the default, %s)",
				cmd.value(c.name), c.name, c.want, c.deflt)
		}
	}
	return nil
}

// apply does with client what the flags ask of cmd's topic (--set,
// --cancel, --auto, or nothing but a read) and returns the topic's count
// and change as they then are.
func (f *partitionsFlags) apply(ctx context.Context, cmd *command, client *delayq.Client) (*delayq.PartitionsInfo, error) {
	topic := cmd.c.topic
	switch {
	case cmd.isSet("set"):
		info, err := client.Admin().SetPartitions(ctx, topic, f.set, delayq.PartitionsOptions{Force: f.force})
		if errors.Is(err, delayq.ErrTooManyPartitions) {
			err = fmt.Errorf("%w (--force sets it anyway)", err)
		}
		return info, err
	case f.cancel:
		return client.Admin().CancelPartitions(ctx, topic)
	case cmd.isSet("auto"):
		var set *delayq.AutoPartitions
		if f.auto.on {
			set = &f.settings
		}
		if err := client.Admin().SetAutoPartitions(ctx, topic, set); err != nil {
			return nil, err
		}
		return client.Inspector().Partitions(ctx, topic)
	default:
		return client.Inspector().Partitions(ctx, topic)
	}
}

// finalPartitions prints info once with w and, when a change runs that
// no consumer moves, says so on stderr (see noConsumer).
func finalPartitions(w *progressWriter, info *delayq.PartitionsInfo, stderr io.Writer) error {
	if err := w.final(info); err != nil {
		return err
	}
	if info.Next != 0 && idle(info) {
		fmt.Fprintln(stderr, noConsumer(info))
	}
	return nil
}

// followChange shows with w the change of topic's count that info shows
// (--wait), reading its progress every partitionsPoll until it ends or
// ctx is done; it ends at once when no consumer runs the change.
func followChange(ctx context.Context, client *delayq.Client, topic string, w *progressWriter, info *delayq.PartitionsInfo) error {
	if err := w.show(info); err != nil {
		return err
	}
	if idle(info) {
		w.end()
		return errors.New(noConsumer(info))
	}
	said := false
	for {
		if waitFor(ctx, partitionsPoll) != nil {
			w.end()
			return interrupted(info)
		}
		next, err := client.Inspector().Partitions(ctx, topic)
		if err != nil {
			w.end()
			if ctx.Err() != nil {
				return interrupted(info)
			}
			return err
		}
		info = next
		if info.Next == 0 {
			w.end()
			return w.final(info)
		}
		if idle(info) != said {
			said = !said
			if said {
				w.note(fmt.Sprintf("no consumer runs on topic %s any more: the change waits for one", topic))
			} else {
				w.note(fmt.Sprintf("%s runs on topic %s: the change goes on", counted(info.Consumers, "consumer"), topic))
			}
		}
		if err := w.show(info); err != nil {
			return err
		}
	}
}

// idle reports whether nothing moves the messages of the change info
// shows: no live consumer and no owner of a source partition left.
func idle(info *delayq.PartitionsInfo) bool {
	return info.Consumers == 0 && info.OwnedSources == 0
}

// noConsumer says that no consumer runs the change info shows, what ends
// it and how to cancel it (a cancel is not cancelled: --cancel of it
// changes nothing).
func noConsumer(info *delayq.PartitionsInfo) string {
	s := fmt.Sprintf("no consumer runs on topic %s, and only its consumers move messages: the %s stays started until one runs "+
		"(delayq sub --topic %s, or a worker with the topic), which ends it",
		info.Topic, changeName(info), info.Topic)
	if !info.Cancelled {
		s += fmt.Sprintf("; delayq partitions --topic %s --cancel cancels it", info.Topic)
	}
	return s
}

// interrupted is the error of a --wait stopped by a signal.
func interrupted(info *delayq.PartitionsInfo) error {
	cancel := ", --cancel cancels it"
	if info.Cancelled {
		cancel = ""
	}
	return fmt.Errorf("stopped waiting: the %s goes on without this command; delayq partitions --topic %s --wait follows it%s",
		changeName(info), info.Topic, cancel)
}

// changeName names the change info shows, e.g. "change from 4 to 8
// partitions".
func changeName(info *delayq.PartitionsInfo) string {
	if info.Cancelled {
		return fmt.Sprintf("cancel of the change to %d partitions (moving back to %d)", info.Count, info.Next)
	}
	return fmt.Sprintf("change from %d to %d partitions", info.Count, info.Next)
}

// progressWriter prints the progress of a change: on a terminal one line
// that it rewrites, elsewhere a line each time the state changes (the
// settle time left aside).
type progressWriter struct {
	out  io.Writer
	json bool
	tty  bool
	open bool   // a line is on the terminal without its newline
	last string // the state last printed
}

func (w *progressWriter) show(info *delayq.PartitionsInfo) error {
	if w.json {
		if key := stateKey(info); key != w.last {
			w.last = key
			return writeJSON(w.out, info)
		}
		return nil
	}
	if w.tty {
		w.open = true
		_, err := fmt.Fprintf(w.out, "\r%s\x1b[K", partitionsLine(info, time.Now()))
		return err
	}
	if key := stateKey(info); key != w.last {
		w.last = key
		_, err := fmt.Fprintln(w.out, partitionsLine(info, time.Now()))
		return err
	}
	return nil
}

// note prints a line of its own.
func (w *progressWriter) note(s string) {
	w.end()
	if !w.json {
		fmt.Fprintln(w.out, s)
	}
}

// end ends the updating line.
func (w *progressWriter) end() {
	if w.open {
		fmt.Fprintln(w.out)
		w.open = false
	}
}

// final prints info once.
func (w *progressWriter) final(info *delayq.PartitionsInfo) error {
	if w.json {
		return writeJSON(w.out, info)
	}
	if _, err := fmt.Fprintln(w.out, partitionsLine(info, time.Now())); err != nil {
		return err
	}
	if l := pauseLine(info.Pause); l != "" {
		if _, err := fmt.Fprintf(w.out, "%s: %s\n", info.Topic, l); err != nil {
			return err
		}
	}
	if info.Auto != nil {
		_, err := fmt.Fprintf(w.out, "%s: %s\n", info.Topic, autoLine(info.Auto, time.Now()))
		return err
	}
	return nil
}

// autoLine says what an automatic count is set to and wants.
func autoLine(a *delayq.AutoState, now time.Time) string {
	line := a.Settings.String()
	if a.LastChange != nil {
		line += "; last change ended " + wire.Time(*a.LastChange)
	}
	if a.Target == 0 {
		return line + "; wants no change"
	}
	line += fmt.Sprintf("; wants %d since %s", a.Target, wire.Time(*a.Since))
	if d := a.Due.Sub(now); d > 0 {
		return line + fmt.Sprintf(", in %s at the earliest", d.Round(time.Second))
	}
	return line + ", at the next check"
}

// onOff is a flag that is on when given alone (--auto), or set to on or
// off (--auto=off; autoValue lets "--auto off" mean it too).
type onOff struct{ on bool }

func (f *onOff) String() string {
	if f == nil || !f.on {
		return "off"
	}
	return "on"
}

func (f *onOff) Set(s string) error {
	switch s {
	case "on", "true":
		f.on = true
	case "off", "false":
		f.on = false
	default:
		return fmt.Errorf("%q: want on or off", s)
	}
	return nil
}

// IsBoolFlag lets --auto be given without a value.
func (f *onOff) IsBoolFlag() bool { return true }

// autoValue joins "--auto on" and "--auto off" into "--auto=on" and
// "--auto=off", which the flag package reads.
func autoValue(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--auto" || a == "-auto") && i+1 < len(args) && (args[i+1] == "on" || args[i+1] == "off") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// stateKey is what a line per change of state compares: all but the
// settle time left, except whether it is over.
func stateKey(info *delayq.PartitionsInfo) string {
	settled := info.SettleUntil == nil || !time.Now().Before(*info.SettleUntil)
	return fmt.Sprint(info.Count, info.Next, info.Cancelled, len(info.Moved), info.MovedMessages, info.ToMove, settled, idle(info))
}

// partitionsLine says what info says, in a line, as of now.
func partitionsLine(info *delayq.PartitionsInfo, now time.Time) string {
	if info.Next == 0 {
		return fmt.Sprintf("%s: %s", info.Topic, counted(info.Count, "partition"))
	}
	head := fmt.Sprintf("%s: %s, changing to %d since %s", info.Topic, counted(info.Count, "partition"), info.Next, wire.Time(*info.Since))
	if info.Cancelled {
		head = fmt.Sprintf("%s: change to %d partitions cancelled, moving back to %d since %s", info.Topic, info.Count, info.Next, wire.Time(*info.Since))
	}
	left := fmt.Sprintf("about %s left to move (of %d in the sources)", counted(info.ToMove, "message"), info.Left)
	if info.ToMoveExact {
		left = counted(info.ToMove, "message") + " left to move"
	}
	line := fmt.Sprintf("%s: %d of %d source partitions done, %s moved, %s", head, len(info.Moved), len(info.Sources),
		counted(info.MovedMessages, "message"), left)
	if info.SettleUntil != nil {
		if d := info.SettleUntil.Sub(now); d > 0 {
			line += fmt.Sprintf("; settle time %s left", d.Round(time.Second))
		} else {
			line += "; settled"
		}
	}
	if idle(info) {
		return line + "; no consumer runs"
	}
	return line + "; " + counted(info.Consumers, "consumer")
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
