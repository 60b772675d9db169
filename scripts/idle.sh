#!/usr/bin/env bash
# idle.sh: the idle workload of docs/benchmarks.md, delayq beside asynq in
# one run on one machine.
#
# For each fleet size W (default 1 4 8): W "delayq worker" processes, each
# running Q topics (default 10) of P partitions (default 16) with a no-op
# exec handler and the defaults otherwise, through Twemproxy over three
# redis-server backends (no hash_tag); then W asynq servers with their
# defaults (../shared/peerbench -workload idle), each serving Q empty
# queues, straight on one redis-server. After the fleet settles, the Redis
# commands the servers process during D seconds (default 30), summed over
# their INFO total_commands_processed (commands inside scripts count), give
# commands per second. One line per fleet size:
#   workload=idle workers=W topics=Q partitions=P secs=D delayq_cmds_per_sec=N asynq_cmds_per_sec=N ratio=X
#
# Usage: scripts/idle.sh   (make bench-idle)
# Env:   DELAYQ   path of the delayq binary (default: bin/delayq of the repo)
#        WORKERS="1 4 8"  Q=10  P=16  D=30  SETTLE=15 (seconds before measuring)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
DELAYQ=${DELAYQ:-$root/bin/delayq}
WORKERS=${WORKERS:-"1 4 8"} Q=${Q:-10} P=${P:-16} D=${D:-30} SETTLE=${SETTLE:-15}
peer=$root/../shared/peerbench
export PATH=$PATH:/usr/sbin

say() { echo "# $*" >&2; }
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
server() {
	redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >/dev/null 2>&1 &
	pids+=($!)
}
backends=() ports=()
for _ in 1 2 3; do
	p=$(freeport)
	server "$p"
	ports+=("$p") backends+=("127.0.0.1:$p")
done
direct=$(freeport)
server "$direct"
proxy=$(freeport)
{
	echo "pool:"
	echo "  listen: 127.0.0.1:$proxy"
	echo "  hash: fnv1a_64"
	echo "  distribution: ketama"
	echo "  redis: true"
	echo "  auto_eject_hosts: false"
	echo "  timeout: 5000"
	echo "  servers:"
	for b in "${backends[@]}"; do echo "    - $b:1"; done
} >"$tmp/nc.yml"
nutcracker -c "$tmp/nc.yml" -o "$tmp/nc.log" -s "$(freeport)" -a 127.0.0.1 &
pids+=($!)
sleep 1

asynq=""
if [[ -d $peer ]] && (cd "$peer" && go build -o "$tmp/peerbench" .) 2>"$tmp/peer.log"; then
	asynq=$tmp/peerbench
else
	say "peer: ../shared/peerbench not found or not built: no asynq figures"
fi

# total PORT...: the sum of total_commands_processed over the servers.
total() {
	local sum=0 n
	for p in "$@"; do
		n=$(redis-cli -p "$p" info stats | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p')
		sum=$((sum + n))
	done
	echo "$sum"
}
flush() { for p in "${ports[@]}" "$direct"; do redis-cli -p "$p" flushall >/dev/null; done; }
# rate PORT...: commands per second processed over D seconds.
rate() {
	local a b
	a=$(total "$@")
	sleep "$D"
	b=$(total "$@")
	echo $(((b - a - ${#@} * 2) / D)) # less the INFO calls of this script
}

config() { # config W: the config file of worker W
	local f=$tmp/worker$1.toml
	{
		echo "[redis]"
		echo "addr = \"127.0.0.1:$proxy\""
		echo "[worker]"
		echo "id = \"idle-$1\""
		echo "[log]"
		echo "level = \"warn\""
		for t in $(seq 1 "$Q"); do
			echo "[[topic]]"
			echo "name = \"idle-$t\""
			echo "partitions = $P"
			echo "[topic.handler]"
			echo "type = \"exec\""
			echo "command = [\"true\"]"
		done
	} >"$f"
	echo "$f"
}

for w in $WORKERS; do
	flush
	fleet=()
	for i in $(seq 1 "$w"); do
		"$DELAYQ" worker --config "$(config "$i")" 2>>"$tmp/workers.log" &
		fleet+=($!)
	done
	pids+=("${fleet[@]}")
	sleep "$SETTLE"
	d=$(rate "${ports[@]}")
	kill -TERM "${fleet[@]}" 2>/dev/null || true
	wait "${fleet[@]}" 2>/dev/null || true
	a=""
	if [[ -n $asynq ]]; then
		fleet=()
		for i in $(seq 1 "$w"); do
			"$asynq" -redis "127.0.0.1:$direct" -workload idle -queues "$Q" -d "$((SETTLE + D + 10))s" >/dev/null 2>>"$tmp/peer.log" &
			fleet+=($!)
		done
		pids+=("${fleet[@]}")
		sleep "$SETTLE"
		a=$(rate "$direct")
		kill "${fleet[@]}" 2>/dev/null || true
		wait "${fleet[@]}" 2>/dev/null || true
	fi
	line="workload=idle workers=$w topics=$Q partitions=$P secs=$D delayq_cmds_per_sec=$d"
	if [[ -n $a ]]; then
		line+=" asynq_cmds_per_sec=$a ratio=$(python3 -c "print('%.2f' % ($d / max($a, 1)))")"
	fi
	echo "$line"
done
