#!/usr/bin/env bash
# compare-transports.sh - our transports against kernel TCP, UCX and
# libfabric on this host, side by side in one run.
#
#   bash bench/compare-transports.sh [--reps N] [--json] [--quick]
#                                    [--build DIR] [--no-pin] [--out FILE]
#
# Measures, --reps times each (default 5), interleaved (rep 1 of every
# test, then rep 2, ...) so that load drift on a shared machine hits every
# test alike:
#   floor    bench/cacheline_bounce.c   64 B between two cores (shm floor)
#   kernel   bench/tcp_pingpong.c       blocking 64 B ping-pong, 1 MiB stream
#   UCX      ucx_perftest               shm (UCX_TLS=sm,self): ucp_put_lat,
#                                       ucp_am_lat, ucp_put_bw 1 MiB;
#                                       tcp (UCX_TLS=tcp): tag_lat, ucp_am_lat,
#                                       ucp_am_bw 1 MiB (ucp_put_bw over tcp
#                                       is an emulation at ~30 MB/s: useless)
#   libfabric fi_pingpong -e rdm         providers shm and tcp, 64 B
#   ours     be-perf raw-lat / raw-bw    --transport shm and tcp (and shm
#                                       raw-lat --write-poll, the method of
#                                       ucp_put_lat: spin on the buffer)
# and prints medians with min-max spread and the ratios the targets need.
#
# Latencies are one-way (RTT/2) in microseconds; p50 where the tool gives
# it (fi_pingpong gives only an average per transfer). Bandwidth is MB/s
# with MB = 1e6 bytes (ucx_perftest reports MiB/s; converted here).
# Processes are pinned client -> core 0, server -> core 1 (--no-pin: off).
#
# A missing tool is an error (exit 2): install ucx-utils and libfabric-bin
# (tools/quickstart.sh lists them). A tool that fails at run time is shown
# as n/a with the reason; if our own be-perf fails, the exit status is 1.
# --json: one JSON object per measurement and per ratio on stdout.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=5
json=0
quick=0
pin=1
build=""
out=""

while [ $# -gt 0 ]; do
	case "$1" in
	--reps) reps=$2; shift 2 ;;
	--json) json=1; shift ;;
	--quick) quick=1; reps=1; shift ;;
	--build) build=$2; shift 2 ;;
	--no-pin) pin=0; shift ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,30p' "$0"; exit 0 ;;
	*) echo "compare-transports: unknown option '$1'" >&2; exit 2 ;;
	esac
done
case "$reps" in ''|*[!0-9]*|0) echo "compare-transports: --reps needs a number > 0" >&2; exit 2 ;; esac

# ---- tools ----------------------------------------------------------------
missing=()
for t in ucx_perftest fi_pingpong cc cmake timeout taskset; do
	command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "compare-transports: missing tools: ${missing[*]}" >&2
	echo "  apt-get install -y ucx-utils libfabric-bin gcc cmake util-linux coreutils" >&2
	exit 2
fi
[ "$(nproc)" -ge 2 ] || pin=0

work=$(mktemp -d /tmp/be-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT

if [ -z "$build" ]; then
	build="$root/build-bench"
	echo "compare-transports: building be-perf (Release) in $build" >&2
	if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF \
		>/dev/null && cmake --build "$build" -j 2 --target be-perf >/dev/null; }; then
		echo "compare-transports: building be-perf failed" >&2
		exit 2
	fi
fi
beperf="$build/tools/be-perf"
if [ ! -x "$beperf" ]; then
	echo "compare-transports: $beperf not found (build the be-perf target)" >&2
	exit 2
fi
for p in cacheline_bounce tcp_pingpong; do
	if ! cc -O2 -Wall -I"$root/tools/be-perf" -o "$work/$p" "$root/bench/$p.c" \
		"$root/tools/be-perf/perf_stats.c" -lm; then
		echo "compare-transports: cannot build bench/$p.c" >&2
		exit 2
	fi
done

# ---- iterations ------------------------------------------------------------
if [ $quick -eq 1 ]; then
	lat_n=5000; bw_n=500; tcp_lat_n=2000; tcp_bw_n=500; floor_n=50000
