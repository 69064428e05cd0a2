#!/usr/bin/env bash
# verbs-in-guest.sh - the verbs transport against perftest's ib_write_lat,
# both inside the Soft-RoCE guest (test/rxe/rxe-run), in one run.
#
#   bash bench/verbs-in-guest.sh [--reps N] [--iters N] [--build DIR] [--json]
#
# On the host it builds be-perf (with verbs) and re-runs itself inside the
# guest, where, --reps times each (default 5), interleaved:
#   ib_write_lat -R   64 B, rdma_cm connection setup (as our verbs does)
#   ib_write_lat      64 B, out-of-band (TCP) setup
#   be-perf raw-lat --transport verbs --size 64   (peer on $BE_RXE_IP0)
#   be-perf raw-lat ... --write-poll: plain WRITE + spinning on the last
#                     byte, ib_write_lat's own method (for information)
#   ib_send_lat -R    64 B SEND/RECV: like our WRITE_WITH_IMM, the receiver
#                     takes a completion per message (ib_write_lat only
#                     spins on the buffer's last byte); for information
# and prints medians (min-max) of the one-way latency (RTT/2: perftest's
# t_typical, our p50) and the ratio be / ib_write_lat -R; target <= 1.2.
# Both ends run in the guest on rxe0; processes are not pinned (rxe does
# its work in softirq context on the guest's two vCPUs).
# --json: one JSON object per measurement and one for the ratio.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=5
iters=5000
build=""
json=0
inside=0
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) reps=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--json) json=1; shift ;;
	--inside) inside=1; shift ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "verbs-in-guest: unknown option '$1'" >&2; exit 2 ;;
	esac
done

if [ $inside -eq 0 ]; then
	runner="$root/test/rxe/rxe-run"
	if [ ! -x "$runner" ]; then
		echo "verbs-in-guest: $runner not found (the Soft-RoCE harness)" >&2
		exit 2
	fi
	for t in ib_write_lat cmake; do
		if ! command -v $t >/dev/null 2>&1; then
			echo "verbs-in-guest: missing $t (apt-get install -y perftest cmake)" >&2
			exit 2
		fi
	done
	if [ -z "$build" ]; then
		build="$root/build-bench"
		echo "verbs-in-guest: building be-perf (Release) in $build" >&2
		cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF \
			-DBE_WITH_VERBS=ON >/dev/null && cmake --build "$build" -j 2 --target be-perf \
			>/dev/null || { echo "verbs-in-guest: building be-perf failed" >&2; exit 2; }
	fi
	args=(--inside --reps "$reps" --iters "$iters" --build "$build")
	[ $json -eq 1 ] && args+=(--json)
	# Emulated (TCG) guests are slow on a busy host: allow 3 minutes per
	# repetition of the five measurements.
	exec "$runner" --timeout $((300 + reps * 180)) --cwd "$root" -- \
		bash "$root/bench/verbs-in-guest.sh" "${args[@]}"
fi

# ---- inside the guest --------------------------------------------------------
dev=${BE_RXE_DEV0:-rxe0}
ip=${BE_RXE_IP0:?verbs-in-guest: BE_RXE_IP0 not set (not in the rxe guest?)}
beperf="$build/tools/be-perf"
work=$(mktemp -d)
port=18600
declare -A VALS ERRS

