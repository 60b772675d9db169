# sandbox.sh: sourced by demo.sh and the bench scripts. Starts two
# redis-server backends and nutcracker (Twemproxy, no hash_tag,
# auto_eject_hosts: false) on free loopback ports in a temporary
# directory, and sets:
#   tmp       the directory
#   backends  the backends' host:port
#   proxy     nutcracker's host:port
#   pids      the processes, stopped (and tmp removed) on exit, Ctrl-C included
# It also defines values NAME (the value of NAME= in each line of stdin)
# and median (of the numbers on stdin, one a line; "-" for none), for
# the scripts' summaries of bench lines.
# Expects: SANDBOX (a name for messages and the temp dir); BACKENDS, the
# number of backends, may be set (default 2).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DELAYQ=${DELAYQ:-$root/bin/delayq}

if [[ -t 1 ]]; then
	say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
	say() { printf '==> %s\n' "$*"; }
fi
die() { printf '%s: %s\n' "$SANDBOX" "$*" >&2; exit 1; }
values() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# find_bin NAME: the path of a server binary; Debian puts nutcracker in /usr/sbin.
find_bin() {
	local p
	if p=$(command -v "$1" 2>/dev/null); then echo "$p"; return; fi
	for p in /usr/sbin/"$1" /usr/local/sbin/"$1" /usr/local/bin/"$1"; do
		if [[ -x $p ]]; then echo "$p"; return; fi
	done
	die "$1 not found: run 'make deps' (apt-get install redis-server nutcracker)"
}

[[ -x $DELAYQ ]] || die "$DELAYQ not found: run 'make build' first"
redis_server=$(find_bin redis-server)
nutcracker=$(find_bin nutcracker)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/delayq-$SANDBOX.XXXXXX")
pids=()

cleanup() {
	local status=$?
	trap - EXIT
	trap '' INT TERM # a second Ctrl-C must not leave servers behind
	say "cleaning up"
	# The consumer first (SIGTERM: it stops gracefully), then the servers.
	local p
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		p=${pids[i]}
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		# Wait up to 5 s for each, then SIGKILL.
		for _ in {1..50}; do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'echo; say "interrupted"; exit 130' INT
trap 'echo; say "terminated"; exit 143' TERM

# free_port: set PORT to a loopback port nothing listens on and not handed
# out before (not run in $(...): it must remember the ports it gave).
used_ports=" "
free_port() {
	local p
	for _ in {1..200}; do
		p=$((20000 + RANDOM % 12000)) # below the ephemeral range (32768-), where a client socket may hold the port
		[[ $used_ports == *" $p "* ]] && continue
		if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used_ports+="$p "
			PORT=$p
			return
		fi
	done
	die "no free port found"
}

# ping PORT: true when a RESP PING on 127.0.0.1:PORT answers +PONG (works
# for redis-server and nutcracker; no redis-cli needed).
resp_ping() {
	local reply=""
	{
		exec 3<>"/dev/tcp/127.0.0.1/$1" &&
			printf '*1\r\n$4\r\nPING\r\n' >&3 &&
			IFS= read -r -t 1 reply <&3
		exec 3>&- 3<&-
	} 2>/dev/null || true
	[[ $reply == "+PONG"* ]]
}

# wait_ready NAME PORT PID LOG: poll until PORT answers PING, for 10 s.
wait_ready() {
	for _ in {1..100}; do
		if resp_ping "$2"; then return; fi
		if ! kill -0 "$3" 2>/dev/null; then
			tail -n 20 "$4" >&2 || true
			die "$1 exited before it was ready"
		fi
		sleep 0.1
	done
	tail -n 20 "$4" >&2 || true
	die "$1 not ready on port $2 after 10 s"
}

say "working in $tmp"

backends=()
for ((i = 0; i < ${BACKENDS:-2}; i++)); do
	free_port
	port=$PORT
	mkdir -p "$tmp/redis$i"
	"$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--dir "$tmp/redis$i" --logfile "$tmp/redis$i/redis.log" >/dev/null 2>&1 &
	pids+=($!)
	wait_ready "redis-server $i" "$port" "$!" "$tmp/redis$i/redis.log"
	backends+=("127.0.0.1:$port")
	say "redis-server backend $i listening on 127.0.0.1:$port"
done

free_port
proxy_port=$PORT
free_port
stats_port=$PORT
cat >"$tmp/nutcracker.yml" <<EOF
delayq:
  listen: 127.0.0.1:$proxy_port
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 3000
  servers:
$(for i in "${!backends[@]}"; do echo "   - ${backends[i]}:1 s$i"; done)
EOF
"$nutcracker" -c "$tmp/nutcracker.yml" -o "$tmp/nutcracker.log" \
	-s "$stats_port" -a 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
wait_ready nutcracker "$proxy_port" "$!" "$tmp/nutcracker.log"
proxy=127.0.0.1:$proxy_port
say "nutcracker (Twemproxy) on $proxy in front of ${backends[*]}: no hash_tag, auto_eject_hosts: false"
sed 's/^/    /' "$tmp/nutcracker.yml"