else
	lat_n=50000; bw_n=2000; tcp_lat_n=20000; tcp_bw_n=3000; floor_n=200000
fi

if [ $pin -eq 1 ]; then
	pin_c=(taskset -c 0); pin_s=(taskset -c 1); cpu_opt=(--cpu 0,1)
else
	pin_c=(); pin_s=(); cpu_opt=()
fi
port=$((20000 + $$ % 20000))

# ---- runners: each prints the tool's output on stdout, non-zero on failure -
jfield() { # jfield KEY: a number field from one JSON line on stdin
	sed -n "s/.*\"$1\":\\([-0-9.eE+]*\\).*/\\1/p" | head -n1
}

# ucx TLS TEST SIZE ITERS: server + client, client's output.
ucx() {
	local tls=$1 test=$2 size=$3 n=$4 p=$((port++)) spid i rc=1
	UCX_TLS=$tls timeout 120 "${pin_s[@]}" ucx_perftest -p "$p" -t "$test" -s "$size" -n "$n" \
		>"$work/ucx_srv" 2>&1 &
	spid=$!
	for i in $(seq 50); do
		grep -q "Waiting for connection" "$work/ucx_srv" 2>/dev/null && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.1
	done
	UCX_TLS=$tls timeout 120 "${pin_c[@]}" ucx_perftest localhost -p "$p" -t "$test" \
		-s "$size" -n "$n" 2>&1
	rc=$?
	wait $spid 2>/dev/null
	return $rc
}
ucx_lat() { awk '/^Final:/ { print $3 }'; }        # 50.0%ile, one-way usec
ucx_bw() { awk '/^Final:/ { printf "%.2f\n", $6 * 1.048576 }'; } # MiB/s -> MB/s

# fab PROVIDER SIZE ITERS
fab() {
	local prov=$1 size=$2 n=$3 p=$((port++)) spid i rc=1
	timeout 120 "${pin_s[@]}" fi_pingpong -p "$prov" -e rdm -B "$p" -S "$size" -I "$n" \
		>"$work/fab_srv" 2>&1 &
	spid=$!
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.2
		timeout 120 "${pin_c[@]}" fi_pingpong -p "$prov" -e rdm -P "$p" -S "$size" -I "$n" \
			127.0.0.1 >"$work/fab_cli" 2>&1
		rc=$?
		[ $rc -eq 0 ] && break
		kill -0 $spid 2>/dev/null || break
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	cat "$work/fab_cli"
	return $rc
}
fab_lat() { awk '$1 ~ /^[0-9]+$/ && NF >= 8 { v = $7 } END { if (v != "") print v }'; }

be_lat() { jfield p50_us; }
be_bw() { jfield mb_s; }

# ---- bookkeeping -----------------------------------------------------------
declare -A VALS ERRS FAILS DESC METRIC OURS
names=()

# def NAME METRIC DESCRIPTION [ours]
def() {
	names+=("$1")
	METRIC[$1]=$2
	DESC[$1]=$3
	OURS[$1]=${4:-0}
	VALS[$1]=""
	FAILS[$1]=0
}

# run NAME PARSER CMD...: one repetition.
run() {
	local name=$1 parser=$2 o v rc
	shift 2
	o=$("$@" 2>"$work/err")
	rc=$?
	if [ $rc -eq 0 ]; then
		v=$(printf '%s\n' "$o" | $parser)
		if [ -n "$v" ]; then
			VALS[$name]+="$v "
			return 0
		fi
		ERRS[$name]="could not parse the output: $(printf '%s\n' "$o" | tail -n1)"
	else
		ERRS[$name]="exit $rc: $( (grep -i -m1 -E 'error|fail|refused|timed out' "$work/err" \
			|| printf '%s\n' "$o" | grep -i -m1 -E 'error|fail' || tail -n1 "$work/err") \
			| tr -d '"\\' | cut -c1-150)"
	fi
	FAILS[$name]=$((FAILS[$name] + 1))
	return 1
}

