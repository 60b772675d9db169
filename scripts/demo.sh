#!/usr/bin/env bash
# demo.sh: delayq behind Twemproxy in one minute.
#
# Starts two redis-server backends and nutcracker (Twemproxy, no hash_tag,
# auto_eject_hosts: false) on free loopback ports in a temporary directory,
# runs "delayq sub" against the proxy, sends five messages due in 1..5 s, and
# shows each delivery as it happens with its lateness. Then it runs the
# worker daemon, fills a few topics (orders due over the next hour, dead
# payments) and ends by printing the URL of the worker's web dashboard: in
# a terminal (or with DEMO_WAIT=1) everything keeps running until Ctrl-C so
# that you can browse it. Everything is stopped and removed on exit, Ctrl-C
# included.
#
# Usage: scripts/demo.sh        (make demo builds bin/delayq first)
# Env:   DELAYQ     path of the delayq binary (default: bin/delayq of the repo)
#        DEMO_WAIT  set: keep the servers and the dashboard up until Ctrl-C,
#                   even without a terminal
set -euo pipefail


root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
topic=demo
count=5
deadline_s=30
SANDBOX=demo
# shellcheck source=sandbox.sh
source "$root/scripts/sandbox.sh"

out=$tmp/deliveries.jsonl
: >"$out"
say "starting a consumer: $DELAYQ sub --addr $proxy --topic $topic"
"$DELAYQ" sub --addr "$proxy" --topic "$topic" >"$out" 2>"$tmp/sub.err" &
sub_pid=$!
pids+=("$sub_pid")

say "sending $count messages due in 1..$count s"
for i in $(seq 1 "$count"); do
	id=$("$DELAYQ" send --addr "$proxy" --topic "$topic" --id "demo-$i" --delay "${i}s" --body "hello #$i")
	printf '    sent %s (due in %ss)\n' "$id" "$i"
done

