#!/usr/bin/env bash
# incast.sh - the paper's training incast (issue 16 section 4): N trainers
# (be-ps-load trainer) push gradients to one be-ps server at the same
# instants, through one bottleneck, with the software send window on (the
# default) and off (BE_SEND_WINDOW=off on the trainers); P99 push latency
# and what stands for the paper's "no PFC pauses": the losses at the
# bottleneck and the retransmissions they cause.
#
#   bash bench/paper/incast.sh [--transport tcp|verbs] [--trainers "4 8 16"]
#        [--steps N] [--period-ms P] [--keys K] [--rate R] [--limit B]
#        [--guests 1|2] [common options: --json --quick --reps --build
#        --out --keep]
#
# tcp (the default; needs root): the server in one network namespace, the
#   trainers in another, joined by a veth pair whose trainer side has a
#   tbf qdisc (--rate, default 400mbit; --limit, default 128kb of queue):
#   the switch port toward the server. Counts TCP retransmissions with
#   nstat in the trainers' namespace (TcpRetransSegs, TcpExtTCPTimeouts)
#   and the tbf's drops.
# verbs: the same over Soft-RoCE between two QEMU guests (test/rxe/rxe-run
#   --socket: their NICs joined over host UDP), the server in one and the
#   trainers in the other, the tbf on the trainers' eth0 (--rate default
#   60mbit: the guests are emulated). Counts Soft-RoCE's hw_counters of
#   both ends (retransmissions, sequence errors, RNR retries). Takes
#   /tmp/be-rxe.lock while its guests run. --guests 1: both in one guest
#   over rxe0 (no bottleneck then: traffic to one's own address does not
#   pass a qdisc).
#
# Each trainer step: pull, --compute-us 5000 of simulated work, push of
# --keys keys (default 4096, verbs 1024; Zipf 1.15) of 2 tables of dim
# 64, starting on multiples of --period-ms of the wall clock, so all
# pushes start together. p99_us is the largest of the trainers' push P99s (a
# synchronous step waits for its slowest trainer); p50_us the median of
# their P50s. --json: one line per (transport, trainers, window) with
# medians over --reps runs. Writes $out/incast-TRANSPORT.json and .png.
set -uo pipefail

prog=incast
# shellcheck source=bench/paper/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

transport=tcp
trainers_list="4 8 16"
steps=""
period=""
keys=""
rate=""
limit=128kb
guests=2
inside=""
shared=""
compute_us=5000

# ---- inside a guest (verbs) -------------------------------------------------

# hw NAME: the Soft-RoCE counters of rxe0 as "name value" lines into NAME.
hw_dump() {
	local d=/sys/class/infiniband/${BE_RXE_DEV0:-rxe0}/ports/1/hw_counters f
	for f in "$d"/*; do
		[ -f "$f" ] && echo "${f##*/} $(cat "$f")"
	done >"$1.tmp" && mv "$1.tmp" "$1"
}

# wait_file PATH [SECONDS]: until PATH exists (a file another guest writes
# through the shared 9p directory); 1 after the bound (default 600 s) or
# as soon as the run is over (the file finish: the other guest gave up).
wait_file() {
	local n=$(( ${2:-600} * 10 ))
	while [ ! -e "$1" ] && [ $n -gt 0 ]; do
		[ "${1##*/}" != finish ] && [ -e "$shared/finish" ] && return 1
		sleep 0.1
		n=$((n - 1))
	done
	[ -e "$1" ]
}

# The server guest: one be-ps for the whole plan; counters before and
# after each run, when the trainers' guest asks.
inside_server() {
	local ip=$BE_RXE_IP0 r
	paper_model "$work/model.conf" 1 1 2 64
	cp "$work/model.conf" "$shared/model.conf"
	paper_ps_start srv "$work/model.conf" --listen "verbs://$ip:$port"
	echo "$addrs" >"$shared/server.addr.tmp" && mv "$shared/server.addr.tmp" "$shared/server.addr"
	while read -r r; do
		wait_file "$shared/$r.start" || { paper_log "no start for $r"; return 1; }
		hw_dump "$shared/$r.srv.before"
		wait_file "$shared/$r.end" || { paper_log "no end for $r"; return 1; }
		hw_dump "$shared/$r.srv.after"
	done <"$shared/plan"
	wait_file "$shared/finish"
	kill -0 "$spawned" 2>/dev/null || { paper_log "be-ps died"; cat "$work/srv.err" >&2; return 1; }
	return 0
}

