#!/usr/bin/env bash
# compare-rpc.sh - RPC calls: be against gRPC (what a user would deploy
# instead), beside the Socket ping-pong they are built on, in one run.
#
#   bash bench/compare-rpc.sh [--reps N] [--json] [--quick] [--build DIR]
#                             [--no-pin] [--out FILE] [--size B] [--outstanding K]
#
# Measures, --reps times each (default 5; --quick: 1 and few calls),
# interleaved (rep 1 of every test, then rep 2, ...) so that load drift on
# a shared machine hits every test alike:
#   rpc-lat   grpc  tcp      grpc-echo lat: unary echo, closed loop, one
#                            call outstanding, blocking stub
#   rpc-rate  grpc  tcp      grpc-echo rate: --outstanding calls in flight,
#                            completion-queue stub
#                            (both against gRPC's completion-queue server:
#                            why, in bench/grpc/grpc_echo.cc)
#   sock-lat  be    tcp shm  be-perf lat: the Socket ping-pong
#   rpc-lat   be    tcp shm  be-perf rpc-lat   (once be-perf has them:
#   rpc-rate  be    tcp shm  be-perf rpc-rate   see be_rpc_lat/be_rpc_rate)
# all with --size bytes (default 64) per request and per reply, then the
# medians with min-max spread and the targets of issue 15 section 5: be's
# call round trip <= 1.2 x the Socket ping-pong of the same run (shm, tcp);
# be's tcp p50 and p99 <= 0.5 x gRPC's; be's shm calls per second per core
# >= 10 x gRPC's. Targets are reported, never enforced.
#
# Latencies are call round trips in microseconds (p50, p99, avg). be-perf
# lat reports one-way times (RTT/2); its sock-lat lines here are doubled
# back into round trips. calls_per_s_per_core = calls / (user + system CPU
# seconds of client and server together). gRPC blocks in epoll when idle;
# be-perf lat busy-polls both ends (so its CPU is two busy cores).
# Every process runs under taskset -c 0,1 (client and server share cores 0
# and 1); --no-pin: no taskset.
#
# gRPC is measured when build/bench/grpc/grpc-echo exists (the CMake option
# BE_WITH_GRPC, on when libgrpc++-dev, libprotobuf-dev, protobuf-compiler
# and protobuf-compiler-grpc are installed); otherwise its lines are n/a.
# Exit status: 1 if a be-perf or grpc-echo run failed, 2 on usage or build
# errors, else 0, whatever the targets.
#
# --json: one JSON object per measurement, with test, impl, transport,
# size, outstanding, reps, failed, and p50_us, p99_us, avg_us, calls_per_s,
# calls_per_s_per_core (medians), each also as NAME_min and NAME_max; a
# measurement that could not run has "status":"n/a" and a "reason". Then
# one line per target ("test":"ratio") and one for the run conditions
# ("test":"conditions").
set -uo pipefail

prog=compare-rpc
size=64
outstanding=32
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--size) [ $# -ge 2 ] || { echo "$prog: --size needs a value" >&2; exit 2; }
		size=$2; shift 2 ;;
	--outstanding) [ $# -ge 2 ] || { echo "$prog: --outstanding needs a value" >&2; exit 2; }
		outstanding=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
case "$size$outstanding" in *[!0-9]*) echo "$prog: --size and --outstanding take numbers" >&2; exit 2 ;; esac
[ "$size" -gt 0 ] && [ "$outstanding" -gt 0 ] ||
	{ echo "$prog: --size and --outstanding must be > 0" >&2; exit 2; }

. "$(dirname "${BASH_SOURCE[0]}")/lib-compare.sh"
cmp_args "${args[@]}"
cmp_tools timeout
[ -n "$build" ] || cmp_tools cmake
[ $pin -eq 0 ] || cmp_tools taskset
cmp_build
grpc_echo="$build/bench/grpc/grpc-echo"
if [ ! -x "$grpc_echo" ] && [ "$build" = "$root/build-bench" ]; then
	# cmp_build made be-perf only; the gRPC programs build when the
	# packages are there (BE_WITH_GRPC=AUTO).
	cmake --build "$build" -j 2 --target grpc-echo >/dev/null 2>&1
fi

# ---- iterations ------------------------------------------------------------
if [ $quick -eq 1 ]; then
	grpc_lat_n=2000; grpc_rate_n=20000; shm_lat_n=5000; tcp_lat_n=2000
else
	grpc_lat_n=20000; grpc_rate_n=200000; shm_lat_n=50000; tcp_lat_n=20000
fi

pin_all=()
if [ $pin -eq 1 ]; then
	pin_all=(taskset -c 0,1)
	pin_desc="client and server share cores 0,1 (taskset -c 0,1), be-perf and gRPC alike"
fi

# ---- runners: one JSON line on stdout, non-zero on failure -----------------
bp() { # be-perf TEST ARGS...
	timeout 600 "${pin_all[@]}" "$beperf" "$@" --timeout 60 --json
}
grpc() { # grpc-echo lat|rate ARGS...
	timeout 600 "${pin_all[@]}" "$grpc_echo" "$@" --json
}