def floor lat "cache-line bounce 64 B (shm floor)"
def k_lat lat "kernel TCP ping-pong 64 B"
def k_bw bw "kernel TCP stream 1 MiB"
def ucx_shm_put_lat lat "UCX shm ucp_put_lat 64 B"
def ucx_shm_am_lat lat "UCX shm ucp_am_lat 64 B"
def ucx_shm_put_bw bw "UCX shm ucp_put_bw 1 MiB"
def ucx_tcp_tag_lat lat "UCX tcp tag_lat 64 B"
def ucx_tcp_am_lat lat "UCX tcp ucp_am_lat 64 B"
def ucx_tcp_am_bw bw "UCX tcp ucp_am_bw 1 MiB"
def fab_shm_lat lat_avg "libfabric shm fi_pingpong 64 B"
def fab_tcp_lat lat_avg "libfabric tcp fi_pingpong 64 B"
def be_shm_lat lat "be shm raw-lat WRITE_IMM 64 B" 1
def be_shm_poll lat "be shm raw-lat --write-poll 64 B" 1
def be_shm_bw bw "be shm raw-bw 1 MiB" 1
def be_shm_bw64 bw "be shm raw-bw 1 MiB window 64" 1
def be_tcp_lat lat "be tcp raw-lat WRITE_IMM 64 B" 1
def be_tcp_bw bw "be tcp raw-bw 1 MiB" 1
def be_shm_bw_sl bw "be shm raw-bw 1 MiB --sleep" 1
def be_tcp_bw_sl bw "be tcp raw-bw 1 MiB --sleep" 1

ucx_shm_tls=${UCX_SHM_TLS:-sm,self}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$reps"); do
	echo "compare-transports: repetition $r/$reps" >&2
	run floor be_lat "$work/cacheline_bounce" --iters $floor_n --json
	run k_lat be_lat "$work/tcp_pingpong" lat --iters $tcp_lat_n "${cpu_opt[@]}" --json
	run k_bw be_bw "$work/tcp_pingpong" bw --iters $tcp_bw_n "${cpu_opt[@]}" --json
	run ucx_shm_put_lat ucx_lat ucx "$ucx_shm_tls" ucp_put_lat 64 $lat_n
	run ucx_shm_am_lat ucx_lat ucx "$ucx_shm_tls" ucp_am_lat 64 $lat_n
	run ucx_shm_put_bw ucx_bw ucx "$ucx_shm_tls" ucp_put_bw 1048576 $bw_n
	run ucx_tcp_tag_lat ucx_lat ucx tcp tag_lat 64 $tcp_lat_n
	run ucx_tcp_am_lat ucx_lat ucx tcp ucp_am_lat 64 $tcp_lat_n
	run ucx_tcp_am_bw ucx_bw ucx tcp ucp_am_bw 1048576 $tcp_bw_n
	run fab_shm_lat fab_lat fab shm 64 $lat_n
	run fab_tcp_lat fab_lat fab tcp 64 $tcp_lat_n
	run be_shm_lat be_lat timeout 120 "$beperf" raw-lat --transport shm --size 64 \
		--iters $lat_n "${cpu_opt[@]}" --json
	run be_shm_poll be_lat timeout 120 "$beperf" raw-lat --transport shm --size 64 \
		--iters $lat_n --write-poll "${cpu_opt[@]}" --json
	run be_shm_bw be_bw timeout 120 "$beperf" raw-bw --transport shm --size 1M \
		--iters $bw_n "${cpu_opt[@]}" --json
	run be_shm_bw64 be_bw timeout 120 "$beperf" raw-bw --transport shm --size 1M \
		--iters $bw_n --window 64 "${cpu_opt[@]}" --json
	run be_tcp_lat be_lat timeout 120 "$beperf" raw-lat --transport tcp --size 64 \
		--iters $tcp_lat_n "${cpu_opt[@]}" --json
	run be_tcp_bw be_bw timeout 120 "$beperf" raw-bw --transport tcp --size 1M \
		--iters $tcp_bw_n "${cpu_opt[@]}" --json
	run be_shm_bw_sl be_bw timeout 120 "$beperf" raw-bw --transport shm --size 1M \
		--iters $bw_n --sleep "${cpu_opt[@]}" --json
	run be_tcp_bw_sl be_bw timeout 120 "$beperf" raw-bw --transport tcp --size 1M \
		--iters $tcp_bw_n --sleep "${cpu_opt[@]}" --json
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- statistics ------------------------------------------------------------
# stats NAME -> "median min max count" (empty when no value)
stats() {
	printf '%s\n' ${VALS[$1]} | awk 'NF { v[n++] = $1 }
		END {
			if (!n) exit
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
			printf "%g %g %g %d\n", m, v[0], v[n - 1], n
		}'
}
median() { stats "$1" | awk '{ print $1 }'; }

