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

prog=compare-transports
. "$(dirname "${BASH_SOURCE[0]}")/lib-compare.sh"
cmp_args "$@"
cmp_tools ucx_perftest fi_pingpong cc cmake timeout taskset
cmp_build
for p in cacheline_bounce tcp_pingpong; do
	if ! cc -O2 -Wall -I"$root/tools/be-perf" -o "$work/$p" "$root/bench/$p.c" \
		"$root/tools/be-perf/perf_stats.c" -lm; then
		cmp_die "cannot build bench/$p.c"
	fi
done

# ---- iterations ------------------------------------------------------------
if [ $quick -eq 1 ]; then
	lat_n=5000; bw_n=500; tcp_lat_n=2000; tcp_bw_n=500; floor_n=50000
else
	lat_n=50000; bw_n=2000; tcp_lat_n=20000; tcp_bw_n=3000; floor_n=200000
fi
cpu_opt=()
[ $pin -eq 1 ] && cpu_opt=(--cpu 0,1)

# ---- runners: each prints the tool's output on stdout, non-zero on failure -
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

# ---- measurements ----------------------------------------------------------
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
one_rep() { # one repetition of every test
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
}
cmp_reps one_rep

# ---- ratios ----------------------------------------------------------------
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

notes=("latency: one-way us (p50; fi_pingpong: average); bandwidth: MB/s (1e6 B/s)")
cmp_finish