# Parsers (stdin: one JSON line). be-perf lat gives one-way latency and
# bytes moved: size per direction, two directions per round trip.
rtt() { jfield "$1" | awk '{ printf "%.3f\n", 2 * $1 }'; }
sock_cps() { jfield mb_s | awk -v s="$size" '{ printf "%.1f\n", $1 * 1e6 / (2 * s) }'; }
sock_cpc() {
	jfield cpu_s_per_gb | awk -v s="$size" '$1 > 0 { printf "%.1f\n", 1e9 / ($1 * 2 * s) }'
}

# ---- measurements ----------------------------------------------------------
# meas KEY TEST IMPL TRANSPORT OUTSTANDING: one JSON line of the report,
# five values (def'd as KEY_p50 ... KEY_cpc) measured every repetition.
groups=()
declare -A G_TEST G_IMPL G_XPORT G_OUT
meas() {
	local key=$1 d="$3 $4 $2 ${size} B"
	groups+=("$key")
	G_TEST[$key]=$2; G_IMPL[$key]=$3; G_XPORT[$key]=$4; G_OUT[$key]=$5
	[ "$5" -gt 1 ] && d+=", $5 outstanding"
	def ${key}_p50 lat "$d" 1
	def ${key}_p99 lat99 "$d" 1
	def ${key}_avg lat_avg "$d" 1
	def ${key}_cps cps "$d" 1
	def ${key}_cpc cps/core "$d" 1
}
# meas_skip KEY REASON: not measured in this run.
meas_skip() {
	local f
	for f in p50 p99 avg cps cpc; do
		skip "${1}_$f" "$2"
	done
}
# meas_run KEY FORMAT CMD...: one repetition of KEY, its five values
# from CMD's JSON line. FORMAT rpc: a grpc-echo (or be-perf rpc-*) line,
# which carries them under their own names; sock: a be-perf lat line
# (one-way times and bytes), turned into round trips.
meas_run() {
	local key=$1 fmt=$2 lat=jfield cps="jfield calls_per_s" cpc="jfield calls_per_s_per_core"
	shift 2
	[ "$fmt" = sock ] && { lat=rtt; cps=sock_cps; cpc=sock_cpc; }
	run ${key}_p50 "$lat p50_us" "$@"
	derive ${key}_p99 "$lat p99_us"
	derive ${key}_avg "$lat avg_us"
	derive ${key}_cps "$cps"
	derive ${key}_cpc "$cpc"
}

meas grpc_tcp_lat rpc-lat grpc tcp 1
meas grpc_tcp_rate rpc-rate grpc tcp "$outstanding"
for x in tcp shm; do
	meas be_${x}_sock sock-lat be $x 1
	meas be_${x}_lat rpc-lat be $x 1
	meas be_${x}_rate rpc-rate be $x "$outstanding"
done

has_grpc=0
if [ -x "$grpc_echo" ]; then
	has_grpc=1
else
	meas_skip grpc_tcp_lat "gRPC baseline not built ($grpc_echo; apt-get install libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)"
	meas_skip grpc_tcp_rate "${ERRS[grpc_tcp_lat_p50]#skipped: }"
fi

# ---- be's RPC calls --------------------------------------------------------
# Where be's rpc-lat / rpc-rate lines come from. be-perf gains the
# subcommands rpc-lat and rpc-rate with the RPC layer (issue 15 section 5);
# until then these measurements are n/a. When they land: keep the
# commands below in step with their options, make sure their JSON carries
# p50_us, p99_us, avg_us (call round trips, not RTT/2), calls_per_s and
# calls_per_s_per_core (meas_run reads those names), and they join the
# report and the ratios with no other change. The failover figures of the
# same section (test "failover") belong in a function beside these.
has_rpc_lat=0
has_rpc_rate=0
"$beperf" --help 2>/dev/null | grep -q '^  rpc-lat ' && has_rpc_lat=1
"$beperf" --help 2>/dev/null | grep -q '^  rpc-rate ' && has_rpc_rate=1
for x in tcp shm; do
	[ $has_rpc_lat -eq 1 ] || meas_skip be_${x}_lat "this be-perf has no rpc-lat yet (issue 15)"
	[ $has_rpc_rate -eq 1 ] || meas_skip be_${x}_rate "this be-perf has no rpc-rate yet (issue 15)"
done

be_rpc_lat() { # TRANSPORT ITERS
	[ $has_rpc_lat -eq 1 ] || return 0
	meas_run be_$1_lat rpc bp rpc-lat --transport "$1" --size "$size" --iters "$2"
}

be_rpc_rate() { # TRANSPORT ITERS
	[ $has_rpc_rate -eq 1 ] || return 0
	meas_run be_$1_rate rpc bp rpc-rate --transport "$1" --size "$size" \
		--outstanding "$outstanding" --iters "$2"
}

