#!/usr/bin/env bash
# compare-base.sh - the core's figures of a base commit beside the current
# tree (or a second commit), side by side in one run.
#
#   bash bench/compare-base.sh [--base REV] [--head REV] [--reps N] [--json]
#                              [--quick] [--no-pin] [--rt] [--out FILE]
#
# --base defaults to e825e43, the last commit before the hardening of
# issue 14 (docs/SECURITY.md). Builds be-perf of each side, RelWithDebInfo
# without LTO, under build/compare-base/ (BE_COMPARE_DIR): a commit in a
# detached git worktree there (src-SHA, build-SHA: kept and reused; remove
# the directory and run `git worktree prune` to drop them), the current
# tree, uncommitted changes included, in build-cur. Then measures, --reps
# times (default 5; --quick: 1 and few iterations), interleaved (rep 1 of
# every test on both sides, then rep 2, ...; the side that runs first
# alternates by rep), so that load drift hits both alike:
#   lat --size 64, shm 20000 and tcp 5000 iterations  (p50, p99)
#   bw --size 1M --window 16 --busy --warmup 0         (MB/s)
#   cost --transport shm --size 64: one thread drives both ends, ns per
#   round trip (the software alone; callgrind it for instructions)
# every be-perf under taskset -c 0,1 (both ends on cores 0 and 1; --no-pin:
# none); --rt: under chrt -f 1 too, so that a loaded machine's other
# processes cannot preempt the two busy-polling ends (a stream between
# two ends that each get a slice of a core measures the scheduler).
# Prints medians with min-max spread and head/base ratios against "within
# 5 %" (lat, cost <= 1.05; bw >= 0.95); --json: one JSON object per
# measurement and ratio. A be-perf too old for cost shows that row as
# n/a; one whose bw has no --warmup runs without it (a note says so).
# Exit status: 1 if a be-perf run failed, 2 on usage or build errors,
# else 0, whatever the ratios.
set -uo pipefail

prog=compare-base
base_rev=e825e43
head_rev=""
args=()
rt=()
while [ $# -gt 0 ]; do
	case "$1" in
	--base|--head)
		[ $# -ge 2 ] || { echo "$prog: $1 needs a value" >&2; exit 2; }
		[ "$1" = --base ] && base_rev=$2 || head_rev=$2
		shift 2 ;;
	--rt) rt=(chrt -f 1); shift ;;
	--build) echo "$prog: --build does not apply (both sides are built)" >&2; exit 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
