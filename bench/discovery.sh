#!/usr/bin/env bash
# discovery.sh - discovery through etcd, measured (issue 17 section 3):
# how long a replica that registers takes to get its first call, how long
# a replica killed with kill -9 stays in discovery, and how many calls
# fail during each (goal: none).
#
#   bash bench/discovery.sh [--ttl S] [--rate Q] [common options: --json
#        --quick --reps N --build DIR --out DIR --keep]
#
# It starts its own etcd (Debian's etcd-server) on free loopback ports, a
# be-ps primary of one shard registered there (--register, lease TTL --ttl,
# default 3 s), and for each of --reps rounds (default 3):
#   join  a ranker (be-ps-load ranker --naming etcd://..., --rate fetches a
#         second, default 200, 1 s deadline so that only real failures
#         count on this loaded machine) runs; a serving replica starts and
#         registers; join_ms runs from the moment its records were in etcd
#         ("registered" on its stdout) to its first request
#         ("first-request").
#   kill  a ranker runs again; the replica is killed with SIGKILL;
#         removal_ms runs from the kill to its key being gone from etcd
#         (lease expiry: TTL plus etcd's expiry sweep), polled every 20 ms.
# Each phase reports the ranker's fetches and failed fetches. Prints a
# table and, with --json, one line per phase and round; writes
# $out/discovery.json.
set -uo pipefail

prog=discovery
# shellcheck source=bench/paper/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/paper/lib.sh"

ttl=3
rate=200

paper_args "$@"
paper_opts --ttl=ttl --rate=rate
paper_bins be-ps be-ps-load
etcd_bin=${BE_ETCD_BIN:-/usr/bin/etcd}
[ -x "$etcd_bin" ] || paper_die "$etcd_bin missing (apt-get install etcd-server)"
command -v curl >/dev/null || paper_die "curl missing"

# free_port VAR: a loopback TCP port nobody listens on, into VAR.
free_port() {
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done
	printf -v "$1" '%s' "$port"
	port=$((port + 1))
}

free_port cport
free_port pport
curl_url=http://127.0.0.1:$cport
prefix=/be/disc-$$/
uri=etcd://127.0.0.1:$cport$prefix
paper_spawn etcd "$etcd_bin" --name d0 --data-dir "$work/etcd" \
	--listen-client-urls "$curl_url" --advertise-client-urls "$curl_url" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "d0=http://127.0.0.1:$pport" --log-level error
for _ in $(seq 600); do
	curl -s -m 1 "$curl_url/health" 2>/dev/null | grep -q '"health":"true"' && break
	kill -0 "$spawned" 2>/dev/null || { tail -n 3 "$work/etcd.err" >&2; paper_die "etcd exited"; }
	sleep 0.1
done
curl -s -m 1 "$curl_url/health" | grep -q '"health":"true"' || paper_die "etcd did not become healthy"

# key_count KEY: how many keys etcd holds named KEY (0 or 1).
key_count() {
	local k c
	k=$(printf '%s' "$1" | base64 -w0)
	c=$(curl -s -m 2 -X POST "$curl_url/v3/kv/range" -d "{\"key\":\"$k\",\"count_only\":true}" |
		sed -n 's/.*"count":"\([0-9]*\)".*/\1/p')
	echo "${c:-0}"
}

now_ms() { date +%s%3N; }

# line_of NAME WORD: the number after WORD on the stdout of NAME.
line_of() { sed -n "s/^$2 \\([0-9]*\\)$/\\1/p" "$work/$1.out" | head -n1; }

# wait_line NAME WORD SECONDS: until NAME printed WORD.
wait_line() {
	local n=$(($3 * 20))
	while [ -z "$(line_of "$1" "$2")" ] && [ $n -gt 0 ]; do
		sleep 0.05
		n=$((n - 1))
	done
	[ -n "$(line_of "$1" "$2")" ]
}