one_rep() { # REP: one repetition of every test
	local x n
	if [ $has_grpc -eq 1 ]; then
		meas_run grpc_tcp_lat rpc grpc lat --size "$size" --iters $grpc_lat_n \
			--warmup $((grpc_lat_n / 10))
		meas_run grpc_tcp_rate rpc grpc rate --size "$size" --outstanding "$outstanding" \
			--iters $grpc_rate_n --warmup $((grpc_rate_n / 10))
	fi
	for x in tcp shm; do
		n=$shm_lat_n
		[ $x = tcp ] && n=$tcp_lat_n
		meas_run be_${x}_sock sock bp lat --transport $x --size "$size" --iters $n
		be_rpc_lat $x $n
		be_rpc_rate $x $((n * 4))
	done
}
cmp_reps one_rep

# ---- targets (issue 15 section 5) --------------------------------------------
for x in tcp shm; do
	ratio ${x}_rpc_vs_sock be_${x}_lat_p50 be_${x}_sock_p50 "<=" 1.2 \
		"be $x rpc-lat p50 / sock-lat p50 (round trips)"
done
ratio tcp_p50_vs_grpc be_tcp_lat_p50 grpc_tcp_lat_p50 "<=" 0.5 "be tcp rpc-lat p50 / gRPC p50"
ratio tcp_p99_vs_grpc be_tcp_lat_p99 grpc_tcp_lat_p99 "<=" 0.5 "be tcp rpc-lat p99 / gRPC p99"
ratio shm_cpc_vs_grpc be_shm_rate_cpc grpc_tcp_rate_cpc ">=" 10 \
	"be shm rpc-rate calls/s/core / gRPC tcp's"
ratio tcp_cpc_vs_grpc be_tcp_rate_cpc grpc_tcp_rate_cpc info - \
	"be tcp rpc-rate calls/s/core / gRPC tcp's"
ratio tcp_sock_vs_grpc be_tcp_sock_p50 grpc_tcp_lat_p50 info - \
	"be tcp sock-lat p50 / gRPC rpc-lat p50 (the floor under rpc-lat)"

# ---- report ----------------------------------------------------------------
# The JSON report: one line per measurement (replaces lib-compare's one
# line per value).
report_json() {
	local g f s line n
	for g in "${groups[@]}"; do
		line=$(printf '{"test":"%s","impl":"%s","transport":"%s","size":%s,"outstanding":%s' \
			"${G_TEST[$g]}" "${G_IMPL[$g]}" "${G_XPORT[$g]}" "$size" "${G_OUT[$g]}")
		if [ -z "$(stats ${g}_p50)" ]; then
			for f in p50_us p99_us avg_us calls_per_s calls_per_s_per_core; do
				line+=",\"$f\":null"
			done
			printf '%s,"status":"n/a","reason":"%s"}\n' "$line" \
				"$(printf '%s' "${ERRS[${g}_p50]:-no value}" | tr -d '"\\')"
			continue
		fi
		line+=",\"reps\":$(set -- $(stats ${g}_p50); echo $4),\"failed\":${FAILS[${g}_p50]}"
		for f in p50:p50_us p99:p99_us avg:avg_us cps:calls_per_s cpc:calls_per_s_per_core; do
			n=${f%%:*}
			s=$(stats ${g}_$n)
			if [ -n "$s" ]; then
				set -- $s
				line+=",\"${f#*:}\":$1,\"${f#*:}_min\":$2,\"${f#*:}_max\":$3"
			else
				line+=",\"${f#*:}\":null"
			fi
		done
		printf '%s}\n' "$line"
	done
	for n in "${ratios[@]}"; do
		if [ "${RVAL[$n]}" = "n/a" ]; then
			printf '{"test":"ratio","name":"%s","desc":"%s","value":null,"target":"%s","status":"n/a","reason":"%s"}\n' \
				"$n" "${RDESC[$n]}" "${RTGT[$n]}" "${RWHY[$n]}"
		else
			printf '{"test":"ratio","name":"%s","desc":"%s","value":%s,"target":"%s","status":"%s"}\n' \
				"$n" "${RDESC[$n]}" "${RVAL[$n]}" "${RTGT[$n]}" "${ROK[$n]}"
		fi
	done
	printf '{"test":"conditions","reps":%d,"pinned":%s,"pinning":"%s","load_before":"%s","load_after":"%s","cores":%d}\n' \
		"$reps" "$([ $pin -eq 1 ] && echo true || echo false)" \
		"$([ $pin -eq 1 ] && echo "$pin_desc" || echo none)" \
		"$load_before" "$load_after" "$(nproc)"
}

notes=("latency: call round trip, us (be-perf lat's one-way figures doubled)"
	"cps: calls per second; cps/core: calls per CPU second of client + server"
	"polling: gRPC sleeps in epoll; be-perf lat busy-polls both ends")
[ $pin -eq 1 ] || notes+=("not pinned (--no-pin): the scheduler places both ends")
cmp_finish
