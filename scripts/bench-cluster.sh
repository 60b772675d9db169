#!/usr/bin/env bash
# bench-cluster.sh: delayq through a Redis Cluster beside Twemproxy, in one
# run on one machine (docs/benchmarks.md, "Through a Redis Cluster").
#
# Starts Twemproxy (no hash_tag) over three redis-server backends, and a
# Redis Cluster of three masters (no replicas, made with redis-cli
# --cluster create), all on loopback with appendonly off. Then, RUNS times
# (default 3), alternating the targets: "delayq bench --workload enqueue"
# (N_ENQ messages, default 20000, generated ids) and "--workload burst"
# (N_BURST, default 200000) on a topic of 16 partitions. On the cluster
# each burst run also prints each master's share of the commands the
# masters ran during it (INFO stats total_commands_processed, commands
# inside scripts included): workload=share master=ADDR pct=P.
#
# Usage: scripts/bench-cluster.sh   (make bench-cluster)
# Env:   DELAYQ  path of the delayq binary (default: bin/delayq of the repo)
#        RUNS=3  N_ENQ=20000  N_BURST=200000
set -euo pipefail

SANDBOX=bench-cluster
BACKENDS=3
source "$(dirname "$0")/sandbox.sh"
command -v redis-cli >/dev/null || die "redis-cli not found (apt-get install redis-tools)"
RUNS=${RUNS:-3} N_ENQ=${N_ENQ:-20000} N_BURST=${N_BURST:-200000}

masters=()
for i in 0 1 2; do
	free_port
	port=$PORT
	free_port
	bus=$PORT
	mkdir -p "$tmp/node$i"
	"$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--cluster-enabled yes --cluster-port "$bus" --cluster-config-file "$tmp/node$i/nodes.conf" \
		--dir "$tmp/node$i" --logfile "$tmp/node$i/redis.log" >/dev/null 2>&1 &
	pids+=($!)
	wait_ready "cluster node $i" "$port" "$!" "$tmp/node$i/redis.log"
	masters+=("127.0.0.1:$port")
done
TERM=dumb redis-cli --cluster create "${masters[@]}" --cluster-yes >"$tmp/create.log" 2>&1 ||
	{ cat "$tmp/create.log" >&2; die "redis-cli --cluster create failed"; }
for _ in {1..100}; do
	ok=0
	for m in "${masters[@]}"; do
		redis-cli -h "${m%:*}" -p "${m##*:}" cluster info | grep -q "cluster_state:ok" && ok=$((ok + 1))
	done
	((ok == 3)) && break
	sleep 0.1
done
((ok == 3)) || die "the cluster is not ok after 10 s"
seeds=$(IFS=,; echo "${masters[*]}")
say "Redis Cluster of 3 masters: $seeds"

# processed MASTER: its total_commands_processed.
processed() {
	redis-cli -h "${1%:*}" -p "${1##*:}" info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'
}

bench() {
	"$DELAYQ" bench --partitions 16 "$@" 2>&1 | grep "workload=" | grep -v "stat=" || true
}

for ((r = 0; r < RUNS; r++)); do
	bench --addr "$proxy" --workload enqueue --n "$N_ENQ" | sed 's/^/target=twemproxy /'
	bench --cluster --addr "$seeds" --workload enqueue --n "$N_ENQ" | sed 's/^/target=cluster /'
	bench --addr "$proxy" --workload burst --n "$N_BURST" | sed 's/^/target=twemproxy /'
	before=()
	for m in "${masters[@]}"; do before+=("$(processed "$m")"); done
	bench --cluster --addr "$seeds" --workload burst --n "$N_BURST" | sed 's/^/target=cluster /'
	total=0
	ran=()
	for i in "${!masters[@]}"; do
		ran[i]=$(($(processed "${masters[i]}") - before[i]))
		total=$((total + ran[i]))
	done
	for i in "${!masters[@]}"; do
		echo "target=cluster workload=share run=$r master=${masters[i]} commands=${ran[i]} pct=$((100 * ran[i] / (total > 0 ? total : 1)))"
	done
done
