#!/usr/bin/env bash
# against.sh: the burst drain of this tree against an older commit's, in
# one session (docs/benchmarks.md, "Against the engine before flow
# control").
#
# Builds BASE (default a1eb2c5, the last commit before flow control,
# duplicate policies and the start check) in a temporary git worktree,
# with scripts/against/BASE.patch applied when there is one: for a1eb2c5,
# the lock-free recorder of this tree's bench and the drain's CPU, so
# that both binaries measure the same way. Then, in the sandbox of
# bench.sh (two redis-server backends and nutcracker), it runs
# "delayq bench --workload burst" through the proxy at the defaults, each
# size with BASE's binary and this tree's in turn, RUNS times, one line a
# run, and last, per binary and size, the medians of the drain and of
# the CPU a message (the consumer's and the backends', from the due
# instant to the last start) with the range of the drain, and the ratio
# of this tree's median drain to BASE's.
#
# Usage: scripts/against.sh   (make bench-against)
# Env:   BASE    the commit to compare with (default a1eb2c5)
#        RUNS    runs per binary and size (default 11)
#        SIZES   burst sizes (default "20000 200000"; 1000000 takes
#                about a minute and a half a run)
#        DELAYQ  this tree's binary (default bin/delayq)
set -euo pipefail

BASE=${BASE:-a1eb2c5}
RUNS=${RUNS:-11}
SIZES=${SIZES:-20000 200000}
root=$(cd "$(dirname "$0")/.." && pwd)

base_bin=$(mktemp -d "${TMPDIR:-/tmp}/delayq-base.XXXXXX")
work="$base_bin/src"
git -C "$root" worktree add --detach --force "$work" "$BASE" >/dev/null
remove_base() {
	git -C "$root" worktree remove --force "$work" || true
	rm -rf "$base_bin"
}
trap remove_base EXIT
patch="$root/scripts/against/$BASE.patch"
if [[ -f $patch ]]; then
	git -C "$work" apply "$patch"
fi
(cd "$work" && go build -o "$base_bin/delayq" ./cmd/delayq)

SANDBOX=against
# shellcheck source=sandbox.sh
source "$root/scripts/sandbox.sh"
# sandbox.sh's trap replaced ours, and its cleanup exits with the
# script's status: remove the worktree first, keeping that status.
trap 'status=$?; remove_base; (exit "$status"); cleanup' EXIT
be=$(IFS=,; echo "${backends[*]}")

out="$tmp/runs"
for ((r = 1; r <= RUNS; r++)); do
	for n in $SIZES; do
		for which in base tree; do
			bin=$DELAYQ
			[[ $which == base ]] && bin=$base_bin/delayq
			line=$("$bin" bench --addr "$proxy" --workload burst --n "$n" --backends "$be" | tail -1)
			echo "binary=$which $line"
			echo "$which $n $line" >>"$out"
		done
	done
done

for n in $SIZES; do
	declare -A drain=()
	for which in base tree; do
		lines=$(grep "^$which $n " "$out")
		drain[$which]=$(values drain_rate <<<"$lines" | median)
		echo "binary=$which commit=$([[ $which == base ]] && echo "$BASE" || git -C "$root" rev-parse --short HEAD) n=$n runs=$RUNS stat=median" \
			"drain_rate=${drain[$which]} drain_min=$(values drain_rate <<<"$lines" | sort -n | head -1) drain_max=$(values drain_rate <<<"$lines" | sort -n | tail -1)" \
			"client_cpu_us_per_msg=$(values client_cpu_us_per_msg <<<"$lines" | median) backend_cpu_us_per_msg=$(values backend_cpu_us_per_msg <<<"$lines" | median)"
	done
	echo "n=$n drain_ratio=$(awk -v t="${drain[tree]}" -v b="${drain[base]}" 'BEGIN {printf "%.2f", t / b}') (this tree / $BASE)"
done
