#!/usr/bin/env bash
# failover.sh - the paper's failover-under-load experiment (issue 16
# section 4): while a ranker fetches, one serving replica is hit by a
# fault; reported: fetches failed (goal: zero under the default 30 ms
# deadline), the P99 during the fault, and the time back to normal.
#
#   bash bench/paper/failover.sh [--json] [--quick] [--reps N] [--build DIR]
#        [--out DIR] [--keep] [--faults kill,sigstop,port-down,blackhole]
#        [--seconds S] [--fault-ms MS] [--qps Q]
#
# The cluster: 2 shard servers, each served by a primary and a serving
# replica (be-ps, as in the demo), every process listening on kernel TCP
# with two paths in its naming record: the first through a tcp-relay
# (bench/paper/tcp_relay.c), the second straight to its port, so a path
# can fail without root, iptables or ip rules. One be-ps-load ranker
# fetches --qps (default 200) per second, 256 keys of each of 2 tables,
# under the default deadline (30 ms) for --seconds (default 12; --quick
# 4). At a third of the run the fault hits replica r0 (shard server 0):
#   kill       kill -9 of r0 and of its relay, so both its ports refuse
#              connections as a dead host's do (replica reselection; it
#              stays dead)
#   sigstop    SIGSTOP of r0 (a frozen process: hedges and ejection),
#              SIGCONT after --fault-ms
#   port-down  r0's first path goes down: its relay killed (connections
#              reset, connects refused), so calls switch port; the relay
#              comes back on the same port after --fault-ms (port return)
#   blackhole  r0's first path falls silent: its relay SIGSTOPped (the
#              connections stay up, nothing comes back, as a blackholed
#              RDMA path), SIGCONT after --fault-ms (default 2000; 1000
#              with --quick)
# On verbs (a NIC's link down, a QP broken) the same faults run in the
# Soft-RoCE guest as the RPC layer's tests (ctest -L failover); see
# docs/RESULTS.md.
#
# From the ranker's per-fetch trace (be-ps-load --trace): fetches failed
# (scheduled from the fault on; those before it are reported apart as
# failed_before_fault), baseline P99 (fetches scheduled in the second
# before the fault), P99 during the fault (scheduled
# from the fault to the repair, or to fault + --fault-ms for kill), and
# recover_ms: from the fault to the start of the first two consecutive
# 200 ms windows whose fetches all succeeded within max(2 x the baseline
# P99, 5 ms) (0 when the fault never showed); repair_ms likewise from the
# repair. Each fault runs --reps times (default 3; --quick 1) on a fresh
# cluster.
#
# Output: a table (medians, min-max; failed fetches summed), $out/
# failover.json and $out/failover.png (the p99 of each 200 ms window of
# the last repetition of each fault, against time from the fault).
# --json: one line per fault: experiment "failover", impl "be",
# transport "tcp", fault, fetches, fetches_failed and
# failed_before_fault (summed over reps),
# p99_us (during the fault), baseline_p99_us, recover_ms, repair_ms
# (medians with _min/_max), reps; then one line for the run conditions.
# Failed fetches are the result (each was answered with an error by its
# deadline), not a failure of the script. Exit status 1 if a run broke (a
# server did not start, the ranker gave no result), 2 on usage or
# missing binaries, else 0.
# shellcheck disable=SC2317 # the measurements run through paper_reps
set -uo pipefail

prog=failover
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
paper_args "$@"
faults=kill,sigstop,port-down,blackhole
seconds=12
fault_ms=2000
qps=200
# --quick sets the defaults; options given beside it still count.
if [ "$quick" = 1 ]; then
	seconds=4
	fault_ms=1000
fi
paper_opts --faults=faults --seconds=seconds --fault-ms=fault_ms --qps=qps
paper_bins be-ps be-ps-load bench/paper/tcp-relay
relay=$build/bench/paper/tcp-relay
IFS=, read -r -a fl <<<"$faults"
for f in "${fl[@]}"; do
	case "$f" in kill|sigstop|port-down|blackhole) ;; *) paper_die "unknown fault '$f'" ;; esac
done

now_ms() { date +%s%3N; }

# relay_start NAME TO-PORT [LISTEN-PORT]: a tcp-relay; sets $spawned and
# $rport.
relay_start() {
	local name=$1 i
	paper_spawn "$name" "$relay" --to "$2" --listen "${3:-0}"
	for i in $(seq 600); do
		grep -q '^ready$' "$work/$name.out" 2>/dev/null && break
		kill -0 "$spawned" 2>/dev/null || break
		sleep 0.05
	done
	grep -q '^ready$' "$work/$name.out" 2>/dev/null || paper_die "tcp-relay $name did not start"
	rport=$(sed -n 's/^listening //p' "$work/$name.out")
}

