#!/usr/bin/env bash
# fetch.sh - the paper's inference-fetch experiment (issue 16 section 4):
# average and P99 latency and CPU per fetch of one ranker fetching
# embeddings, over be against the same fetch over plain kernel TCP and
# over gRPC.
#
#   bash bench/paper/fetch.sh [--json] [--quick] [--reps N] [--build DIR]
#        [--out DIR] [--keep] [--qps Q] [--keys K] [--rows R] [--seconds S]
#        [--transports shm,tcp] [--verbs | --verbs-only] [--guest-qps Q]
#        [--guest-keys K]
#
# Measured, --reps times each (default 3; --quick: 1 rep of 1 s at 100
# fetches/s over 2^16 rows), interleaved (rep 1 of every measurement, then rep 2, ...)
# so load drift hits all alike:
#   be          shm, tcp   be-ps (one server, one shard, one table) and
#                          be-ps-load ranker: the parameter server over the
#                          RPC layer and the BE core, on each transport
#   kernel-tcp  tcp        tcp-fetch (bench/paper/tcp_fetch.c): the same
#                          fetch over blocking kernel TCP sockets, one
#                          thread per connection, 4 connections
#   grpc        tcp        grpc-fetch (bench/grpc): the same fetch as a
#                          gRPC unary call (Debian's libgrpc++); n/a when
#                          it is not built
# Every ranker offers the same open-loop load: Poisson arrivals at --qps
# (default 300) of fetches of --keys (default 1024) keys drawn Zipf(1.09)
# over --rows (default 2^20) rows of one table of dim 32 (deduplicated before sending),
# under the 30 ms deadline, for --seconds (default 10) after a warm-up;
# latency from each fetch's scheduled time to its rows being in the
# ranker's array. CPU per fetch: user + system CPU of ranker and server
# over the measured seconds / fetches.
#
# --verbs: also be and kernel-tcp inside the Soft-RoCE guest
# (test/rxe/rxe-run, under flock /tmp/be-rxe.lock): be-ps on verbs://
# (rxe0) and tcp-fetch over the guest's kernel TCP, the guest's two vCPUs
# shared by both ends; transport "verbs" and "guest-tcp". The guest is
# emulated (TCG), tens of times slower than the host: its load is
# --guest-qps (default 50) fetches of --guest-keys (default 256) keys.
# --verbs-only: the guest part alone.
#
# Output: a table of medians (min-max), the ratios be / kernel-tcp against
# the issue's goals (avg <= 0.5, P99 <= 0.4, CPU per fetch <= 0.5:
# reported, never enforced), $out/fetch.json, and $out/fetch-cdf.png (the
# latency CDF of the last repetition, gnuplot). --json: one line per
# measurement: experiment "fetch", impl, transport, avg_us, p99_us,
# p50_us, cpu_us_per_fetch (medians, each with _min and _max), reps,
# fetches, fetches_failed (summed); then one line per ratio (kind
# "ratio") and one for the run's conditions (kind "conditions").
# fetches_failed counts every fetch not answered with its rows within the
# deadline (deadline misses are a result on a loaded host, not a failure
# of the run). Exit status 1 if a run broke (a ranker exited with an
# error, a row was wrong) or gave no figures, 2 on usage or missing
# binaries, else 0.
set -uo pipefail

prog=fetch
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
paper_args "$@"
qps=300
keys=1024
rows=1048576
seconds=10
transports=shm,tcp
gqps=50
gkeys=256
verbs=0
verbs_only=0
inside=0
# --quick sets the defaults; options given beside it still count.
if [ "$quick" = 1 ]; then
	qps=100
	seconds=1
	rows=65536
fi
paper_opts --qps=qps --keys=keys --rows=rows --seconds=seconds \
	--transports=transports --verbs:verbs=1 --verbs-only:verbs=1,verbs_only=1 \
	--guest-qps=gqps --guest-keys=gkeys --inside-guest:inside=1
warmup=1
[ "$quick" = 1 ] && warmup=0.3
paper_bins be-ps be-ps-load bench/paper/tcp-fetch
grpc=$build/bench/grpc/grpc-fetch
tcpfetch=$build/bench/paper/tcp-fetch

declare -A FETCHES FAILED RERR
meas=() # "impl/transport", in report order