# One run of N trainers with window W; their JSON lines into $dir/$r.tr.
# The trainers' namespace prefix (tcp) is in $nsx.
run_trainers() {
	local n=$1 w=$2 dir=$3 r=$4 naming=$5 conf=$6 i pids=() env=()
	[ "$w" = off ] && env=(BE_SEND_WINDOW=off)
	# In an emulated guest 16 processes opening verbs connections at once
	# take longer than the default connect timeout (10 s).
	[ -n "$inside" ] && env+=(BE_CONNECT_TIMEOUT_MS=60000)
	for i in $(seq "$n"); do
		$nsx env "${env[@]}" "$bin/be-ps-load" trainer --config "$conf" --naming "file://$naming" \
			--tables 2 --keys "$keys" --steps "$steps" --compute-us "$compute_us" \
			--period-ms "$period" --duration 3600 --timeout-us 20000000 --seed "$i" --json \
			>"$dir/$r.tr$i" 2>"$work/$r.tr$i.err" &
		pids+=($!)
		# Staggered: an emulated server accepts one connection at a
		# time slowly, and the warm-up fetch has 10 s. The steps still
		# start together (the wall-clock barrier).
		[ -n "$inside" ] && sleep 1
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || paper_log "$r: trainer $((i + 1)) failed: $(tail -n 2 "$work/$r.tr$((i + 1)).err" | tr '\n' ' ')"
	done
	cat "$dir/$r".tr[0-9]* >"$dir/$r.tr" 2>/dev/null
}

