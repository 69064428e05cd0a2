#!/usr/bin/env bash
# compare-core.sh - the BE core (Sockets over Engines) beside the raw
# transports it runs on, and UCX, side by side in one run.
#
#   bash bench/compare-core.sh [--reps N] [--json] [--quick]
#                              [--build DIR] [--no-pin] [--out FILE]
#
# Measures with be-perf, for --transport shm and tcp, --reps times each
# (default 5; --quick: 1 and few iterations), interleaved (rep 1 of every
# test, then rep 2, ...) so that load drift hits every test alike:
#   raw-lat --size 64                       lat --size 64 (p50 and p99)
#                                           lat --after-progress (p50, info)
#   raw-bw --size 1M --window 16 --bufs 16  bw --size 1M --window 16
#   raw-bw --size 1M --window 1 --bufs 1    bw --size 1M --window 1 (info)
#   hol --size 64 beside 16 MiB messages, round-robin (p50, p99) and
#   --no-sched, FIFO (p99)
#   UCX shm ucp_am_lat 64 B (ucx_perftest, UCX_TLS=sm,self)
#   cost --size 64 (shm): one thread drives both ends, ns per round trip
# and once per run (first repetition):
#   idle --seconds 5 (--quick: 2), shm and tcp: CPU of an idle Engine
#   mux --sockets 10000 --iters 20 (--quick: 5), shm: memory per Socket
#   fanout --engines 256 (--quick: 64), shm, elastic and fixed grants:
#   Engines one worker holds, receive buffer bytes per Engine
# then the medians with min-max spread, and the ratios against the
# targets of the BE core: Socket lat p50 <= 1.3 x raw-lat p50 (shm) and
# <= UCX ucp_am_lat p50 (shm); bw >= 0.9 x raw-bw (16 buffers, like the
# 16 messages in flight); hol p99 <= 3 x lat p99; idle CPU < 1 % of a
# core; <= 1024 B per Socket. Targets are reported, never enforced.
#
# Latencies are one-way (RTT/2) in microseconds, bandwidth MB/s (1e6 B/s).
# raw-* and Socket tests busy-poll (Socket bw with --busy, like raw-bw:
# like for like); idle polls adaptively. be-perf lat/bw/hol/mux/idle cannot pin each end to a core,
# so every be-perf, raw or Socket, and both ucx_perftest ends run under
# taskset -c 0,1 (client and server share cores 0 and 1; on a 2-core host
# that is every core); --no-pin: no taskset.
#
# ucx_perftest missing: its line is skipped (n/a), not an error; so is a
# be-perf too old for idle or raw-bw --bufs (then raw-bw runs with one
# buffer, and says so). Exit status: 1 if a be-perf run failed, 2 on
# usage or build errors, else 0, whatever the targets.
# --json: one JSON object per measurement, ratio and limit on stdout.
set -uo pipefail

prog=compare-core
. "$(dirname "${BASH_SOURCE[0]}")/lib-compare.sh"
cmp_args "$@"
cmp_prepare

# ---- iterations ------------------------------------------------------------
if [ $quick -eq 1 ]; then
	lat_n=5000; tcp_lat_n=2000; bw_n=200; bw1_n=50; hol_n=500; fifo_n=100; cost_n=5000
	idle_s=2; mux_n=5; ucx_n=5000; fan_n=64; fan_r=10
else
	lat_n=50000; tcp_lat_n=20000; bw_n=2000; bw1_n=500; hol_n=20000; fifo_n=500; cost_n=200000
	idle_s=5; mux_n=20; ucx_n=50000; fan_n=256; fan_r=100
fi
# hol --no-sched: each ping-pong may wait behind a whole 16 MiB message
# (~0.1 s over tcp here), hence fewer iterations than round-robin.
mux_sockets=10000

# Both ends of every test on the same cores, whichever tool starts them.
pin_all=()
if [ $pin -eq 1 ]; then
	pin_all=(taskset -c 0,1); pin_c=(taskset -c 0,1); pin_s=(taskset -c 0,1)
	pin_desc="client and server share cores 0,1 (taskset -c 0,1), raw, Socket and UCX alike"
fi