# record IMPL TRANSPORT AVG P50 P99 CPU FETCHES FAILED: one repetition.
# A repetition in which every fetch failed has no latency (the rankers'
# histograms hold answered fetches): it counts its fetches and failures
# only, so that no "0 us" passes for a figure.
record() {
	local m=$1/$2
	if [ "${7:-0}" -gt "${8:-0}" ]; then
		paper_add "$m.avg" "$3"
		paper_add "$m.p50" "$4"
		paper_add "$m.p99" "$5"
		paper_add "$m.cpu" "$6"
	else
		RERR[$m]="every fetch failed in a repetition"
	fi
	FETCHES[$m]=$(( ${FETCHES[$m]:-0} + ${7:-0} ))
	FAILED[$m]=$(( ${FAILED[$m]:-0} + ${8:-0} ))
}

# be_run TRANSPORT REP: be-ps on TRANSPORT, one be-ps-load ranker.
be_run() {
	local tr=$1 r=$2 listen o rc spid
	case "$tr" in
	shm) listen="shm://$(paper_shm_name "s$r")" ;;
	tcp) listen=tcp://127.0.0.1:0 ;;
	verbs) listen="verbs://${BE_RXE_IP0:?not in the rxe guest}:0" ;;
	esac
	paper_ps_start "be-$tr-$r" "$work/model.conf" --server 0 --listen "$listen"
	spid=$spawned
	: >"$work/naming"
	# shellcheck disable=SC2086
	paper_naming_add "$work/naming" be.ps.0 s0 $addrs
	o=$("$bin/be-ps-load" ranker --config "$work/model.conf" --naming "file://$work/naming" \
		--tables 1 --keys "$keys" --rows "$rows" --rate "$qps" --duration "$seconds" --server-pid "$spid" \
		--json --cdf "$work/cdf-be-$tr" 2>"$work/load.err")
	rc=$?
	paper_kill "$spid"
	local ops errs avg p50 p99 cpu
	read -r ops errs avg p50 p99 cpu <<<"$(paper_jget "$o" ops errors fetch_avg_us \
		fetch_p50_us fetch_p99_us cpu_s_per_1000)"
	if [ $rc -ne 0 ] || [ "$ops" = - ]; then
		RERR[be/$tr]="be-ps-load exit $rc: $(tail -n1 "$work/load.err")"
		return 1
	fi
	# cpu_s_per_1000 (CPU seconds per 1000 fetches) is ms per fetch.
	record be "$tr" "$avg" "$p50" "$p99" "$(awk -v x="$cpu" 'BEGIN { printf "%.1f", x * 1000 }')" \
		"$ops" "$errs"
}

# base_run IMPL TRANSPORT BINARY [ARGS]: tcp-fetch or grpc-fetch ranker
# (each spawns its own server) with the common load.
base_run() {
	local impl=$1 tr=$2 b=$3 o rc
	shift 3
	o=$("$b" ranker --qps "$qps" --keys "$keys" --seconds "$seconds" --warmup "$warmup" \
		--tables 1 --rows "$rows" --dim 32 --deadline-ms 30 --json --cdf "$work/cdf-$impl-$tr" "$@" \
		2>"$work/base.err")
	rc=$?
	local n errs avg p50 p99 cpu
	read -r n errs avg p50 p99 cpu <<<"$(paper_jget "$o" queries errors avg_us p50_us p99_us \
		cpu_us_per_fetch)"
	if [ "$n" = - ]; then
		RERR[$impl/$tr]="$(basename "$b") exit $rc: $(tail -n1 "$work/base.err")"
		return 1
	fi
	# errors: every fetch not answered with its rows in time, deadline
	# misses included, as be-ps-load counts them.
	record "$impl" "$tr" "$avg" "$p50" "$p99" "$cpu" "$n" "$errs"
	[ $rc -eq 0 ] || RERR[$impl/$tr]="$(basename "$b") exit $rc: $(tail -n1 "$work/base.err")"
}