. "$(dirname "${BASH_SOURCE[0]}")/lib-compare.sh"
cmp_args "${args[@]}"
cmp_tools git cmake timeout
[ ${#rt[@]} -eq 0 ] || cmp_tools chrt
[ $pin -eq 0 ] || cmp_tools taskset
cache=${BE_COMPARE_DIR:-$root/build/compare-base}
mkdir -p "$cache" || cmp_die "cannot create $cache"

# build_perf SRC DIR: be-perf of SRC in DIR; prints its path.
build_perf() {
	echo "$prog: building be-perf of $1 in $2" >&2
	cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBE_LTO=OFF \
		-DBE_BUILD_TESTS=OFF >"$2.log" 2>&1 &&
		nice -n 5 cmake --build "$2" -j 2 --target be-perf >>"$2.log" 2>&1 ||
		cmp_die "building $1 failed (see $2.log)"
	echo "$2/tools/be-perf"
}
# perf_of REV: be-perf of commit REV, from a worktree in the cache.
perf_of() {
	local sha
	sha=$(git -C "$root" rev-parse --short=12 "$1^{commit}" 2>/dev/null) ||
		cmp_die "no commit '$1'"
	if [ ! -x "$cache/build-$sha/tools/be-perf" ]; then
		[ -d "$cache/src-$sha" ] ||
			git -C "$root" worktree add --detach "$cache/src-$sha" "$sha" >/dev/null 2>&1 ||
			cmp_die "cannot check out $sha in $cache/src-$sha"
		build_perf "$cache/src-$sha" "$cache/build-$sha" >/dev/null
	fi
	echo "$cache/build-$sha/tools/be-perf"
}
bp_base=$(perf_of "$base_rev") || exit 2
if [ -n "$head_rev" ]; then
	bp_head=$(perf_of "$head_rev") || exit 2
else
	head_rev="current tree"
	bp_head=$(build_perf "$root" "$cache/build-cur") || exit 2
fi

if [ $quick -eq 1 ]; then
	shm_n=5000; tcp_n=1000; bw_n=200; cost_n=20000
else
	shm_n=20000; tcp_n=5000; bw_n=2000; cost_n=200000
fi
pin_all=()
if [ $pin -eq 1 ]; then
	pin_all=(taskset -c 0,1)
	pin_desc="client and server share cores 0,1 (taskset -c 0,1), both sides alike"
fi

# What each side's be-perf can do: a be-perf without cost skips that row;
# one whose bw has no --warmup runs without it (and says so).
declare -A HAS_COST BW_WARM
for s in base head; do
	b=$bp_base
	[ $s = head ] && b=$bp_head
	HAS_COST[$s]=0
	"$b" --help 2>&1 | grep -q '^  cost ' && HAS_COST[$s]=1
	BW_WARM[$s]="--warmup 0"
	"$b" bw --help 2>&1 | grep -q -- '--warmup' || BW_WARM[$s]=""
done

# bp SIDE TEST ARGS...: one be-perf run of SIDE (base or head), JSON out.
bp() {
	local b=$bp_base
	[ "$1" = head ] && b=$bp_head
	timeout 600 "${rt[@]}" "${pin_all[@]}" "$b" "${@:2}" --timeout 60 --json
}

sides=(base head)
for x in shm tcp; do
	for s in "${sides[@]}"; do def ${s}_${x}_lat lat "$s: $x lat 64 B" 1; done
	for s in "${sides[@]}"; do def ${s}_${x}_lat99 lat99 "$s: $x lat 64 B" 1; done
	for s in "${sides[@]}"; do def ${s}_${x}_bw bw "$s: $x bw 1 MiB window 16" 1; done
done
for s in "${sides[@]}"; do
	def ${s}_cost ns/RT "$s: shm cost 64 B, one thread" 1
	[ "${HAS_COST[$s]}" = 1 ] || skip ${s}_cost "this be-perf has no cost test"
	[ -n "${BW_WARM[$s]}" ] || notes+=("$s: bw without --warmup (its be-perf has none)")
done

one_rep() { # REP
	local x s n order=(base head)
	[ $(($1 % 2)) -eq 1 ] || order=(head base)
	for x in shm tcp; do
		n=$shm_n
		[ $x = tcp ] && n=$tcp_n
		for s in "${order[@]}"; do
			run ${s}_${x}_lat "jfield p50_us" bp $s lat --transport $x --size 64 --iters $n
			derive ${s}_${x}_lat99 "jfield p99_us"
		done
		for s in "${order[@]}"; do
			# shellcheck disable=SC2086 # BW_WARM: none or two words
			run ${s}_${x}_bw "jfield mb_s" bp $s bw --transport $x --size 1M --window 16 \
				--busy ${BW_WARM[$s]} --iters $bw_n
		done
	done
	for s in "${order[@]}"; do
		[ "${HAS_COST[$s]}" = 1 ] || continue
		run ${s}_cost "jfield ns_per_round_trip" bp $s cost --transport shm --size 64 \
			--iters $cost_n
	done
}
cmp_reps one_rep

for x in shm tcp; do
	ratio ${x}_lat head_${x}_lat base_${x}_lat "<=" 1.05 "$x lat p50, head / base"
	ratio ${x}_lat99 head_${x}_lat99 base_${x}_lat99 "<=" 1.05 "$x lat p99, head / base"
	ratio ${x}_bw head_${x}_bw base_${x}_bw ">=" 0.95 "$x bw, head / base"
done
ratio cost head_cost base_cost "<=" 1.05 "shm cost, head / base"

notes+=("base: $base_rev ($bp_base)" "head: $head_rev ($bp_head)"
	"latency: one-way us (busy polling); bandwidth: MB/s (1e6 B/s), --busy")
[ $pin -eq 1 ] || notes+=("not pinned (--no-pin): the scheduler places both ends")
[ ${#rt[@]} -eq 0 ] || notes+=("real-time: every be-perf under chrt -f 1 (--rt)")
cmp_finish
