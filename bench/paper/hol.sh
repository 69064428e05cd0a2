#!/usr/bin/env bash
# hol.sh - the paper's fragment-size and head-of-line experiment (issue 16
# section 4): the P99 of small messages while large transfers share their
# Engine, over a sweep of fragment sizes, with the fragment scheduler on
# (round-robin over the Sockets of an Engine, the default) and off (one
# FIFO per Engine).
#
#   bash bench/paper/hol.sh [--json] [--quick] [--reps N] [--build DIR]
#        [--out DIR] [--keep] [--frags 4k,16k,64k,256k] [--transports shm,tcp]
#        [--size B] [--big B] [--iters N] [--busy]
#
# Each point is one be-perf hol run (tools/be-perf/perf_sock.c): two
# Sockets on one Engine, one streaming --big (default 4 MiB: a trainer's
# push of 16k keys x dim 64) messages back to back, each acknowledged,
# the other doing --iters (default 2000) ping-pongs of --size (default
# 512 B: a ranker's small fetch) beside it; reported: the small
# messages' one-way latency (p50, p99, avg; RTT / 2) and the stream's
# MB/s. The fragment size is the config's frag_size (BE_FRAG_SIZE, in
# both processes: every fragment that size, no bulk fragments); "default"
# leaves it 0, the per-transport choice of docs/TUNING.md. Scheduling off
# is the config's frag_sched = 0 (be-perf --no-sched). Both ends use
# adaptive polling (spin, then sleep on events), as the parameter server
# does; --busy makes both spin (a 2-core host then measures the
# scheduler). Points run --reps times each (default 3; --quick: 1 rep,
# tcp only, 16k and default, 200 iterations, 1 MiB), interleaved.
#
# Output: a table of medians (min-max), $out/hol.json and $out/hol.png
# (small-message P99 against fragment size, a curve per transport and
# scheduling). --json: one line per point: experiment "hol", impl "be",
# transport, frag_size (bytes, 0 = default), sched "on"/"off", size, big,
# p50_us, p99_us, avg_us, big_mb_s (medians, with _min/_max), reps,
# runs_failed; then one line for the run's conditions.
# Exit status 1 if a run failed, 2 on usage or missing binaries.
# shellcheck disable=SC2317 # the measurements run through paper_reps
set -uo pipefail

prog=hol
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
paper_args "$@"
frags=default,4k,16k,64k,256k
transports=shm,tcp
size=512
big=4M
iters=2000
polling=--adaptive
# --quick sets the defaults; options given beside it still count.
if [ "$quick" = 1 ]; then
	frags=default,16k
	transports=tcp
	iters=200
	big=1M
fi
paper_opts --frags=frags --transports=transports --size=size --big=big \
	--iters=iters --busy:polling=--busy
paper_bins be-perf

# bytes SIZE: 16k -> 16384 (default -> 0)
bytes() {
	case "$1" in
	default) echo 0 ;;
	*[kK]) echo $(( ${1%[kK]} * 1024 )) ;;
	*[mM]) echo $(( ${1%[mM]} * 1048576 )) ;;
	*[!0-9]*|'') paper_die "bad size '$1'" ;;
	*) echo "$1" ;;
	esac
}
IFS=, read -r -a fl <<<"$frags"
IFS=, read -r -a trs <<<"$transports"
for f in "${fl[@]}"; do bytes "$f" >/dev/null; done
for t in "${trs[@]}"; do
	case "$t" in shm|tcp|verbs) ;; *) paper_die "--transports: shm, tcp or verbs, not '$t'" ;; esac
done

points=() # "transport frag sched"
for t in "${trs[@]}"; do
	for f in "${fl[@]}"; do
		for s in on off; do
			points+=("$t $f $s")
		done
	done
done
declare -A FAILS RERR

# one TRANSPORT FRAG SCHED: one be-perf hol run.
one() {
	local t=$1 f=$2 s=$3 m="$1/$2/$3" o rc fb sched=() p50 p99 avg mbs
	fb=$(bytes "$f")
	[ "$s" = off ] && sched=(--no-sched)
	o=$(BE_FRAG_SIZE=$fb timeout 300 "$bin/be-perf" hol --transport "$t" --size "$size" \
		--big "$big" --iters "$iters" --warmup 50 "$polling" "${sched[@]}" --json \
		2>"$work/err")
	rc=$?
	read -r p50 p99 avg mbs <<<"$(paper_jget "$o" p50_us p99_us avg_us mb_s)"
	if [ $rc -ne 0 ] || [ "$p99" = - ]; then
		FAILS[$m]=$(( ${FAILS[$m]:-0} + 1 ))
		RERR[$m]="exit $rc: $(tail -n1 "$work/err" | cut -c1-120)"
		return 1
	fi
	paper_add "$m.p50" "$p50"
	paper_add "$m.p99" "$p99"
	paper_add "$m.avg" "$avg"
	paper_add "$m.mbs" "$mbs"
}

# One repetition: every point in turn.
rep() {
	local p
	for p in "${points[@]}"; do
		# shellcheck disable=SC2086
		one $p || true
	done
}
paper_reps "$reps" rep

paper_stats_all
rc=0
paper_table_add transport "frag" sched "p50 us" "p99 us" "avg us" "stream MB/s" failed
for p in "${points[@]}"; do
	read -r t f s <<<"$p"
	m="$t/$f/$s"
	[ "${FAILS[$m]:-0}" -gt 0 ] && rc=1
	if [ -z "${VALS[$m.p99]:-}" ]; then
		paper_table_add "$t" "$f" "$s" n/a n/a n/a n/a "${RERR[$m]:-}"
		paper_json experiment=hol impl=be transport="$t" frag_size="$(bytes "$f")" sched="$s" \
			p99_us=null status=n/a reason:s="${RERR[$m]:-no value}"
		continue
	fi
	paper_table_add "$t" "$f" "$s" "$(paper_spread "$m.p50")" "$(paper_spread "$m.p99")" \
		"$(paper_spread "$m.avg")" "$(paper_spread "$m.mbs")" "${FAILS[$m]:-0}"
	paper_json experiment=hol impl=be transport="$t" frag_size="$(bytes "$f")" sched="$s" \
		size="$(bytes "$size")" big="$(bytes "$big")" p50_us:stats="$m.p50" \
		p99_us:stats="$m.p99" avg_us:stats="$m.avg" big_mb_s:stats="$m.mbs" reps="$reps" \
		runs_failed="${FAILS[$m]:-0}"
done
notes+=("small: $size B ping-pong (one-way = RTT/2) beside a stream of $big messages on the same Engine; ${polling#--} polling")
paper_conditions hol iters="$iters" polling="${polling#--}"

# hol.png: P99 against the fragment size (the default at x = 0 is left
# out: its size differs per transport), a curve per transport x sched.
curves=()
for t in "${trs[@]}"; do
	for s in on off; do
		d=$out/hol-$t-$s.txt
		: >"$d"
		for f in "${fl[@]}"; do
			[ "$f" = default ] && continue
			v=$(median "$t/$f/$s.p99")
			[ -n "$v" ] && echo "$(( $(bytes "$f") / 1024 )) $v" >>"$d"
		done
		curves+=("$t, scheduling $s=$d")
	done
done
paper_plot_files "$out/hol.png" "set title \"small-message P99 beside a $big stream on one Engine\"
set logscale x 2
set logscale y
set xlabel \"fragment size (KiB)\"
set ylabel \"p99 one-way latency (us)\"" linespoints "${curves[@]}"
paper_log "JSON: $jsonfile"
exit $rc