# bp CMD ARGS...: one be-perf test, JSON on stdout. be-perf gives up after
# 60 s without progress; timeout(1) is the backstop.
bp() {
	timeout 600 "${pin_all[@]}" "$beperf" "$@" --timeout 60 --json
}

# What this be-perf can do (another branch adds idle and raw-bw --bufs).
has_idle=0
"$beperf" --help 2>/dev/null | grep -q '^  idle ' && has_idle=1
has_cost=0
"$beperf" --help 2>/dev/null | grep -q '^  cost ' && has_cost=1
bufs16=(--bufs 16); bufs1=(--bufs 1); bufs_note=", 16 bufs"; bufs1_note=", 1 buf"
if ! "$beperf" raw-bw --help 2>/dev/null | grep -q -- '--bufs'; then
	bufs16=(); bufs1=(); bufs_note=" (no --bufs: 1 buf)"; bufs1_note=""
fi
has_ucx=0
command -v ucx_perftest >/dev/null 2>&1 && has_ucx=1

# ---- measurements ----------------------------------------------------------
for x in shm tcp; do
	def raw_${x}_lat lat "$x raw-lat 64 B" 1
	def sk_${x}_lat lat "$x Socket lat 64 B" 1
	def sk_${x}_lat99 lat99 "$x Socket lat 64 B" 1
	def sk_${x}_latap lat "$x Socket lat 64 B --after-progress" 1
	def raw_${x}_bw bw "$x raw-bw 1 MiB window 16$bufs_note" 1
	def sk_${x}_bw bw "$x Socket bw 1 MiB window 16" 1
	def raw_${x}_bw1 bw "$x raw-bw 1 MiB window 1$bufs1_note" 1
	def sk_${x}_bw1 bw "$x Socket bw 1 MiB window 1" 1
	def sk_${x}_hol lat "$x hol 64 B beside 16 MiB, round-robin" 1
	def sk_${x}_hol99 lat99 "$x hol 64 B beside 16 MiB, round-robin" 1
	def sk_${x}_fifo99 lat99 "$x hol 64 B beside 16 MiB, --no-sched" 1
done
def ucx_shm_am_lat lat "UCX shm ucp_am_lat 64 B"
def sk_shm_cost ns/RT "shm Socket cost 64 B, one thread, both ends" 1
def_once sk_shm_idle pct "shm idle Engine, ${idle_s} s (both ends)" 1
def_once sk_tcp_idle pct "tcp idle Engine, ${idle_s} s (both ends)" 1
def_once sk_shm_mux bytes "shm mux $mux_sockets sockets: memory/Socket" 1
def_once sk_shm_fan_n engines "shm fanout: Engines a worker holds (of $fan_n)" 1
def_once sk_shm_fan bytes "shm fanout: receive buffers per Engine" 1
def_once sk_shm_fanfix_n engines "shm fanout, fixed grants: Engines held (of $fan_n)" 1
def_once sk_shm_fanfix bytes "shm fanout, fixed grants: receive buffers per Engine" 1

[ $has_ucx -eq 1 ] || skip ucx_shm_am_lat "ucx_perftest not installed (apt-get install ucx-utils)"
[ $has_cost -eq 1 ] || skip sk_shm_cost "this be-perf has no cost test"
if [ $has_idle -eq 0 ]; then
	skip sk_shm_idle "this be-perf has no idle test"
	skip sk_tcp_idle "this be-perf has no idle test"
fi