# The trainers' guest: the bottleneck, then every run of the plan.
inside_trainers() {
	local r n w
	wait_file "$shared/server.addr" || { paper_log "the server guest never got ready"; return 1; }
	nsx=""
	tc qdisc add dev eth0 root tbf rate "$rate" burst 32kb limit "$limit" ||
		{ paper_log "tc tbf on eth0 failed"; return 1; }
	# shellcheck disable=SC2046
	paper_naming_add "$work/naming" be.ps.0 b0 $(cat "$shared/server.addr")
	paper_naming_add "$work/naming" be.ps.0.primary b0 $(cat "$shared/server.addr")
	while read -r r; do
		n=${r#*-n}; n=${n%%-*}
		w=${r#*-w}; w=${w%%-*}
		touch "$shared/$r.start"
		wait_file "$shared/$r.srv.before" 60 || { paper_log "server counters missing"; return 1; }
		hw_dump "$shared/$r.cli.before"
		tc -s qdisc show dev eth0 >"$shared/$r.tc.before"
		run_trainers "$n" "$w" "$shared" "$r" "$work/naming" "$shared/model.conf"
		hw_dump "$shared/$r.cli.after"
		tc -s qdisc show dev eth0 >"$shared/$r.tc.after"
		touch "$shared/$r.end"
		wait_file "$shared/$r.srv.after" 60 || true
		paper_log "$r done"
	done <"$shared/plan"
	touch "$shared/finish"
}

# One guest: server and trainers side by side over rxe0 (no bottleneck).
inside_both() {
	local r n w
	nsx=""
	paper_model "$work/model.conf" 1 1 2 64
	paper_ps_start srv "$work/model.conf" --listen "verbs://$BE_RXE_IP0:$port"
	# shellcheck disable=SC2086
	{ paper_naming_add "$work/naming" be.ps.0 b0 $addrs
	  paper_naming_add "$work/naming" be.ps.0.primary b0 $addrs; }
	while read -r r; do
		n=${r#*-n}; n=${n%%-*}
		w=${r#*-w}; w=${w%%-*}
		hw_dump "$shared/$r.cli.before"
		run_trainers "$n" "$w" "$shared" "$r" "$work/naming" "$work/model.conf"
		hw_dump "$shared/$r.cli.after"
		paper_log "$r done"
	done <"$shared/plan"
}

# ---- host ---------------------------------------------------------------------

# tc_stat FILE FIELD: "dropped" or "Sent" (bytes) of the first qdisc line.
tc_stat() {
	case "$2" in
	dropped) sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' "$1" | head -n1 ;;
	sent) sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' "$1" | head -n1 ;;
	esac
}

# hw_delta BEFORE AFTER NAME...: the sum of the counters NAME grew by.
hw_delta() {
	local b=$1 a=$2 s=0 k x y
	shift 2
	for k in "$@"; do
		x=$(awk -v k="$k" '$1 == k { print $2 }' "$b" 2>/dev/null)
		y=$(awk -v k="$k" '$1 == k { print $2 }' "$a" 2>/dev/null)
		[ -n "$x" ] && [ -n "$y" ] && s=$((s + y - x))
	done
	echo "$s"
}

# nstat_abs NS: "retrans timeouts" of the namespace, absolute.
nstat_abs() {
	local o
	o=$(NSTAT_HISTORY=$work/nstat.hist ip netns exec "$1" nstat -az TcpRetransSegs TcpExtTCPTimeouts)
	echo "$(echo "$o" | awk '$1 == "TcpRetransSegs" { print $2 }') $(echo "$o" | awk '$1 == "TcpExtTCPTimeouts" { print $2 }')"
}

# Fold one run's trainer lines into the values of KEY (paper_add): p99 =
# max of the trainers' push p99s, p50 = median of their p50s; pushes and
# errors summed into $ops and $errs.
fold_run() {
	local f=$1 k=$2 p99 p50
	p99=$(sed -n 's/.*"push_p99_us":\([0-9.]*\).*/\1/p' "$f" | sort -g | tail -n1)
	p50=$(sed -n 's/.*"push_p50_us":\([0-9.]*\).*/\1/p' "$f" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
	ops=$(sed -n 's/.*"ops":\([0-9]*\).*/\1/p' "$f" | awk '{ s += $1 } END { print s + 0 }')
	errs=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' "$f" | awk '{ s += $1 } END { print s + 0 }')
	paper_add "$k.p99" "$p99"
	paper_add "$k.p50" "$p50"
}

# tcp: namespaces, veth, tbf; a fresh server for every run.
ns_up() {
	local x=$(( $$ % 200 + 20 ))
	nss=$tag-s
	nsc=$tag-c
	vs=bes$(( $$ % 100000 ))
	vc=bec$(( $$ % 100000 ))
	ips=10.213.$x.2
	ipc=10.213.$x.1
	ip netns add "$nss" && ip netns add "$nsc" || paper_die "ip netns add failed (root?)"
	NS_UP=1
	ip link add "$vc" netns "$nsc" type veth peer name "$vs" netns "$nss" ||
		paper_die "veth pair failed"
	ip -n "$nsc" addr add "$ipc/24" dev "$vc"
	ip -n "$nss" addr add "$ips/24" dev "$vs"
	ip -n "$nsc" link set lo up
	ip -n "$nss" link set lo up
	ip -n "$nsc" link set "$vc" up
	ip -n "$nss" link set "$vs" up
	ip netns exec "$nsc" tc qdisc add dev "$vc" root tbf rate "$rate" burst 32kb limit "$limit" ||
		paper_die "tc tbf failed"
}
ns_down() {
	[ "${NS_UP:-0}" = 1 ] || return 0
	ip netns del "$nsc" 2>/dev/null
	ip netns del "$nss" 2>/dev/null
	NS_UP=0
}

run_tcp() {
	local r n w rep naming srv rb ra sb sa db da k
	ns_up
	paper_model "$work/model.conf" 1 1 2 64
	nsx="ip netns exec $nsc"
	for rep in $(seq "$reps"); do
		for n in $trainers_list; do
			for w in on off; do
				r=tcp-n$n-w$w-r$rep
				k=tcp.$n.$w
				paper_spawn "$r.srv" ip netns exec "$nss" "$bin/be-ps" --config "$work/model.conf" \
					--listen "tcp://$ips:$((port++))"
				srv=$spawned
				wait_ready "$r.srv" "$srv" || return 1
				naming=$work/$r.naming
				# shellcheck disable=SC2086
				{ paper_naming_add "$naming" be.ps.0 b0 $addrs
				  paper_naming_add "$naming" be.ps.0.primary b0 $addrs; }
				read -r rb tb <<<"$(nstat_abs "$nsc")"
				ip netns exec "$nsc" tc -s qdisc show dev "$vc" >"$work/$r.tc.before"
				run_trainers "$n" "$w" "$work" "$r" "$naming" "$work/model.conf"
				read -r ra ta <<<"$(nstat_abs "$nsc")"
				ip netns exec "$nsc" tc -s qdisc show dev "$vc" >"$work/$r.tc.after"
				paper_kill "$srv"
				record "$k" "$r" "$work" "$n"
				paper_add "$k.retrans" $((ra - rb))
				paper_add "$k.rto" $((ta - tb))
			done
		done
	done
	ns_down
}

# wait_ready NAME PID: the be-ps of paper_spawn NAME says "ready"; sets
# $addrs.
wait_ready() {
	local i
	for i in $(seq 400); do
		grep -q '^ready$' "$work/$1.out" 2>/dev/null && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	grep -q '^ready$' "$work/$1.out" 2>/dev/null ||
		{ sed 's/^/  /' "$work/$1.err" >&2; paper_log "be-ps $1 did not start"; return 1; }
	addrs=$(sed -n 's/^listening //p' "$work/$1.out" | tr '\n' ' ')
}

# record KEY RUN DIR N: pushes, errors, bottleneck drops and bytes per push
# of one run.
record() {
	local k=$1 r=$2 d=$3 n=$4 ops errs sent
	fold_run "$d/$r.tr" "$k"
	paper_add "$k.pushes" "$ops"
	paper_add "$k.errors" "$errs"
	if [ -f "$d/$r.tc.after" ]; then
		paper_add "$k.drops" $(( $(tc_stat "$d/$r.tc.after" dropped) - $(tc_stat "$d/$r.tc.before" dropped) ))
		sent=$(( $(tc_stat "$d/$r.tc.after" sent) - $(tc_stat "$d/$r.tc.before" sent) ))
		[ "$ops" -gt 0 ] && paper_add "$k.kib_per_push" $(( sent / ops / 1024 ))
	fi
	[ "$ops" -gt 0 ] || { paper_log "$r: no push completed"; failed=1; }
	[ "$errs" -eq 0 ] || { paper_log "$r: $errs failed pushes"; failed=1; }
}

run_verbs() {
	local r n w rep k runner=$root/test/rxe/rxe-run lk shared_dir rc
	[ -x "$runner" ] || paper_die "$runner missing (the Soft-RoCE harness)"
	command -v qemu-system-x86_64 >/dev/null || paper_die "qemu-system-x86_64 missing (test/rxe/rxe-setup)"
	shared_dir=$work/guests
	mkdir -p "$shared_dir"
	chmod 777 "$shared_dir"
	: >"$shared_dir/plan"
	for rep in $(seq "$reps"); do
		for n in $trainers_list; do
			for w in on off; do
				echo "verbs-n$n-w$w-r$rep" >>"$shared_dir/plan"
			done
		done
	done
	local a=(--build "$build" --out "$out" --steps "$steps" --period-ms "$period" --keys "$keys"
		--rate "$rate" --limit "$limit" --shared "$shared_dir")
	# Two emulated guests booting at once on a loaded host take minutes.
	export BE_RXE_BOOT_LIMIT=${BE_RXE_BOOT_LIMIT:-400}
	exec {lk}>/tmp/be-rxe.lock
	paper_log "waiting for /tmp/be-rxe.lock"
	flock "$lk"
	paper_log "booting $guests guest(s) (load $(paper_load))"
	if [ "$guests" = 2 ]; then
		"$runner" --socket $((port + 1)):$((port + 2)) --ip 10.0.2.16 --mem 1024 \
			--timeout 1500 --rw "$shared_dir" --cwd "$root" -- \
			bash "$root/bench/paper/incast.sh" --inside server "${a[@]}" \
			>"$work/guest-s.log" 2>&1 &
		local gs=$!
		"$runner" --socket $((port + 2)):$((port + 1)) --ip 10.0.2.15 --mem 1024 \
			--timeout 1500 --rw "$shared_dir" --cwd "$root" -- \
			bash "$root/bench/paper/incast.sh" --inside trainers "${a[@]}" \
			>"$work/guest-t.log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || touch "$shared_dir/finish"
		wait "$gs" || rc=1
	else
		"$runner" --timeout 1500 --rw "$shared_dir" --cwd "$root" -- \
			bash "$root/bench/paper/incast.sh" --inside both "${a[@]}" >"$work/guest-t.log" 2>&1
		rc=$?
	fi
	flock -u "$lk"
	exec {lk}>&-
	if [ $rc -ne 0 ]; then
		sed 's/^/  /' "$work"/guest-*.log >&2
		paper_log "the guest run failed ($rc)"
		failed=1
	fi
	while read -r r; do
		[ -f "$shared_dir/$r.tr" ] || continue
		n=${r#*-n}; n=${n%%-*}
		w=${r#*-w}; w=${w%%-*}
		k=verbs.$n.$w
		record "$k" "$r" "$shared_dir" "$n"
		# Requester side (the trainers'): packets sent again (the
		# completer's retries, after a timeout or a sequence NAK) and
		# sequence NAKs received; responder side (the server's): requests
		# out of sequence or duplicated (what the drops left behind).
		paper_add "$k.retransmits" "$(hw_delta "$shared_dir/$r.cli.before" "$shared_dir/$r.cli.after" \
			completer_retry_err)"
		paper_add "$k.seq_naks" "$(hw_delta "$shared_dir/$r.cli.before" "$shared_dir/$r.cli.after" \
			rcvd_seq_err)"
		if [ -f "$shared_dir/$r.srv.after" ]; then
			paper_add "$k.out_of_seq" "$(hw_delta "$shared_dir/$r.srv.before" \
				"$shared_dir/$r.srv.after" out_of_seq_request duplicate_request)"
		else
			paper_add "$k.out_of_seq" "$(hw_delta "$shared_dir/$r.cli.before" \
				"$shared_dir/$r.cli.after" out_of_seq_request duplicate_request)"
		fi
	done <"$shared_dir/plan"
}

# ---- main -----------------------------------------------------------------------

paper_args "$@"
paper_opts --transport=transport --trainers=trainers_list --steps=steps \
	--period-ms=period --keys=keys --rate=rate --limit=limit --guests=guests \
	--inside=inside --shared=shared
case "$transport" in tcp|verbs) ;; *) paper_die "--transport tcp|verbs" ;; esac
case "$guests" in 1|2) ;; *) paper_die "--guests 1|2" ;; esac
# One file per transport: a verbs run does not overwrite the tcp one.
[ -s "$jsonfile" ] || rm -f "$jsonfile"
jsonfile=$out/incast-$transport.json
[ -n "$inside" ] || : >"$jsonfile"
if [ "$transport" = tcp ]; then
	rate=${rate:-400mbit}
	steps=${steps:-20}
	period=${period:-400}
	keys=${keys:-4096}
else
	rate=${rate:-60mbit}
	steps=${steps:-10}
	period=${period:-1500}
	keys=${keys:-1024}
fi
if [ "$quick" = 1 ] && [ -z "$inside" ]; then
	trainers_list=2
	steps=4
	keys=1024
	period=200
fi
paper_bins be-ps be-ps-load

case "$inside" in
server) inside_server; exit $? ;;
trainers) inside_trainers; exit $? ;;
both) inside_both; exit $? ;;
"") ;;
*) paper_die "--inside server|trainers|both" ;;
esac

