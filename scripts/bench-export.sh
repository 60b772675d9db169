#!/usr/bin/env bash
# bench-export.sh: the export and import figures of docs/benchmarks.md.
#
# Starts three redis-server backends and nutcracker (no hash_tag) on
# loopback, then runs "delayq bench --workload export" through the proxy,
# with the backends' CPU and memory read straight from them: 1,000,000
# messages (256-byte bodies, given ids) written with EnqueueBatch, exported
# unpaced to a file, exported with the default pacing, imported into
# another topic.
#
# Usage: scripts/bench-export.sh [extra delayq bench flags, e.g. --n 100000]
# Env:   DELAYQ   path of the delayq binary (default: bin/delayq of the repo)
set -euo pipefail
SANDBOX=bench-export
BACKENDS=3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=sandbox.sh
source "$root/scripts/sandbox.sh"

say "machine: $(nproc) cores, $(uname -m), $(redis-server --version | awk '{print $3}'), $("$nutcracker" --version 2>&1 | head -1)"
"$DELAYQ" bench --addr "$proxy" --backends "$(IFS=,; echo "${backends[*]}")" --workload export --batch-size 500 "$@" |
	sed "s/^/target=twemproxy backends=${#backends[@]} /"