ucx_shm_tls=${UCX_SHM_TLS:-sm,self}
one_rep() { # REP: one repetition of every test; the once-per-run ones in rep 1
	local x n
	for x in shm tcp; do
		n=$lat_n
		[ $x = tcp ] && n=$tcp_lat_n
		run raw_${x}_lat "jfield p50_us" bp raw-lat --transport $x --size 64 --iters $n
		run sk_${x}_lat "jfield p50_us" bp lat --transport $x --size 64 --iters $n
		derive sk_${x}_lat99 "jfield p99_us"
		run sk_${x}_latap "jfield p50_us" bp lat --transport $x --size 64 --iters $n \
			--after-progress
		run raw_${x}_bw "jfield mb_s" bp raw-bw --transport $x --size 1M --window 16 \
			"${bufs16[@]}" --iters $bw_n
		run sk_${x}_bw "jfield mb_s" bp bw --transport $x --size 1M --window 16 --busy \
			--iters $bw_n
		run raw_${x}_bw1 "jfield mb_s" bp raw-bw --transport $x --size 1M --window 1 \
			"${bufs1[@]}" --iters $bw1_n
		run sk_${x}_bw1 "jfield mb_s" bp bw --transport $x --size 1M --window 1 --busy \
			--iters $bw1_n
		run sk_${x}_hol "jfield p50_us" bp hol --transport $x --size 64 --iters $hol_n
		derive sk_${x}_hol99 "jfield p99_us"
		run sk_${x}_fifo99 "jfield p99_us" bp hol --transport $x --size 64 --iters $fifo_n \
			--no-sched
	done
	[ $has_ucx -eq 0 ] || run ucx_shm_am_lat ucx_lat ucx "$ucx_shm_tls" ucp_am_lat 64 $ucx_n
	[ $has_cost -eq 0 ] ||
		run sk_shm_cost "jfield ns_per_round_trip" bp cost --transport shm --size 64 \
			--iters $cost_n
	[ "$1" = 1 ] || return 0
	if [ $has_idle -eq 1 ]; then
		for x in shm tcp; do
			run sk_${x}_idle "jfield cpu_pct" bp idle --transport $x --seconds $idle_s
		done
	fi
	run sk_shm_mux "jfield bytes_per_socket" bp mux --transport shm --size 64 \
		--sockets $mux_sockets --iters $mux_n
	run sk_shm_fan_n "jfield engines" bp fanout --transport shm --engines $fan_n --rounds $fan_r
	derive sk_shm_fan "jfield recv_bytes_per_engine"
	run sk_shm_fanfix_n "jfield engines" bp fanout --transport shm --engines $fan_n \
		--rounds $fan_r --credits-init 64
	derive sk_shm_fanfix "jfield recv_bytes_per_engine"
}
cmp_reps one_rep

# ---- ratios and targets ----------------------------------------------------
ratio shm_lat_vs_raw sk_shm_lat raw_shm_lat "<=" 1.3 \
	"shm Socket lat p50 / raw-lat p50"
ratio shm_latap_vs_raw sk_shm_latap raw_shm_lat info - \
	"shm Socket lat --after-progress p50 / raw-lat p50"
ratio tcp_lat_vs_raw sk_tcp_lat raw_tcp_lat info - \
	"tcp Socket lat p50 / raw-lat p50"
ratio shm_lat_vs_ucx_am sk_shm_lat ucx_shm_am_lat "<=" 1.0 \
	"shm Socket lat p50 / UCX shm ucp_am_lat p50"
for x in shm tcp; do
	ratio ${x}_bw_vs_raw sk_${x}_bw raw_${x}_bw ">=" 0.9 \
		"$x Socket bw / raw-bw, window 16$bufs_note"
	ratio ${x}_bw1_vs_raw sk_${x}_bw1 raw_${x}_bw1 info - \
		"$x Socket bw / raw-bw, window 1"
	ratio ${x}_hol_vs_lat sk_${x}_hol99 sk_${x}_lat99 "<=" 3 \
		"$x hol p99 (round-robin) / lat p99 (idle link)"
	ratio ${x}_hol_vs_fifo sk_${x}_hol99 sk_${x}_fifo99 info - \
		"$x hol p99 round-robin / hol p99 --no-sched"
done
limit shm_idle_cpu sk_shm_idle "<" 1 "shm idle Engine CPU, % of one core"
limit tcp_idle_cpu sk_tcp_idle "<" 1 "tcp idle Engine CPU, % of one core"
limit shm_mux_mem sk_shm_mux "<=" 1024 "shm memory per further Socket, bytes"
ratio shm_fan_mem sk_shm_fan sk_shm_fanfix info - \
	"shm receive buffers per Engine, elastic / fixed grants"

notes=("latency: one-way us; bandwidth: MB/s (1e6 B/s); idle: CPU of both processes, % of one core"
	"polling: busy everywhere (Socket bw with --busy, like raw-bw), but idle: adaptive")
[ $pin -eq 1 ] || notes+=("not pinned (--no-pin): the scheduler places both ends")
cmp_finish
