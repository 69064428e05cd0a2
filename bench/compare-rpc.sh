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
#   sock-lat  be    tcp shm  the Socket ping-pong of be-perf rpc-lat,
#                            in blocks alternating with the calls, against
#                            the same server process
#   rpc-lat   be    tcp shm  be-perf rpc-lat: the call ping-pong, both
#                            ends busy-polling ("polling":"busy")
#   rpc-lat   be    tcp shm  the same with --adaptive: both ends spin for
#                            a bounded time, then sleep on events, as
#                            gRPC sleeps in epoll ("polling":"adaptive")
#   rpc-rate  be    tcp shm  be-perf rpc-rate: --outstanding calls in
#                            flight (its --depth) for 3 s (--quick: 1 s)
#   failover  be    tcp shm  test/rpc's failover scenarios with --json, a
#                            stream of idempotent calls 8-24 deep, each with
#                            a deadline, against replicas in child processes:
#     kill         kill -9 of one replica of three: detect = kill -> its
#                  address marked down; recover = kill -> the last of the
#                  calls in flight at the kill answered (retried elsewhere)
#     path-break   the replica's first path breaks (its worker and
#                  Engines go; paths tcp,tcp: port switch; shm,tcp: TCP
#                  fallback): detect = break -> the first answer over the
#                  second path; recover = repair -> the first answer back
#                  over the first
#     path-silent  the first path goes silent (Engines up, nothing
#                  answered: a port dropping traffic), same times
#                  (the same faults on verbs and a NIC's link going down
#                  run in the Soft-RoCE guest: ctest -L failover)
# all with --size bytes (default 64) per request and per reply, then the
# medians with min-max spread and the targets of issue 15 section 5: be's
# call round trip <= 1.2 x the Socket ping-pong of the same run (shm, tcp);
# be's tcp p50 and p99 <= 0.5 x gRPC's (busy-polled and adaptive alike);
# be's shm calls per second per core >= 10 x gRPC's. Targets are
# reported, never enforced.
#
# Latencies are round trips in microseconds (p50, p99, avg).
# calls_per_s_per_core = calls / (user + system CPU seconds of client and
# server together). gRPC blocks in epoll when idle; be-perf rpc-lat
# busy-polls both ends (and, in its adaptive rows, spins then sleeps),
# rpc-rate spins then sleeps on events.
# Every process runs under taskset -c 0,1 (client and server share cores 0
# and 1); --no-pin: no taskset.
#
# gRPC is measured when build/bench/grpc/grpc-echo exists (the CMake option
# BE_WITH_GRPC, on when libgrpc++-dev, libprotobuf-dev, protobuf-compiler
# and protobuf-compiler-grpc are installed); otherwise its lines are n/a.
# Exit status: 1 if a be-perf run or a failover scenario failed (a call
# lost counts), 2 on usage or build errors, else 0, whatever the targets.
# The failover scenarios need the test programs (test/rpc, built when
# --build names a build with tests; in build-bench they are built here).
#
# --json: one JSON object per measurement, with test, impl, transport,
# polling (busy, adaptive, or epoll for gRPC), size, outstanding, reps, failed, and p50_us, p99_us, avg_us, calls_per_s,
# calls_per_s_per_core (medians), each also as NAME_min and NAME_max; a
# measurement that could not run has "status":"n/a" and a "reason".
# Failover lines have fault, paths, detect_ms and recover_ms (medians, with
# _min and _max), calls and calls_failed (summed over the repetitions) and
# deadline_ms, their latency fields null. Then
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
cmp_prepare
grpc_echo="$build/bench/grpc/grpc-echo"
if [ ! -x "$grpc_echo" ] && [ "$build" = "$root/build-bench" ]; then
	# cmp_build made be-perf only; the gRPC programs build when the
	# packages are there (BE_WITH_GRPC=AUTO).
	cmake --build "$build" -j 2 --target grpc-echo >/dev/null 2>&1
fi
fo_bins=(kill fallback blackhole)
if [ "$build" = "$root/build-bench" ] && [ ! -x "$build/test/rpc/test-rpc-kill" ]; then
	echo "$prog: building the failover scenarios (test/rpc) in $build" >&2
	cmake -S "$root" -B "$build" -DBE_BUILD_TESTS=ON >/dev/null &&
		cmake --build "$build" -j 2 --target "${fo_bins[@]/#/test-rpc-}" >/dev/null 2>&1