# ---- inside the Soft-RoCE guest: be on verbs, kernel TCP beside it ---------
if [ "$inside" = 1 ]; then
	paper_model "$work/model.conf" 1 1 1 32
	for r in $(seq "$reps"); do
		paper_log "guest repetition $r/$reps"
		be_run verbs "$r" || true
		base_run kernel-tcp guest-tcp "$tcpfetch" || true
	done
	for m in be/verbs kernel-tcp/guest-tcp; do
		paper_json experiment=fetch impl="${m%/*}" transport="${m#*/}" \
			avg_us:stats="$m.avg" p99_us:stats="$m.p99" p50_us:stats="$m.p50" \
			cpu_us_per_fetch:stats="$m.cpu" reps="$reps" fetches="${FETCHES[$m]:-0}" \
			fetches_failed="${FAILED[$m]:-0}" error:s="${RERR[$m]:-}" >/dev/null
		cp "$work/cdf-${m%/*}-${m#*/}" "$out/fetch-cdf-${m%/*}-${m#*/}.txt" 2>/dev/null || true
	done
	exit 0
fi

# ---- on the host -------------------------------------------------------------
paper_model "$work/model.conf" 1 1 1 32
IFS=, read -r -a trs <<<"$transports"
for t in "${trs[@]}"; do
	case "$t" in shm|tcp) meas+=("be/$t") ;; *) paper_die "--transports: shm or tcp, not '$t'" ;; esac
done
meas+=(kernel-tcp/tcp grpc/tcp)
have_grpc=0
if [ -x "$grpc" ]; then
	have_grpc=1
else
	RERR[grpc/tcp]="not built: $grpc (needs libgrpc++-dev, protobuf-compiler-grpc)"
fi
if [ "$verbs_only" = 1 ]; then
	meas=()
	trs=()
	reps_host=0
else
	reps_host=$reps
fi
# One repetition: be on each transport, then the baselines.
# shellcheck disable=SC2317 # run by paper_reps
rep() {
	local t
	for t in "${trs[@]}"; do
		be_run "$t" "$1" || true
	done
	base_run kernel-tcp tcp "$tcpfetch" --conns 4 || true
	[ "$have_grpc" = 1 ] && { base_run grpc tcp "$grpc" --verify sample || true; }
}
paper_reps "$reps_host" rep

if [ "$verbs" = 1 ]; then
	runner=$root/test/rxe/rxe-run
	paper_log "the verbs part, in the Soft-RoCE guest (waiting for /tmp/be-rxe.lock)"
	if [ -x "$runner" ]; then
		gout=$work/guest
		mkdir -p "$gout"
		flock /tmp/be-rxe.lock "$runner" --timeout $((600 + reps * (seconds + 60) * 2)) \
			--cwd "$root" --rw "$gout" -- bash "$root/bench/paper/fetch.sh" --inside-guest \
			--reps "$reps" --build "$build" --out "$gout" --qps "$gqps" --keys "$gkeys" --rows "$rows" \
			--seconds "$seconds" >"$work/guest.log" 2>&1 ||
			paper_log "the guest run failed: $(tail -n 3 "$work/guest.log" | tr '\n' ' ')"
	fi
fi

load_after=$(paper_load)

# ---- report ------------------------------------------------------------------
rc=0
paper_stats_all
paper_table_add impl transport "avg us" "p50 us" "p99 us" "CPU us/fetch" fetches failed
for m in "${meas[@]}"; do
	impl=${m%/*}
	tr=${m#*/}
	if [ -z "${VALS[$m.avg]:-}" ]; then
		paper_table_add "$impl" "$tr" n/a n/a n/a n/a "${FETCHES[$m]:-0}" \
			"${FAILED[$m]:-0}: ${RERR[$m]:-no value}"
		paper_json experiment=fetch impl="$impl" transport="$tr" avg_us=null p99_us=null \
			cpu_us_per_fetch=null fetches="${FETCHES[$m]:-0}" fetches_failed="${FAILED[$m]:-0}" \
			status=n/a reason:s="${RERR[$m]:-no value}"
		[ "$impl" = grpc ] && [ $have_grpc = 0 ] || rc=1
		continue
	fi
	[ -n "${RERR[$m]:-}" ] && { rc=1; notes+=("$m: ${RERR[$m]}"); }
	paper_table_add "$impl" "$tr" "$(paper_spread "$m.avg")" "$(paper_spread "$m.p50")" \
		"$(paper_spread "$m.p99")" "$(paper_spread "$m.cpu")" "${FETCHES[$m]}" "${FAILED[$m]}"
	paper_json experiment=fetch impl="$impl" transport="$tr" avg_us:stats="$m.avg" \
		p99_us:stats="$m.p99" p50_us:stats="$m.p50" cpu_us_per_fetch:stats="$m.cpu" \
		reps="$reps" fetches="${FETCHES[$m]}" fetches_failed="${FAILED[$m]}" qps="$qps" \
		keys="$keys" seconds="$seconds"