# cluster R: (R names the run) 2 shard servers x (primary, replica), each behind a relay.
# Sets PID[name], RELAY[name] (pid), RPORT[name], PORT[name].
declare -A PID RELAY RPORT PORT
cluster() {
	local r=$1 i n a
	paper_model "$work/model.conf" 2 2 2 16
	rm -rf "$work/ckpt-$r"
	mkdir -p "$work/ckpt-$r"
	: >"$work/naming"
	for i in 0 1; do
		for n in "p$i" "r$i"; do
			if [ "${n:0:1}" = p ]; then
				paper_ps_start "$n-$r" "$work/model.conf" --server "$i" \
					--listen tcp://127.0.0.1:0 --ckpt-dir "$work/ckpt-$r"
			else
				paper_ps_start "$n-$r" "$work/model.conf" --server "$i" \
					--listen tcp://127.0.0.1:0 --replica --follow "$work/ckpt-$r" \
					--follow-ms 200
			fi
			PID[$n]=$spawned
			a=${addrs%% *}
			PORT[$n]=${a##*:}
			relay_start "relay-$n-$r" "${PORT[$n]}"
			RELAY[$n]=$spawned
			RPORT[$n]=$rport
			paper_naming_add "$work/naming" "be.ps.$i" "$n" "tcp://127.0.0.1:$rport" \
				"tcp://127.0.0.1:${PORT[$n]}"
		done
	done
}

# window_stats TRACE FAULT_MS REPAIR_MS: "fetches failed failed_before
# base_p99 fault_p99 recover_ms repair_ms" from a be-ps-load trace (lines
# "T_ms lat_us status"): failed counts the fetches scheduled from the
# fault on, failed_before those before it; the baseline is the second
# before the fault (the first moments of a run pay connection set-up).
window_stats() {
	awk -v f="$2" -v rep="$3" -v W=200 '
	function p99(a, n,   i, j, t) {
		if (!n) return 0
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		i = int(0.99 * n + 0.999999); if (i < 1) i = 1
		return a[i]
	}
	{
		t[NR] = $1; l[NR] = $2; s[NR] = $3; n = NR
		if ($3 != 0 && $1 >= f) failed++
		if ($3 != 0 && $1 < f) before++
		if ($1 < f && $1 >= f - 1000) b[++nb] = $2
		else if ($1 < rep) d[++nd] = $2
	}
	# recovery FROM: the start of the first two good windows in a row
	# after FROM, minus FROM; a window is good when every fetch scheduled
	# in it succeeded within lim.
	function recovery(from,   k, w, bad, good, first) {
		for (w = 0; w < 1000; w++) { bad[w] = 0; seen[w] = 0 }
		for (k = 1; k <= n; k++) {
			if (t[k] < from) continue
			w = int((t[k] - from) / W)
			if (w >= 1000) continue
			seen[w] = 1
			if (s[k] != 0 || l[k] > lim) bad[w] = 1
		}
		for (w = 0; w < 999; w++)
			if (!bad[w] && !bad[w + 1]) return w * W
		return -1
	}
	END {
		bp = p99(b, nb)
		lim = 2 * bp; if (lim < 5000) lim = 5000
		dp = p99(d, nd)
		printf "%d %d %d %.1f %.1f %d %d\n", n, failed, before, bp, dp, recovery(f), recovery(rep)
	}' "$1"
}

# series TRACE FAULT_MS OUT: the p99 of each 200 ms window, in ms from
# the fault, for the plot.
series() {
	awk -v f="$2" -v W=200 '{
		w = int(($1 - f + 100000) / W) - int(100000 / W)
		v[w, ++c[w]] = $2
	}
	END {
		for (w = -50; w <= 200; w++) {
			n = c[w]; if (!n) continue
			for (i = 1; i <= n; i++) a[i] = v[w, i]
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			i = int(0.99 * n + 0.999999); if (i < 1) i = 1
			printf "%d %.1f\n", w * W, a[i]
		}
	}' "$1" >"$3"
}

