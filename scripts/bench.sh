#!/usr/bin/env bash
# bench.sh: the benchmarks of DESIGN.md section 8 in a loopback sandbox.
#
# Starts two redis-server backends and nutcracker (no hash_tag), then runs
# "delayq bench --workload all" once directly against one backend and once
# through the proxy, with memory measured on the backends. One line per run.
#
# Usage: scripts/bench.sh [extra delayq bench flags]   (make bench)
# Env:   DELAYQ   path of the delayq binary (default: bin/delayq of the repo)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SANDBOX=bench
# shellcheck source=sandbox.sh
source "$root/scripts/sandbox.sh"

say "machine: $(nproc) cores, $(uname -m), $(redis-server --version | awk '{print $3}'), $("$nutcracker" --version 2>&1 | head -1)"
for target in direct twemproxy; do
	if [[ $target == direct ]]; then
		addr=${backends[0]} mem=${backends[0]}
	else
		addr=$proxy mem=$(IFS=,; echo "${backends[*]}")
	fi
	say "$target: $addr"
	"$DELAYQ" bench --addr "$addr" --backends "$mem" --workload enqueue "$@" | sed "s/^/target=$target /"
	"$DELAYQ" bench --addr "$addr" --workload enqueue --async "$@" | sed "s/^/target=$target /"
	"$DELAYQ" bench --addr "$addr" --backends "$mem" --workload enqueue --batch "$@" | sed "s/^/target=$target /"
	"$DELAYQ" bench --addr "$addr" --workload burst "$@" | sed "s/^/target=$target /"
	"$DELAYQ" bench --addr "$addr" --workload spread "$@" | sed "s/^/target=$target /"
done
say "done"