fi

# ---- iterations ------------------------------------------------------------
if [ $quick -eq 1 ]; then
	grpc_lat_n=2000; grpc_rate_n=20000; shm_lat_n=5000; tcp_lat_n=2000; rate_s=1
else
	grpc_lat_n=20000; grpc_rate_n=200000; shm_lat_n=50000; tcp_lat_n=20000; rate_s=3
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

# line TEST: the line of TEST from the last be-perf rpc-lat run (which
# prints a sock-lat and an rpc-lat line), failing as that run did.
line() {
	cat "$work/rpclat.err" >&2
	[ "$(cat "$work/rpclat.rc")" = 0 ] || return 1
	grep -m1 "\"test\":\"$1\"" "$work/rpclat.out"
}

# ---- measurements ----------------------------------------------------------
# meas KEY TEST IMPL TRANSPORT OUTSTANDING POLLING: one JSON line of the
# report, five values (def'd as KEY_p50 ... KEY_cpc) measured every
# repetition.
groups=()
declare -A G_TEST G_IMPL G_XPORT G_OUT G_POLL
meas() {
	local key=$1 d="$3 $4 $2 ${size} B"
	groups+=("$key")
	G_TEST[$key]=$2; G_IMPL[$key]=$3; G_XPORT[$key]=$4; G_OUT[$key]=$5; G_POLL[$key]=$6
	[ "$5" -gt 1 ] && d+=", $5 outstanding"
	[ "$6" = adaptive ] && d+=", adaptive"
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
# meas_run KEY CMD...: one repetition of KEY, its five values from CMD's
# JSON line, under these names in grpc-echo's and be-perf rpc-*'s. A field
# the tool does not report (rpc-lat has no rate, rpc-rate no latency) is
# n/a, not a failure.
meas_run() {
	local key=$1 f
	shift
	run_only "$@"
	for f in p50:p50_us p99:p99_us avg:avg_us cps:calls_per_s cpc:calls_per_s_per_core; do
		if [ -z "$last_err" ] && ! grep -q "\"${f#*:}\":" "$work/last"; then
			skip ${key}_${f%%:*} "not reported by this tool"
			continue
		fi
		derive ${key}_${f%%:*} "jfield ${f#*:}"
	done
}

meas grpc_tcp_lat rpc-lat grpc tcp 1 epoll
meas grpc_tcp_rate rpc-rate grpc tcp "$outstanding" epoll
for x in tcp shm; do
	meas be_${x}_sock sock-lat be $x 1 busy
	meas be_${x}_lat rpc-lat be $x 1 busy
	meas be_${x}_alat rpc-lat be $x 1 adaptive
	meas be_${x}_rate rpc-rate be $x "$outstanding" adaptive
done

# Failover: fo KEY FAULT TRANSPORT PROGRAM ARGS...; three values a
# repetition (def'd as KEY_det, KEY_rec, KEY_fail) from the program's
# --json line.
fo_groups=()
declare -A F_FAULT F_XPORT F_CMD F_PATHS F_CALLS F_DEADLINE
fo() {
	local key=$1 d="be $3 failover: $2"
	fo_groups+=("$key")
	F_FAULT[$key]=$2; F_XPORT[$key]=$3; F_CMD[$key]="${*:4}"; F_PATHS[$key]=$3
	F_CALLS[$key]=0; F_DEADLINE[$key]=null
	def ${key}_det ms "$d, detect" 1
	def ${key}_rec ms "$d, recover" 1
	def ${key}_fail calls "$d, calls failed" 1
	if [ ! -x "$build/test/rpc/test-rpc-$4" ]; then
		for f in det rec fail; do
			skip ${key}_$f "$build/test/rpc/test-rpc-$4 not built (a build with tests: --build DIR)"
		done
	fi
}
# fo_run KEY: one repetition. A run that fails its checks (a call lost)
# still gives its figures when it printed them (what it lost is the
# point), and counts as failed.
fo_run() {
	local key=$1 line v e
	set -- ${F_CMD[$key]}
	[ -x "$build/test/rpc/test-rpc-$1" ] || return 0
	run_only timeout 300 "${pin_all[@]}" "$build/test/rpc/test-rpc-$1" "${@:2}" --json
	e=$last_err
	line=$(grep -m1 '"test":"failover"' "$work/last")
	if [ -n "$line" ]; then
		F_PATHS[$key]=$(printf '%s\n' "$line" | sed -n 's/.*"paths":"\([^"]*\)".*/\1/p')
		F_DEADLINE[$key]=$(jfield deadline_ms <"$work/last")
		v=$(jfield calls <"$work/last")
		F_CALLS[$key]=$((F_CALLS[$key] + ${v:-0}))
		last_err=""
	else
		last_err=${e:-"no failover line"}
	fi
	derive ${key}_det "jfield detect_ms"
	derive ${key}_rec "jfield recover_ms"
	derive ${key}_fail "jfield calls_failed"
	if [ -n "$line" ] && [ -n "$e" ]; then
		FAILS[${key}_fail]=$((FAILS[${key}_fail] + 1))
		ERRS[${key}_fail]=$e
	fi
}
for x in tcp shm; do
	fo fo_${x}_kill kill $x kill --transport $x
	fo fo_${x}_break path-break $x fallback --transport $x
	fo fo_${x}_silent path-silent $x blackhole --transport $x
done

has_grpc=0
if [ -x "$grpc_echo" ]; then
	has_grpc=1
else
	meas_skip grpc_tcp_lat "gRPC baseline not built ($grpc_echo; apt-get install libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)"
	meas_skip grpc_tcp_rate "${ERRS[grpc_tcp_lat_p50]#skipped: }"
fi

# ---- be's RPC calls --------------------------------------------------------
# be-perf rpc-lat / rpc-rate (issue 15 section 5): their JSON carries
# p50_us, p99_us, avg_us (call round trips, not RTT/2), calls_per_s and
# calls_per_s_per_core, the names meas_run reads. A be-perf without them
# leaves these measurements n/a.
has_rpc_lat=0
has_rpc_rate=0
"$beperf" --help 2>/dev/null | grep -q '^  rpc-lat ' && has_rpc_lat=1
"$beperf" --help 2>/dev/null | grep -q '^  rpc-rate ' && has_rpc_rate=1
for x in tcp shm; do
	if [ $has_rpc_lat -eq 0 ]; then
		meas_skip be_${x}_lat "this be-perf has no rpc-lat"
		meas_skip be_${x}_alat "this be-perf has no rpc-lat"
		meas_skip be_${x}_sock "this be-perf has no rpc-lat"
	fi
	[ $has_rpc_rate -eq 1 ] || meas_skip be_${x}_rate "this be-perf has no rpc-rate"
done

be_rpc_lat() { # TRANSPORT ITERS: the call and Socket ping-pongs, one run
	[ $has_rpc_lat -eq 1 ] || return 0
	bp rpc-lat --transport "$1" --size "$size" --iters "$2" --warmup $(($2 / 10)) \
		>"$work/rpclat.out" 2>"$work/rpclat.err"
	echo $? >"$work/rpclat.rc"
	meas_run be_$1_sock line sock-lat
	meas_run be_$1_lat line rpc-lat
	# Both ends waiting adaptively, as gRPC's do: what a p99 costs when
	# the worker sleeps between calls (its sock-lat line is not used).
	bp rpc-lat --adaptive --transport "$1" --size "$size" --iters "$2" \
		--warmup $(($2 / 10)) >"$work/rpclat.out" 2>"$work/rpclat.err"
	echo $? >"$work/rpclat.rc"
	meas_run be_$1_alat line rpc-lat
}

be_rpc_rate() { # TRANSPORT SECONDS
	[ $has_rpc_rate -eq 1 ] || return 0
	meas_run be_$1_rate bp rpc-rate --transport "$1" --size "$size" \
		--depth "$outstanding" --seconds "$2"
}

one_rep() { # REP: one repetition of every test
	local x n
	if [ $has_grpc -eq 1 ]; then
		meas_run grpc_tcp_lat grpc lat --size "$size" --iters $grpc_lat_n \
			--warmup $((grpc_lat_n / 10))
		meas_run grpc_tcp_rate grpc rate --size "$size" --outstanding "$outstanding" \
			--iters $grpc_rate_n --warmup $((grpc_rate_n / 10))
	fi
	for x in tcp shm; do
		n=$shm_lat_n
		[ $x = tcp ] && n=$tcp_lat_n
		be_rpc_lat $x $n
		be_rpc_rate $x $rate_s
	done
	for x in "${fo_groups[@]}"; do
		fo_run $x
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
ratio tcp_p50_vs_grpc_adaptive be_tcp_alat_p50 grpc_tcp_lat_p50 "<=" 0.5 \
	"be tcp rpc-lat p50, both ends adaptive / gRPC p50"
ratio tcp_p99_vs_grpc_adaptive be_tcp_alat_p99 grpc_tcp_lat_p99 "<=" 0.5 \
	"be tcp rpc-lat p99, both ends adaptive / gRPC p99"
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
		line=$(printf '{"test":"%s","impl":"%s","transport":"%s","polling":"%s","size":%s,"outstanding":%s' \
			"${G_TEST[$g]}" "${G_IMPL[$g]}" "${G_XPORT[$g]}" "${G_POLL[$g]}" "$size" "${G_OUT[$g]}")
		n=""
		for f in p50 cps; do
			[ -n "$(stats ${g}_$f)" ] && n=$f
		done
		if [ -z "$n" ]; then
			for f in p50_us p99_us avg_us calls_per_s calls_per_s_per_core; do
				line+=",\"$f\":null"
			done
			printf '%s,"status":"n/a","reason":"%s"}\n' "$line" \
				"$(printf '%s' "${ERRS[${g}_p50]:-no value}" | tr -d '"\\')"
			continue
		fi
		line+=",\"reps\":$(set -- $(stats ${g}_$n); echo $4),\"failed\":${FAILS[${g}_$n]}"
		for f in p50:p50_us p99:p99_us avg:avg_us cps:calls_per_s cpc:calls_per_s_per_core; do
			line+=$(stats_json "${f#*:}" "${g}_${f%%:*}")
		done
		printf '%s}\n' "$line"
	done
	for g in "${fo_groups[@]}"; do
		line=$(printf '{"test":"failover","impl":"be","transport":"%s","fault":"%s","paths":"%s","size":null,"p50_us":null,"p99_us":null,"calls_per_s_per_core":null' \
			"${F_XPORT[$g]}" "${F_FAULT[$g]}" "${F_PATHS[$g]}")
		if [ -z "$(stats ${g}_det)" ]; then
			printf '%s,"detect_ms":null,"recover_ms":null,"calls_failed":null,"status":"n/a","reason":"%s"}\n' \
				"$line" "$(printf '%s' "${ERRS[${g}_det]:-no value}" | tr -d '"\\')"
			continue
		fi
		line+=",\"reps\":$(set -- $(stats ${g}_det); echo $4),\"failed\":${FAILS[${g}_fail]}"
		for f in det:detect_ms rec:recover_ms; do
			line+=$(stats_json "${f#*:}" "${g}_${f%%:*}")
		done
		n=0
		for s in ${VALS[${g}_fail]}; do
			n=$((n + ${s%.*}))
		done
		line+=",\"calls\":${F_CALLS[$g]},\"calls_failed\":$n,\"deadline_ms\":${F_DEADLINE[$g]}"
		[ "${FAILS[${g}_fail]}" -gt 0 ] && line+=",\"error\":\"$(printf '%s' "${ERRS[${g}_fail]}" | tr -d '"\\')\""
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

notes=("latency: round trip, us"
	"failover: ms from the fault to detection / recovery (see the header of this script)"
	"cps: calls per second; cps/core: calls per CPU second of client + server"
	"polling: gRPC sleeps in epoll; be-perf rpc-lat busy-polls both ends (adaptive rows: spin, then sleep), rpc-rate spins then sleeps")
[ $pin -eq 1 ] || notes+=("not pinned (--no-pin): the scheduler places both ends")
cmp_finish