# ranker_start NAME SECONDS: a ranker over etcd; waits until it fetches.
ranker_start() {
	paper_spawn "$1" "$bin/be-ps-load" ranker --config "$work/model.conf" --naming "$uri" \
		--tables 1 --keys 256 --rate "$rate" --duration "$2" --timeout-us 1000000 --progress --json
	ranker=$spawned
	for _ in $(seq 400); do
		grep -q '^ranker:' "$work/$1.err" 2>/dev/null && return 0
		kill -0 "$ranker" 2>/dev/null || break
		sleep 0.05
	done
	sed 's/^/  /' "$work/$1.err" >&2
	paper_die "the ranker did not start"
}

# ranker_end NAME KEY: wait for it; its fetches and errors into KEY.*
ranker_end() {
	paper_wait_pid "$ranker" 120 || { paper_log "ranker $1 hangs"; failed=1; return; }
	local l
	l=$(grep '^{' "$work/$1.out" | tail -n1)
	[ -n "$l" ] || { paper_log "ranker $1 printed nothing: $(tail -n 2 "$work/$1.err")"; failed=1; return; }
	paper_add "$2.fetches" "$(echo "$l" | jfield ops)"
	paper_add "$2.failed" "$(echo "$l" | jfield errors)"
	[ "$(echo "$l" | jfield errors)" = 0 ] || failed=1
}

failed=0
[ "$quick" = 1 ] && ttl=2
paper_model "$work/model.conf" 1 1 1 16
paper_ps_start p0 "$work/model.conf" --listen tcp://127.0.0.1:0 --register "$uri" --name p0 \
	--ttl "$ttl"
wait_line p0 registered 20 || paper_die "p0 never registered: $(tail -n 3 "$work/p0.err")"
paper_log "etcd on $cport, primary p0 registered; $reps round(s), TTL $ttl s, ranker $rate/s (load $(paper_load))"

for rep in $(seq "$reps"); do
	name=r$rep
	# join
	ranker_start join$rep 6
	sleep 1
	paper_ps_start "$name" "$work/model.conf" --replica --listen tcp://127.0.0.1:0 \
		--register "$uri" --name "$name" --ttl "$ttl"
	rpid=$spawned
	if wait_line "$name" registered 20 && wait_line "$name" first-request 20; then
		paper_add join_ms $(( $(line_of "$name" first-request) - $(line_of "$name" registered) ))
	else
		paper_log "$name: no first request within 20 s"
		failed=1
	fi
	ranker_end join$rep join
	# kill -9
	ranker_start kill$rep $((ttl + 6))
	sleep 1
	key=${prefix}be.ps.0/$name
	[ "$(key_count "$key")" = 1 ] || paper_log "$name: key $key missing before the kill"
	t0=$(now_ms)
	kill -9 "$rpid"
	gone=""
	for _ in $(seq $(( (ttl + 20) * 50 ))); do
		if [ "$(key_count "$key")" = 0 ]; then
			gone=$(now_ms)
			break
		fi
		sleep 0.02
	done
	if [ -n "$gone" ]; then
		paper_add removal_ms $((gone - t0))
	else
		paper_log "$name: still in etcd $((ttl + 20)) s after kill -9"
		failed=1
	fi
	ranker_end kill$rep kill
	paper_log "round $rep: registration to first call $(( $(line_of "$name" first-request) - $(line_of "$name" registered) )) ms, kill -9 to removal ${gone:+$((gone - t0))} ms"
done

paper_table_add event "time ms" "fetches" "failed"
paper_table_add "registration -> first call" "$(paper_spread join_ms)" "$(median join.fetches)" \
	"$(median join.failed)"
paper_table_add "kill -9 -> removed from etcd" "$(paper_spread removal_ms)" "$(median kill.fetches)" \
	"$(median kill.failed)"
paper_json experiment=discovery event=join join_ms:stats=join_ms fetches:stats=join.fetches \
	failed:stats=join.failed ttl_s="$ttl" rate="$rate" reps="$reps"
paper_json experiment=discovery event=kill removal_ms:stats=removal_ms fetches:stats=kill.fetches \
	failed:stats=kill.failed ttl_s="$ttl" rate="$rate" reps="$reps"
notes+=("median (min-max) over $reps round(s); fetches/failed: the ranker during that phase; load $(paper_load)")
paper_table_print
exit $failed