[ "$(id -u)" = 0 ] || paper_die "needs root (network namespaces, tc)"
failed=0
trap 'ns_down; paper_cleanup' EXIT
paper_log "$transport: trainers $trainers_list, window on/off, $steps steps of $keys keys x 2 tables (dim 64) every $period ms, bottleneck tbf $rate limit $limit, $reps rep(s), load $(paper_load)"
if [ "$transport" = tcp ]; then
	run_tcp || failed=1
else
	run_verbs
fi

if [ "$transport" = tcp ]; then
	paper_table_add transport trainers window "push p99 us" "push p50 us" pushes failed \
		"bottleneck drops" "TCP retrans" "TCP RTOs" "KiB/push"
else
	paper_table_add transport trainers window "push p99 us" "push p50 us" pushes failed \
		"bottleneck drops" "rxe retrans" "rxe seq NAKs" "rxe out-of-seq" "KiB/push"
fi
plot=$work/plot.dat
: >"$plot"
for n in $trainers_list; do
	line="$n"
	for w in on off; do
		k=$transport.$n.$w
		[ -n "${VALS[$k.p99]:-}" ] || { line+=" NaN"; continue; }
		line+=" $(median "$k.p99")"
		if [ "$transport" = tcp ]; then
			paper_table_add "$transport" "$n" "$w" "$(paper_spread "$k.p99")" "$(paper_spread "$k.p50")" \
				"$(median "$k.pushes")" "$(median "$k.errors")" "$(paper_spread "$k.drops")" \
				"$(paper_spread "$k.retrans")" "$(paper_spread "$k.rto")" "$(median "$k.kib_per_push")"
			paper_json experiment=incast impl=be transport=tcp trainers="$n" window:s="$w" \
				p99_us:stats="$k.p99" p50_us:stats="$k.p50" pushes="$(median "$k.pushes")" \
				errors="$(median "$k.errors")" bottleneck_drops:stats="$k.drops" \
				tcp_retrans_segs:stats="$k.retrans" tcp_timeouts:stats="$k.rto" \
				kib_per_push="$(median "$k.kib_per_push")" rate:s="$rate" limit:s="$limit" \
				steps="$steps" reps="$reps"
		else
			paper_table_add "$transport" "$n" "$w" "$(paper_spread "$k.p99")" "$(paper_spread "$k.p50")" \
				"$(median "$k.pushes")" "$(median "$k.errors")" "$(paper_spread "$k.drops")" \
				"$(paper_spread "$k.retransmits")" "$(paper_spread "$k.seq_naks")" \
				"$(paper_spread "$k.out_of_seq")" "$(median "$k.kib_per_push")"
			paper_json experiment=incast impl=be transport=verbs trainers="$n" window:s="$w" \
				p99_us:stats="$k.p99" p50_us:stats="$k.p50" pushes="$(median "$k.pushes")" \
				errors="$(median "$k.errors")" bottleneck_drops:stats="$k.drops" \
				rxe_retransmits:stats="$k.retransmits" rxe_seq_naks:stats="$k.seq_naks" \
				rxe_out_of_seq:stats="$k.out_of_seq" kib_per_push="$(median "$k.kib_per_push")" \
				guests="$guests" rate:s="$rate" limit:s="$limit" steps="$steps" reps="$reps"
		fi
	done
	echo "$line" >>"$plot"
done
notes+=("p99: the largest of the trainers' push P99s, median over $reps rep(s) (min-max); load $(paper_load)")
paper_table_print
awk '$2 != "NaN" || $3 != "NaN" { f = 1 } END { exit !f }' "$plot" && paper_plot "$out/incast-$transport.png" "set title \"incast over $transport: push P99, send window on and off\"
set xlabel \"trainers\"
set ylabel \"push P99 (us)\"
set xtics (${trainers_list// /, })
set xrange [0:$(( ${trainers_list##* } + 2 ))]
set yrange [0:*]
plot \"$plot\" using 1:2 with linespoints lw 2 title \"window on\", \"\" using 1:3 with linespoints lw 2 title \"window off\""
exit $failed