declare -A FETCHES FAILED BEFORE RERR
# run FAULT R: one fresh cluster, one ranker, one fault.
run() {
	local fault=$1 r=$2 lpid t_fault t_repair victim=r0 rc o st n failed before bp dp rec repr
	cluster "$fault-$r"
	# The ranker counts every server's CPU and memory, not that we
	# report them here; its deadline is the default (30 ms).
	paper_spawn "ranker-$fault-$r" "$bin/be-ps-load" ranker --config "$work/model.conf" \
		--naming "file://$work/naming" --tables 2 --keys 256 --rate "$qps" \
		--duration "$seconds" --json --trace "$work/trace-$fault-$r"
	lpid=$spawned
	sleep "$(awk -v s="$seconds" 'BEGIN { print s / 3 }')"
	t_fault=$(now_ms)
	case "$fault" in
	kill) # The process and every port of it: a relay left in front
		# of a dead server would accept and close connections, which a
		# dead host does not (it refuses them).
		kill -9 "${PID[$victim]}" "${RELAY[$victim]}" ;;
	sigstop) kill -STOP "${PID[$victim]}" ;;
	port-down) paper_kill "${RELAY[$victim]}" ;;
	blackhole) kill -STOP "${RELAY[$victim]}" ;;
	esac
	sleep "$(awk -v m="$fault_ms" 'BEGIN { print m / 1000 }')"
	t_repair=$(now_ms)
	case "$fault" in
	kill) ;;
	sigstop) kill -CONT "${PID[$victim]}" ;;
	port-down)
		relay_start "relay-$victim-$r-back" "${PORT[$victim]}" "${RPORT[$victim]}"
		RELAY[$victim]=$spawned
		;;
	blackhole) kill -CONT "${RELAY[$victim]}" ;;
	esac
	paper_wait_pid "$lpid" $((seconds + 60)) || paper_kill "$lpid"
	o=$(cat "$work/ranker-$fault-$r.out")
	# The ranker's own exit status is not ours to read (spawned and
	# disowned): its JSON line is the proof it finished.
	rc=0
	[ "$(paper_jget "$o" ops)" = - ] && rc=1
	paper_kill "${PID[@]}" "${RELAY[@]}"
	if [ $rc -ne 0 ]; then
		RERR[$fault]="the ranker gave no result: $(tail -n1 "$work/ranker-$fault-$r.err")"
		return 1
	fi
	read -r n failed before bp dp rec repr <<<"$(window_stats "$work/trace-$fault-$r" "$t_fault" "$t_repair")"
	st=$(paper_jget "$o" ops errors)
	FETCHES[$fault]=$(( ${FETCHES[$fault]:-0} + ${st% *} ))
	FAILED[$fault]=$(( ${FAILED[$fault]:-0} + failed ))
	BEFORE[$fault]=$(( ${BEFORE[$fault]:-0} + before ))
	# A fetch that failed without a trace line (refused at once) counts
	# as failed during the fault: that is the conservative side.
	[ $(( before + failed )) -lt "${st#* }" ] &&
		FAILED[$fault]=$(( FAILED[$fault] + ${st#* } - before - failed ))
	paper_add "$fault.base" "$bp"
	paper_add "$fault.p99" "$dp"
	[ "$rec" -ge 0 ] && paper_add "$fault.rec" "$rec"
	[ "$fault" != kill ] && [ "$repr" -ge 0 ] && paper_add "$fault.repair" "$repr"
	series "$work/trace-$fault-$r" "$t_fault" "$out/failover-$fault.txt"
	paper_log "$fault rep $r: fetches ${st% *}, failed $failed (before the fault $before), p99 base $bp us, during $dp us, recovered in $rec ms"
}

rm -f "$out"/failover-*.txt
# One repetition: every fault in turn.
rep() {
	local f
	for f in "${fl[@]}"; do
		run "$f" "$1" || true
	done
}
paper_reps "$reps" rep

paper_stats_all
rc=0
paper_table_add fault fetches failed "failed before" "base p99 us" "p99 us (fault)" "recover ms" "repair ms"
for f in "${fl[@]}"; do
	[ -n "${RERR[$f]:-}" ] && { rc=1; notes+=("$f: ${RERR[$f]}"); }
	if [ -z "${VALS[$f.p99]:-}" ]; then
		paper_table_add "$f" 0 - - n/a n/a n/a n/a
		paper_json experiment=failover impl=be transport=tcp fault="$f" fetches_failed=null \
			p99_us=null recover_ms=null status=n/a reason:s="${RERR[$f]:-no value}"
		rc=1
		continue
	fi
	paper_table_add "$f" "${FETCHES[$f]}" "${FAILED[$f]}" "${BEFORE[$f]:-0}" "$(paper_spread "$f.base")" \
		"$(paper_spread "$f.p99")" "$(paper_spread "$f.rec")" \
		"$([ "$f" = kill ] && echo - || paper_spread "$f.repair")"
	paper_json experiment=failover impl=be transport=tcp fault="$f" fetches="${FETCHES[$f]}" \
		fetches_failed="${FAILED[$f]}" failed_before_fault="${BEFORE[$f]:-0}" p99_us:stats="$f.p99" baseline_p99_us:stats="$f.base" \
		recover_ms:stats="$f.rec" repair_ms:stats="$f.repair" fault_ms="$fault_ms" \
		deadline_ms=30 reps="$reps"
done
notes+=("ranker: $qps fetches/s x 2 tables x 256 keys, deadline 30 ms; fault on replica r0 at ${seconds}/3 s, repaired after $fault_ms ms")
paper_conditions failover qps="$qps" seconds="$seconds"

curves=()
for f in "${fl[@]}"; do
	curves+=("$f=$out/failover-$f.txt")
done
paper_plot_files "$out/failover.png" "set title \"fetch p99 per 200 ms window around the fault (last repetition)\"
set xlabel \"ms from the fault\"
set ylabel \"p99 (us)\"
set logscale y
set arrow from 0, graph 0 to 0, graph 1 nohead
set arrow from $fault_ms, graph 0 to $fault_ms, graph 1 nohead dashtype 2" linespoints "${curves[@]}"
paper_log "JSON: $jsonfile"
exit $rc