# perftest NAME TOOL [-R]: one ib_write_lat / ib_send_lat run; records
# t_typical (perftest's median of the one-way latency).
perftest() {
	local name=$1 tool=$2 p=$((port++)) spid i rc=1 v t0=$SECONDS
	shift 2
	timeout 120 "$tool" -d "$dev" -s 64 -n "$iters" -p "$p" "$@" >"$work/srv" 2>&1 &
	spid=$!
	# Retry only a client that failed at once (server not listening yet);
	# one that crashed or ran into its timeout mid-test is not retried,
	# since the server is then in an unknown state.
	for i in 1 2 3 4 5; do
		local t1=$SECONDS
		sleep 0.5
		timeout 120 "$tool" -d "$dev" -s 64 -n "$iters" -p "$p" "$@" "$ip" \
			>"$work/cli" 2>&1
		rc=$?
		[ $rc -eq 0 ] && break
		[ $((SECONDS - t1)) -le 3 ] && [ $rc -lt 128 ] || break
		kill -0 $spid 2>/dev/null || break
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	# data line: bytes iters t_min t_max t_typical t_avg ...
	v=$(awk '$1 == "64" && NF >= 6 { print $5 }' "$work/cli" | tail -n1)
	# perftest now and then prints "inf" (a zero-length timing sample).
	if [ $rc -eq 0 ] && ! [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
		ERRS[$name]="unusable t_typical '$v'"
		return 1
	fi
	if [ $rc -ne 0 ] || [ -z "$v" ]; then
		ERRS[$name]="exit $rc: $(grep -i -m1 -E 'error|fail|unable|couldn' "$work/cli" "$work/srv" | cut -c1-150)"
		return 1
	fi
	VALS[$name]+="$v "
	echo "verbs-in-guest: $name $v us ($((SECONDS - t0)) s)" >&2
}

# beraw NAME [be-perf options]
beraw() {
	local name=$1 o v rc t0=$SECONDS
	shift
	o=$(timeout 120 "$beperf" raw-lat --transport verbs --size 64 --iters "$iters" --json \
		"$@" 2>"$work/err")
	rc=$?
	v=$(printf '%s\n' "$o" | sed -n 's/.*"p50_us":\([0-9.eE+-]*\).*/\1/p')
	if [ $rc -ne 0 ] || [ -z "$v" ]; then
		ERRS[$name]="exit $rc: $(tail -n1 "$work/err" | cut -c1-150)"
		return 1
	fi
	VALS[$name]+="$v "
	echo "verbs-in-guest: $name $v us ($((SECONDS - t0)) s)" >&2
}

for r in $(seq "$reps"); do
	echo "verbs-in-guest: repetition $r/$reps" >&2
	perftest ibwl_cm ib_write_lat -R
	perftest ibwl_oob ib_write_lat
	perftest ibsl_cm ib_send_lat -R
	beraw be
	beraw be_poll --write-poll
done

# stats NAME -> "median min max count"
. "$root/bench/lib-stats.sh"
declare -A DESC=([ibwl_cm]="ib_write_lat -R 64 B (t_typical)" \
	[ibwl_oob]="ib_write_lat 64 B (t_typical)" \
	[ibsl_cm]="ib_send_lat -R 64 B (t_typical)" [be]="be verbs raw-lat 64 B (p50)" \
	[be_poll]="be verbs raw-lat --write-poll 64 B (p50)")
rc=0
for n in ibwl_cm ibwl_oob ibsl_cm be be_poll; do
	s=$(stats $n)
	if [ -n "$s" ]; then
		set -- $s
		if [ $json -eq 1 ]; then
			printf '{"name":"%s","desc":"%s","metric":"us","median":%s,"min":%s,"max":%s,"reps":%s}\n' \
				"$n" "${DESC[$n]}" "$1" "$2" "$3" "$4"
		else
			printf '%-42s %8.3f us  (%.3f-%.3f, %d/%d)\n' "${DESC[$n]}" "$1" "$2" "$3" "$4" "$reps"
		fi
	else
		[ "${n%%_*}" = be ] && rc=1
		if [ $json -eq 1 ]; then
			printf '{"name":"%s","desc":"%s","status":"n/a","reason":"%s"}\n' "$n" "${DESC[$n]}" \
				"$(printf '%s' "${ERRS[$n]:-no value}" | tr -d '"\\')"
		else
			printf '%-42s      n/a    %s\n' "${DESC[$n]}" "${ERRS[$n]:-}"
		fi
	fi
done
# ratio NUM REF STATUS-RULE
ratio() {
	local num=$1 ref=$2 rule=$3 b i v ok
	b=$(stats $num | awk '{ print $1 }')
	i=$(stats $ref | awk '{ print $1 }')
	if [ -n "$b" ] && [ -n "$i" ]; then
		v=$(awk -v a="$b" -v b="$i" 'BEGIN { printf "%.3f", a / b }')
		ok=$(awk -v v="$v" -v r=$rule 'BEGIN { print r == "info" ? "info" : v <= 1.2 ? "met" : "missed" }')
	else
		v=n/a
		ok=n/a
	fi
	if [ $json -eq 1 ]; then
		printf '{"ratio":"%s_vs_%s","value":%s,"target":"%s","status":"%s"}\n' "$num" \
			"$ref" "$([ "$v" = n/a ] && echo null || echo "$v")" \
			"$([ "$rule" = info ] && echo info || echo "<= 1.2")" "$ok"
	else
		printf 'ratio %-62s %6s  %s\n' "${DESC[$num]%% (*} / ${DESC[$ref]%% (*}" "$v" \
			"$([ "$rule" = info ] && echo "(info)" || echo "target <= 1.2  $ok")"
	fi
}
ratio be ibwl_cm target
ratio be ibwl_oob info
ratio be ibsl_cm info
ratio be_poll ibwl_cm info
rm -rf "$work"
exit $rc
