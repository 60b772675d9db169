// Command delayq is the command line of the delayq delay queue: it
// enqueues messages, consumes them, inspects and manages them.
//
// Usage:
//
//	delayq <command> [flags]
//
// Run "delayq help" for the list of commands and "delayq <command> -h" for
// the flags of one. Exit status: 0 on success, 1 on error, 2 on a usage
// error, 3 when a delete or reschedule came after a delivery started.
//
// Files:
//
//   - main.go: main, the list of commands and their dispatch, exit statuses
//   - command.go: the flags every command shares, their defaults from the
//     environment, usage errors
//   - flags.go: flag types: durations, times, lists, due times (dueFlags)
//   - subcommand.go: commands made of subcommands, such as "dead list"
//   - plural.go: nouns after counts (plural, counted)
//   - wait.go: a wait that ends with its context (waitFor)
//   - send.go: send: one message, or the JSON lines of --stdin in batches
//   - duplicate.go: send's --on-duplicate and --max-wait
//   - sub.go: sub: a consumer that prints one JSON line per delivery
//   - messages.go: get, delete, reschedule and stats
//   - dead.go: dead list, requeue and purge
//   - pause.go: pause and resume
//   - limits.go: limits
//   - unique_for.go: unique-for
//   - partitions.go: partitions: the count, a change of it (--set,
//     --cancel, --wait), the automatic count
//   - schedule.go: schedule add, list, pause, resume and delete
//   - schedule_replace.go: schedule add --replace, and what it changed
//   - topic.go: topic list and topic delete
//   - export.go: export, import, and delete --in
//   - export_schedules.go: the schedule and controls lines of an export:
//     what export, import and delete --in say and do about them
//   - output.go: the file export --out writes
//   - worker.go: worker: the consumers of a TOML file, its HTTP server,
//     its shutdown
//   - tracing.go: the worker's OpenTelemetry tracer provider
//   - ui.go: ui: the web dashboard on its own
//   - version.go: version
//   - doctor.go: doctor: its scratch keys, its checks' run, its cleanup
//   - doctor_commands.go: the checks: every shape of the portable set
//   - doctor_replies.go: the replies the checks expect
//   - doctor_rtt.go: the round trips' times
//   - doctor_backends.go: what doctor reads straight from each backend
//     (--backends)
//   - doctor_clocks.go: the hints about clocks that look off
//   - doctor_cluster.go: doctor --cluster: the checks on each master, every
//     node's settings, the partitions of each topic per master
//   - doctor_hints.go: the hints about the deployment
//   - doctor_report.go: the report, as text or --json
//   - bench.go: bench: its flags, workloads and runs
//   - bench_topic.go: a run's topic, created and dropped through
//     internal/store
//   - bench_produce.go: the producers: single, async or batch enqueues
//   - bench_delivery.go: the consumers and the lateness of each delivery
//   - bench_enqueue.go: the enqueue workload
//   - bench_burst.go: the burst workload
//   - bench_spread.go: the spread workload
//   - bench_duenow.go: the due-now workload
//   - bench_limited.go: the limited workload
//   - bench_autoscale.go: the autoscale workload
//   - bench_export.go: the export workload
//   - bench_backends.go: sums of what each backend reports (sumBackends)
//   - cputime_unix.go: the CPU time of this process (Unix)
//   - cputime_other.go: no CPU time on other systems
//   - steal.go: the CPU time the hypervisor took (steal), from /proc/stat
package main
