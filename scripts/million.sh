#!/usr/bin/env bash
# million.sh: a million messages due at one instant (docs/benchmarks.md,
# "A million due at one instant"), under each consumer setting in turn.
#
# In the sandbox of bench.sh (two redis-server backends and nutcracker),
# it runs "delayq bench --workload burst --n N" through the proxy with
# each setting of SETTINGS, RUNS times in turn, one line a run, and last,
# per setting, the medians of the drain, of the lateness from the due
# instant to each handler's start (p50, p99 and the last start) and of
# the CPU a message (one process only), and the most duplicates of any
# run. A run whose messages do not all arrive fails the script: every
# line is a run with nothing lost.
#
# Settings:
#   defaults   one consumer at the library's defaults (32 handlers, the
#              bench's)
#   ahead      everything claimed ahead: --prefetch above N, --poll 30s
#   ahead-128  the same with --concurrency 128
#   procs-2    two "delayq sub" processes at the defaults
#   procs-4    four
#
# Usage: scripts/million.sh   (make bench-million)
# Env:   N         messages a run (default 1000000; a run takes about a
#                  minute and a half, most of it the enqueue)
#        RUNS      runs per setting (default 1)
#        SETTINGS  the settings to run (default all five, in that order)
#        DELAYQ    the binary (default bin/delayq)
set -euo pipefail

N=${N:-1000000}
RUNS=${RUNS:-1}
SETTINGS=${SETTINGS:-defaults ahead ahead-128 procs-2 procs-4}
root=$(cd "$(dirname "$0")/.." && pwd)

flags() {
	local ahead=(--prefetch $((N + N / 10)) --poll 30s)
	case $1 in
	defaults) ;;
	ahead) echo "${ahead[@]}" ;;
	ahead-128) echo "${ahead[@]}" --concurrency 128 ;;
	procs-2) echo --consumer-procs 2 ;;
	procs-4) echo --consumer-procs 4 ;;
	*)
		echo "million.sh: unknown setting \"$1\" in SETTINGS; known: defaults ahead ahead-128 procs-2 procs-4" >&2
		return 1
		;;
	esac
}
for s in $SETTINGS; do flags "$s" >/dev/null; done

SANDBOX=million
# shellcheck source=sandbox.sh
source "$root/scripts/sandbox.sh"
be=$(IFS=,; echo "${backends[*]}")

out="$tmp/runs"
for ((r = 1; r <= RUNS; r++)); do
	for s in $SETTINGS; do
		# shellcheck disable=SC2046 # the flags are words
		line=$("$DELAYQ" bench --addr "$proxy" --workload burst --n "$N" --backends "$be" $(flags "$s") | tail -1)
		echo "setting=$s $line"
		echo "$s $line" >>"$out"
	done
done

for s in $SETTINGS; do
	lines=$(grep "^$s " "$out")
	echo "setting=$s n=$N runs=$RUNS stat=median drain_rate=$(values drain_rate <<<"$lines" | median)" \
		"lateness_ms p50=$(values p50 <<<"$lines" | median) p99=$(values p99 <<<"$lines" | median) last_start=$(values max <<<"$lines" | median)" \
		"client_cpu_us_per_msg=$(values client_cpu_us_per_msg <<<"$lines" | median) backend_cpu_us_per_msg=$(values backend_cpu_us_per_msg <<<"$lines" | median)" \
		"duplicates_max=$(values duplicates <<<"$lines" | sort -n | tail -1)"
done