done
if [ "$verbs" = 1 ]; then
	if [ -s "$work/guest/fetch.json" ]; then
		while read -r line; do
			echo "$line" >>"$jsonfile"
			[ "$json" = 1 ] && echo "$line"
			m=$(printf '%s' "$line" | sed -n 's/.*"impl":"\([^"]*\)","transport":"\([^"]*\)".*/\1\/\2/p')
			read -r avg p50 p99 cpu n f <<<"$(paper_jget "$line" avg_us p50_us p99_us \
				cpu_us_per_fetch fetches fetches_failed)"
			paper_table_add "${m%/*}" "${m#*/} (guest)" "$avg" "$p50" "$p99" "$cpu" "$n" "$f"
			# The guest's medians, for the ratio below.
			[ "$avg" != - ] && VALS[$m.avg]=$avg VALS[$m.p99]=$p99 VALS[$m.cpu]=$cpu
			[ "$avg" = - ] && rc=1
		done <"$work/guest/fetch.json"
		cp "$work"/guest/fetch-cdf-*.txt "$work/" 2>/dev/null || true
	else
		paper_table_add be "verbs (guest)" n/a n/a n/a n/a 0 "guest run failed: see --keep"
		paper_json experiment=fetch impl=be transport=verbs avg_us=null p99_us=null \
			cpu_us_per_fetch=null status=n/a reason:s="the Soft-RoCE guest run failed"
		rc=1
	fi
fi

# ratio_of A B: median(A) / median(B), 3 decimals ("null" when B is 0).
ratio_of() {
	awk -v a="$(median "$1")" -v b="$(median "$2")" \
		'BEGIN { if (b > 0) printf "%.3f", a / b; else print "null" }'
}

# ratio BE BASE: be / kernel TCP against the goals.
ratio() {
	local b=$1 k=$2 ra rp rc_ st
	[ -n "${VALS[$b.avg]:-}" ] && [ -n "${VALS[$k.avg]:-}" ] || return 0
	ra=$(ratio_of "$b.avg" "$k.avg")
	rp=$(ratio_of "$b.p99" "$k.p99")
	rc_=$(ratio_of "$b.cpu" "$k.cpu")
	st=$(awk -v a="$ra" -v p="$rp" -v c="$rc_" 'BEGIN {
		print (a <= 0.5 ? "met" : "missed") "," (p <= 0.4 ? "met" : "missed") "," (c <= 0.5 ? "met" : "missed") }')
	notes+=("ratio ${b} / ${k}: avg $ra (goal <= 0.5, ${st%%,*}), p99 $rp (<= 0.4, $(echo "$st" | cut -d, -f2)), CPU/fetch $rc_ (<= 0.5, ${st##*,})")
	paper_json kind=ratio experiment=fetch impl="${b%/*}" transport="${b#*/}" vs:s="$k" \
		avg_ratio="$ra" p99_ratio="$rp" cpu_ratio="$rc_" avg_goal=0.5 p99_goal=0.4 cpu_goal=0.5 \
		avg_status="$(echo "$st" | cut -d, -f1)" p99_status="$(echo "$st" | cut -d, -f2)" \
		cpu_status="$(echo "$st" | cut -d, -f3)"
}
for t in "${trs[@]}"; do
	ratio "be/$t" kernel-tcp/tcp
done
[ "$verbs" = 1 ] && ratio be/verbs kernel-tcp/guest-tcp
paper_conditions fetch qps="$qps" keys="$keys" seconds="$seconds"

# The latency CDF of the last repetition, one curve per implementation.
curves=()
for m in "${meas[@]}" be/verbs kernel-tcp/guest-tcp; do
	f=$work/cdf-${m%/*}-${m#*/}
	[ -s "$f" ] || f=$work/fetch-cdf-${m%/*}-${m#*/}.txt
	[ -s "$f" ] || continue
	cp "$f" "$out/fetch-cdf-${m%/*}-${m#*/}.txt"
	curves+=("$m=$out/fetch-cdf-${m%/*}-${m#*/}.txt")
done
[ ${#curves[@]} -gt 0 ] &&
	paper_plot_cdf "$out/fetch-cdf.png" "fetch latency, $keys keys at $qps/s (last repetition)" "${curves[@]}"
paper_log "JSON: $jsonfile"
exit $rc