# show LINE: print one delivery line of sub as "delivered ID due T at T (late Xms)".
field() { [[ $1 =~ \"$2\":\"([^\"]*)\" ]] && echo "${BASH_REMATCH[1]}"; }
show() {
	local id due at d a late=""
	id=$(field "$1" id) || id="?"
	due=$(field "$1" due) || due="?"
	at=$(field "$1" delivered_at) || at="?"
	if d=$(date -u -d "$due" +%s%N 2>/dev/null) && a=$(date -u -d "$at" +%s%N 2>/dev/null); then
		local us=$(((a - d) / 1000))
		late=$(printf ' (late %d.%03d ms)' $((us / 1000)) $((us % 1000)))
	fi
	local due_s at_s
	due_s=$(date -u -d "$due" +%H:%M:%S.%3N 2>/dev/null) || due_s=$due
	at_s=$(date -u -d "$at" +%H:%M:%S.%3N 2>/dev/null) || at_s=$at
	printf '    delivered %s  due %s  at %s%s\n' "$id" "$due_s" "$at_s" "$late"
}

say "waiting for $count deliveries (at most ${deadline_s}s)"
shown=0
end=$((SECONDS + deadline_s))
while ((shown < count)); do
	if ((SECONDS >= end)); then
		cat "$tmp/sub.err" >&2
		die "only $shown of $count deliveries after ${deadline_s}s"
	fi
	if ! kill -0 "$sub_pid" 2>/dev/null; then
		cat "$tmp/sub.err" >&2
		die "the consumer exited"
	fi
	# Print the lines that arrived since the last look (complete lines only).
	mapfile -t new < <(tail -n +"$((shown + 1))" "$out")
	for line in "${new[@]}"; do
		[[ $line == *\} ]] || break
		show "$line"
		shown=$((shown + 1))
	done
	sleep 0.1
done

say "all $count messages delivered; the queue now:"
"$DELAYQ" stats --addr "$proxy" --topic "$topic" | awk 'NR == 1 || $1 == "total"' | sed 's/^/    /'

# Part two: the worker daemon, configured by the shipped config.toml (its
# [redis] addr and [http] listen are overridden for this sandbox). Its
# "reminders" topic runs a command per message, which appends to a log.
free_port
http_port=$PORT
export REMINDERS_LOG=$tmp/reminders.log
: >"$REMINDERS_LOG"
say "starting the worker: $DELAYQ worker --config config.toml --addr $proxy --listen 127.0.0.1:$http_port"
"$DELAYQ" worker --config "$root/config.toml" --addr "$proxy" --listen "127.0.0.1:$http_port" \
	>"$tmp/worker.out" 2>"$tmp/worker.err" &
pids+=($!)
worker_pid=$!

# http_get PATH: the status line of GET PATH on the worker (bash /dev/tcp, no curl needed).
http_get() {
	local line=""
	{
		exec 4<>"/dev/tcp/127.0.0.1/$http_port" &&
			printf 'GET %s HTTP/1.0\r\nHost: demo\r\n\r\n' "$1" >&4 &&
			IFS= read -r -t 2 line <&4
		exec 4>&- 4<&-
	} 2>/dev/null || true
	echo "$line"
}
for _ in {1..100}; do
	[[ $(http_get /readyz) == *" 200 "* ]] && break
	kill -0 "$worker_pid" 2>/dev/null || { cat "$tmp/worker.err" >&2; die "the worker exited"; }
	sleep 0.1
done
[[ $(http_get /readyz) == *" 200 "* ]] || { cat "$tmp/worker.err" >&2; die "the worker is not ready"; }
say "worker ready (GET /readyz: 200); sending 3 reminders due in 1..3 s"
for i in 1 2 3; do
	"$DELAYQ" send --addr "$proxy" --topic reminders --id "reminder-$i" --delay "${i}s" --body "call home #$i" >/dev/null
done
end=$((SECONDS + deadline_s))
while (($(wc -l <"$REMINDERS_LOG") < 3)); do
	((SECONDS < end)) || { cat "$tmp/worker.err" >&2; die "the reminders were not delivered"; }
	sleep 0.1
done
sed 's/^/    /' "$REMINDERS_LOG"
say "metrics: $(http_get /metrics | tr -d '\r'), e.g."
{
	exec 4<>"/dev/tcp/127.0.0.1/$http_port"
	printf 'GET /metrics HTTP/1.0\r\nHost: demo\r\n\r\n' >&4
	grep -E '^delayq_(acked_total|partitions_owned)\{topic="reminders"' <&4 | sed 's/^/    /'
	exec 4>&- 4<&-
} 2>/dev/null || true

# Part three: the web dashboard, which the worker serves at /ui/ on the same
# address (no sign-in here: the sample config.toml sets no [http] token).
say "filling the dashboard: 240 orders due over the next hour, 3 payments that fail"
# Ids from order-1001: the README's examples (order-42) run on the demo
# without meeting one of these as a duplicate.
for i in $(seq 1 240); do
	printf '{"id":"order-%d","body":"{\\"order\\":%d}","delay_ms":%d}\n' $((1000 + i)) $((1000 + i)) $(((90 + i * 15) * 1000))
done | "$DELAYQ" send --addr "$proxy" --topic orders --stdin >/dev/null
for i in 1 2 3; do
	"$DELAYQ" send --addr "$proxy" --topic payments --id "payment-$i" --body "{\"payment\":$i}" >/dev/null
done
# One attempt each, failed on purpose: they land in the dead set.
"$DELAYQ" sub --addr "$proxy" --topic payments --max-attempts 1 --fail . --count 3 --timeout 20s \
	>/dev/null 2>"$tmp/payments.err" || { cat "$tmp/payments.err" >&2; die "the payments consumer failed"; }
"$DELAYQ" stats --addr "$proxy" --topic payments | awk 'NR == 1 || $1 == "total"' | sed 's/^/    /'

url="http://127.0.0.1:$http_port/ui/"
if [[ -n ${DEMO_WAIT:-} ]] || [[ -t 0 && -t 1 ]]; then
	say "done; the servers keep running until Ctrl-C. The dashboard:"
	say "dashboard: $url"
	while kill -0 "$worker_pid" 2>/dev/null; do
		sleep 1
	done
	cat "$tmp/worker.err" >&2
	die "the worker exited"
fi
say "done (the servers stop as the script exits: run it in a terminal, or with DEMO_WAIT=1, to browse it)"
say "dashboard: $url"
say() { :; } # a quiet cleanup: the URL is the last line