declare -A MED
for n in "${names[@]}"; do
	MED[$n]=$(median "$n")
done

# ratio KEY NUM DEN OP TARGET DESCRIPTION
ratios=()
declare -A RVAL ROK RTGT RDESC RWHY
ratio() {
	local key=$1 num=$2 den=$3 op=$4 tgt=$5 desc=$6 v ok
	ratios+=("$key")
	RDESC[$key]=$desc
	RTGT[$key]="$op $tgt"
	[ "$op" = info ] && RTGT[$key]="-"
	if [ -z "${MED[$num]}" ] || [ -z "${MED[$den]}" ]; then
		RVAL[$key]="n/a"
		ROK[$key]="n/a"
		RWHY[$key]="no value for:"
		[ -z "${MED[$num]}" ] && RWHY[$key]+=" $num"
		[ -z "${MED[$den]}" ] && RWHY[$key]+=" $den"
		return
	fi
	v=$(awk -v a="${MED[$num]}" -v b="${MED[$den]}" 'BEGIN { if (b == 0) print "inf"; else printf "%.3f", a / b }')
	ok=$(awk -v v="$v" -v t="$tgt" -v op="$op" 'BEGIN {
		if (op == "info") { print "info"; exit }
		if (v == "inf") { print "missed"; exit }
		print ((op == "<=" && v <= t) || (op == ">=" && v >= t)) ? "met" : "missed" }')
	RVAL[$key]=$v
	ROK[$key]=$ok
	RWHY[$key]=""
}
ratio shm_lat_vs_ucx_am be_shm_lat ucx_shm_am_lat "<=" 1.0 \
	"be shm 64 B one-way p50 / UCX shm ucp_am_lat p50"
ratio shm_lat_vs_floor be_shm_lat floor "<=" 2.0 \
	"be shm 64 B one-way p50 / cache-line bounce p50"
ratio shm_lat_vs_ucx_put be_shm_lat ucx_shm_put_lat info - \
	"be shm 64 B one-way p50 / UCX shm ucp_put_lat p50"
ratio shm_poll_vs_ucx_put be_shm_poll ucx_shm_put_lat info - \
	"be shm --write-poll p50 / UCX shm ucp_put_lat p50"
ratio shm_bw_vs_ucx_put be_shm_bw ucx_shm_put_bw ">=" 0.9 \
	"be shm 1 MiB MB/s / UCX shm ucp_put_bw"
ratio shm_bw64_vs_ucx_put be_shm_bw64 ucx_shm_put_bw info - \
	"be shm 1 MiB window 64 MB/s / UCX shm ucp_put_bw"
ratio shm_bw_sl_vs_ucx_put be_shm_bw_sl ucx_shm_put_bw info - \
	"be shm 1 MiB --sleep MB/s / UCX shm ucp_put_bw"
ratio tcp_lat_vs_ucx_tag be_tcp_lat ucx_tcp_tag_lat "<=" 1.0 \
	"be tcp 64 B one-way p50 / UCX tcp tag_lat p50"
ratio tcp_lat_vs_ucx_am be_tcp_lat ucx_tcp_am_lat "<=" 1.0 \
	"be tcp 64 B one-way p50 / UCX tcp ucp_am_lat p50"
ratio tcp_lat_vs_kernel be_tcp_lat k_lat info - \
	"be tcp 64 B one-way p50 / kernel TCP ping-pong p50"
ratio tcp_bw_vs_kernel be_tcp_bw k_bw ">=" 1.0 \
	"be tcp 1 MiB MB/s / kernel TCP stream"
ratio tcp_bw_sl_vs_kernel be_tcp_bw_sl k_bw info - \
	"be tcp 1 MiB --sleep MB/s / kernel TCP stream"
ratio tcp_bw_vs_ucx_am be_tcp_bw ucx_tcp_am_bw info - \
	"be tcp 1 MiB MB/s / UCX tcp ucp_am_bw"

# ---- report ----------------------------------------------------------------
report() {
	local n s unit
	if [ $json -eq 1 ]; then
		for n in "${names[@]}"; do
			s=$(stats "$n")
			if [ -n "$s" ]; then
				set -- $s
				printf '{"name":"%s","desc":"%s","metric":"%s","median":%s,"min":%s,"max":%s,"reps":%s,"failed":%s,"values":[%s]}\n' \
					"$n" "${DESC[$n]}" "$(unit_of "$n")" "$1" "$2" "$3" "$4" "${FAILS[$n]}" \
					"$(printf '%s\n' ${VALS[$n]} | paste -sd, -)"
			else
				printf '{"name":"%s","desc":"%s","metric":"%s","status":"n/a","reason":"%s"}\n' \
					"$n" "${DESC[$n]}" "$(unit_of "$n")" "${ERRS[$n]:-no value}"
			fi
		done
		printf '{"run":"conditions","reps":%d,"pinned":%s,"load_before":"%s","load_after":"%s","cores":%d}\n' \
			"$reps" "$([ $pin -eq 1 ] && echo true || echo false)" "$load_before" "$load_after" "$(nproc)"
		for n in "${ratios[@]}"; do
			if [ "${RVAL[$n]}" = "n/a" ]; then
				printf '{"ratio":"%s","desc":"%s","value":null,"target":"%s","status":"n/a","reason":"%s"}\n' \
					"$n" "${RDESC[$n]}" "${RTGT[$n]}" "${RWHY[$n]}"
			else
				printf '{"ratio":"%s","desc":"%s","value":%s,"target":"%s","status":"%s"}\n' \
					"$n" "${RDESC[$n]}" "${RVAL[$n]}" "${RTGT[$n]}" "${ROK[$n]}"
			fi
		done
		return
	fi
	printf '\n%-36s %-9s %10s %10s %10s %6s\n' "measurement" "metric" "median" "min" "max" "reps"
	for n in "${names[@]}"; do
		s=$(stats "$n")
		if [ -n "$s" ]; then
			set -- $s
			printf '%-36s %-9s %10.3f %10.3f %10.3f %3d/%-2d\n' "${DESC[$n]}" "$(unit_of "$n")" \
				"$1" "$2" "$3" "$4" "$reps"
		else
			printf '%-36s %-9s %10s   %s\n' "${DESC[$n]}" "$(unit_of "$n")" "n/a" "${ERRS[$n]:-}"
		fi
	done
	printf '\nratios of medians (this run):\n'
	for n in "${ratios[@]}"; do
		printf '  %-58s %8s  target %-6s %s\n' "${RDESC[$n]}" "${RVAL[$n]}" "${RTGT[$n]}" \
			"${ROK[$n]}${RWHY[$n]:+ (${RWHY[$n]})}"
	done
	printf '\nlatency: one-way us (p50; fi_pingpong: average); bandwidth: MB/s (1e6 B/s)\n'
	[ $pin -eq 1 ] && printf 'pinned: client core 0, server core 1\n'
	printf 'load average before: %s, after: %s (%d cores)\n' "$load_before" "$load_after" "$(nproc)"
}
unit_of() {
	case "${METRIC[$1]}" in
	lat) echo "p50 us" ;;
	lat_avg) echo "avg us" ;;
	bw) echo "MB/s" ;;
	esac
}

if [ -n "$out" ]; then
	report | tee "$out"
else
	report
fi

rc=0
for n in "${names[@]}"; do
	if [ "${OURS[$n]}" = 1 ] && [ "${FAILS[$n]}" -gt 0 ]; then
		echo "compare-transports: be-perf failed for $n (${FAILS[$n]}/$reps): ${ERRS[$n]:-}" >&2
		rc=1
	fi
done
exit $rc
