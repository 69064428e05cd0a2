# lib-compare.sh - the machinery the side-by-side benchmarks share
# (compare-transports.sh, compare-core.sh, compare-rpc.sh). Sourced,
# never run.
#
# The sourcing script sets, before sourcing:
#   prog           its name, for messages ("compare-core")
# and then calls, in this order:
#   cmp_args "$@"           parse the common options (below)
#   cmp_tools T...          every tool T must be on PATH, else exit 2
#   cmp_build               build (or find) be-perf; sets beperf
#                           (cmp_prepare: both, for a be-perf-only run)
#   def / def_once ...      declare the measurements, in report order
#   cmp_reps BODY           call BODY R for R = 1..reps (interleaved reps)
#   ratio / limit ...       the ratios and absolute targets to report
#   cmp_finish              print the report, exit 0 / 1
#
# Common options (cmp_args):
#   --reps N  --json  --quick (reps=1)  --build DIR  --no-pin  --out FILE
#   -h|--help prints the comment block at the top of the sourcing script.
#
# Globals it provides:
#   root           the source tree          work   a temp dir, removed on exit
#   reps json quick pin build out           the options
#   beperf         path of the be-perf binary (after cmp_build)
#   port           a free-ish TCP port base; runners take port++
#   pin_c pin_s    command prefixes pinning the client / server (arrays;
#                  taskset -c 0 / -c 1 when pinned, empty otherwise);
#                  a script may overwrite them after cmp_args
#   names          the measurements, in order of def
#   VALS[n]        the values of n, space separated
#   ERRS[n]        why n has no value (last error)
#   FAILS[n]       failed repetitions of n
#   METRIC[n] DESC[n] OURS[n] WANT[n]  metric, text, 1 if be-perf, reps wanted
#   MED[n]         median of n (after cmp_reps)
#   load_before load_after  /proc/loadavg around cmp_reps
# Functions it provides: def def_once skip run run_only derive jfield stats
#   median
#   ucx ucx_lat ucx_bw ratio limit report unit_of cmp_*.
# Globals the sourcing script may set (read by report):
#   notes          array of lines printed after the table ("latency: ...")
#   pin_desc       how processes are pinned, printed when pin=1
#
# Metrics (unit_of): lat (p50 us), lat99 (p99 us), lat_avg (avg us),
# bw (MB/s), pct (% of a core), bytes (B); anything else prints as itself.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=5
json=0
quick=0
pin=1
build=""
out=""
pin_desc="client core 0, server core 1"
notes=()

cmp_die() { echo "$prog: $*" >&2; exit 2; }

cmp_args() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--reps) [ $# -ge 2 ] || cmp_die "--reps needs a value"; reps=$2; shift 2 ;;
		--json) json=1; shift ;;
		--quick) quick=1; reps=1; shift ;;
		--build) [ $# -ge 2 ] || cmp_die "--build needs a value"; build=$2; shift 2 ;;
		--no-pin) pin=0; shift ;;
		--out) [ $# -ge 2 ] || cmp_die "--out needs a value"; out=$2; shift 2 ;;
		-h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
		*) cmp_die "unknown option '$1'" ;;
		esac
	done
	case "$reps" in ''|*[!0-9]*|0) cmp_die "--reps needs a number > 0" ;; esac
	[ "$(nproc)" -ge 2 ] || pin=0
	if [ $pin -eq 1 ]; then
		pin_c=(taskset -c 0); pin_s=(taskset -c 1)
	else
		pin_c=(); pin_s=()
	fi
	port=$((20000 + $$ % 20000))
	work=$(mktemp -d /tmp/be-compare.XXXXXX)
	trap 'rm -rf "$work"' EXIT
}

# cmp_tools TOOL...: exit 2 naming the missing ones and the packages.
cmp_tools() {
	local t missing=()
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "$prog: missing tools: ${missing[*]}" >&2
		echo "  apt-get install -y ucx-utils libfabric-bin gcc cmake util-linux coreutils" >&2
		exit 2
	fi
}

# cmp_build: be-perf Release in $root/build-bench, unless --build DIR.
cmp_build() {
	if [ -z "$build" ]; then
		build="$root/build-bench"
		echo "$prog: building be-perf (Release) in $build" >&2
		if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF \
			>/dev/null && cmake --build "$build" -j 2 --target be-perf >/dev/null; }; then
			cmp_die "building be-perf failed"
		fi
	fi
	beperf="$build/tools/be-perf"
	[ -x "$beperf" ] || cmp_die "$beperf not found (build the be-perf target)"
}

# cmp_prepare: the tools every run of be-perf needs (timeout; cmake unless
# --build; taskset when pinned), then cmp_build.
cmp_prepare() {
	cmp_tools timeout
	[ -n "$build" ] || cmp_tools cmake
	[ $pin -eq 0 ] || cmp_tools taskset
	cmp_build
}

# ---- bookkeeping -----------------------------------------------------------
declare -A VALS ERRS FAILS DESC METRIC OURS WANT MED
names=()

# def NAME METRIC DESCRIPTION [ours]: measured every repetition.
def() {
	names+=("$1")
	METRIC[$1]=$2
	DESC[$1]=$3
	OURS[$1]=${4:-0}
	WANT[$1]=$reps
	VALS[$1]=""
	FAILS[$1]=0
}

# def_once NAME METRIC DESCRIPTION [ours]: measured once per run.
def_once() {
	def "$@"
	WANT[$1]=1
}

# skip NAME REASON: not measured in this run (a tool or option is missing);
# shown as n/a with the reason, not counted as a failure.
skip() {
	ERRS[$1]="skipped: $2"
}

# run NAME PARSER CMD...: one repetition. PARSER (word-split, so it may
# carry arguments: "jfield p99_us") reads CMD's stdout, prints one number.
# The output stays in $work/last for derive.
run() {
	local name=$1 parser=$2
	shift 2
	run_only "$@"
	derive "$name" "$parser"
}
# run_only CMD...: run CMD, its stdout in $work/last, last_err set when it
# failed (run without the derive; derive the values after).
run_only() {
	local o rc
	o=$("$@" 2>"$work/err")
	rc=$?
	printf '%s\n' "$o" >"$work/last"
	if [ $rc -ne 0 ]; then
		last_err="exit $rc: $( (grep -i -m1 -E 'error|fail|refused|timed out' "$work/err" \
			|| printf '%s\n' "$o" | grep -i -m1 -E 'error|fail' || tail -n1 "$work/err") \
			| tr -d '"\\' | cut -c1-150)"
	else
		last_err=""
	fi
}

# derive NAME PARSER: a further value from the output of the last run
# (p99 beside p50); fails as that run failed.
derive() {
	local name=$1 parser=$2 v
	if [ -z "$last_err" ]; then
		v=$($parser <"$work/last")
		if [ -n "$v" ]; then
			VALS[$name]+="$v "
			return 0
		fi
		ERRS[$name]="could not parse the output: $(tail -n1 "$work/last" | tr -d '"\\' | cut -c1-150)"
	else
		ERRS[$name]=$last_err
	fi
	FAILS[$name]=$((FAILS[$name] + 1))
	return 1
}

jfield() { # jfield KEY: a number field from one JSON line on stdin
	sed -n "s/.*\"$1\":\\([-0-9.eE+]*\\).*/\\1/p" | head -n1
}

# cmp_reps BODY: BODY 1, BODY 2, ... BODY reps; every test of a repetition
# runs before the next repetition, so load drift hits every test alike.
cmp_reps() {
	local r n
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)
	for r in $(seq "$reps"); do
		echo "$prog: repetition $r/$reps" >&2
		"$1" "$r"
	done
	load_after=$(cut -d' ' -f1-3 /proc/loadavg)
	for n in "${names[@]}"; do
		MED[$n]=$(median "$n")
	done
}

# ---- UCX -------------------------------------------------------------------
# ucx TLS TEST SIZE ITERS: ucx_perftest server + client, the client's output.
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

# ---- statistics ------------------------------------------------------------
# stats NAME -> "median min max count"; median NAME
. "$(dirname "${BASH_SOURCE[0]}")/lib-stats.sh"

# ratio KEY NUM DEN OP TARGET DESCRIPTION: MED[NUM] / MED[DEN] against
# TARGET (OP <= or >=; OP info: shown, no target).
# limit KEY NAME OP TARGET DESCRIPTION: MED[NAME] itself against TARGET
# (OP <, <=, >, >=).
ratios=()
declare -A RVAL ROK RTGT RDESC RWHY RABS
cmp_target() { # KEY NUM DEN OP TARGET DESCRIPTION; DEN "" = absolute
	local key=$1 num=$2 den=$3 op=$4 tgt=$5 desc=$6 v ok
	ratios+=("$key")
	RDESC[$key]=$desc
	RTGT[$key]="$op $tgt"
	RABS[$key]=$([ -z "$den" ] && echo 1 || echo 0)
	[ "$op" = info ] && RTGT[$key]="-"
	if [ -z "${MED[$num]}" ] || { [ -n "$den" ] && [ -z "${MED[$den]}" ]; }; then
		RVAL[$key]="n/a"
		ROK[$key]="n/a"
		RWHY[$key]="no value for:"
		[ -z "${MED[$num]}" ] && RWHY[$key]+=" $num"
		[ -n "$den" ] && [ -z "${MED[$den]}" ] && RWHY[$key]+=" $den"
		return
	fi
	if [ -z "$den" ]; then
		v=${MED[$num]}
	else
		v=$(awk -v a="${MED[$num]}" -v b="${MED[$den]}" \
			'BEGIN { if (b == 0) print "inf"; else printf "%.3f", a / b }')
	fi
	ok=$(awk -v v="$v" -v t="$tgt" -v op="$op" 'BEGIN {
		if (op == "info") { print "info"; exit }
		if (v == "inf") { print "missed"; exit }
		print ((op == "<=" && v <= t) || (op == ">=" && v >= t) ||
		       (op == "<" && v < t) || (op == ">" && v > t)) ? "met" : "missed" }')
	RVAL[$key]=$v
	ROK[$key]=$ok
	RWHY[$key]=""
}
ratio() { cmp_target "$1" "$2" "$3" "$4" "$5" "$6"; }
limit() { cmp_target "$1" "$2" "" "$3" "$4" "$5"; }

# ---- report ----------------------------------------------------------------
unit_of() {
	case "${METRIC[$1]}" in
	lat) echo "p50 us" ;;
	lat99) echo "p99 us" ;;
	lat_avg) echo "avg us" ;;
	bw) echo "MB/s" ;;
	pct) echo "% core" ;;
	bytes) echo "B" ;;
	*) echo "${METRIC[$1]}" ;;
	esac
}

report_json() {
	local n s
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
	printf '{"run":"conditions","reps":%d,"pinned":%s,"pinning":"%s","load_before":"%s","load_after":"%s","cores":%d}\n' \
		"$reps" "$([ $pin -eq 1 ] && echo true || echo false)" \
		"$([ $pin -eq 1 ] && echo "$pin_desc" || echo none)" \
		"$load_before" "$load_after" "$(nproc)"
	for n in "${ratios[@]}"; do
		if [ "${RVAL[$n]}" = "n/a" ]; then
			printf '{"%s":"%s","desc":"%s","value":null,"target":"%s","status":"n/a","reason":"%s"}\n' \
				"$([ "${RABS[$n]}" = 1 ] && echo limit || echo ratio)" \
				"$n" "${RDESC[$n]}" "${RTGT[$n]}" "${RWHY[$n]}"
		else
			printf '{"%s":"%s","desc":"%s","value":%s,"target":"%s","status":"%s"}\n' \
				"$([ "${RABS[$n]}" = 1 ] && echo limit || echo ratio)" \
				"$n" "${RDESC[$n]}" "${RVAL[$n]}" "${RTGT[$n]}" "${ROK[$n]}"
		fi
	done
}

report_table() {
	local n s l abs=0 w=36 rw=58
	for n in "${names[@]}"; do
		[ ${#DESC[$n]} -gt $w ] && w=${#DESC[$n]}
	done
	for n in "${ratios[@]}"; do
		[ ${#RDESC[$n]} -gt $rw ] && rw=${#RDESC[$n]}
	done
	printf '\n%-*s %-9s %10s %10s %10s %6s\n' $w "measurement" "metric" "median" "min" "max" "reps"
	for n in "${names[@]}"; do
		s=$(stats "$n")
		if [ -n "$s" ]; then
			set -- $s
			printf '%-*s %-9s %10.3f %10.3f %10.3f %3d/%-2d\n' $w "${DESC[$n]}" "$(unit_of "$n")" \
				"$1" "$2" "$3" "$4" "${WANT[$n]}"
		else
			printf '%-*s %-9s %10s   %s\n' $w "${DESC[$n]}" "$(unit_of "$n")" "n/a" "${ERRS[$n]:-}"
		fi
	done
	printf '\nratios of medians (this run):\n'
	for n in "${ratios[@]}"; do
		if [ "${RABS[$n]}" = 1 ]; then
			abs=1
			continue
		fi
		printf '  %-*s %8s  target %-7s %s\n' $rw "${RDESC[$n]}" "${RVAL[$n]}" "${RTGT[$n]}" \
			"${ROK[$n]}${RWHY[$n]:+ (${RWHY[$n]})}"
	done
	if [ $abs -eq 1 ]; then
		printf '\nabsolute targets (medians, this run):\n'
		for n in "${ratios[@]}"; do
			[ "${RABS[$n]}" = 1 ] || continue
			printf '  %-*s %8s  target %-7s %s\n' $rw "${RDESC[$n]}" "${RVAL[$n]}" \
				"${RTGT[$n]}" "${ROK[$n]}${RWHY[$n]:+ (${RWHY[$n]})}"
		done
	fi
	printf '\n'
	for l in "${notes[@]}"; do
		printf '%s\n' "$l"
	done
	[ $pin -eq 1 ] && printf 'pinned: %s\n' "$pin_desc"
	printf 'load average before: %s, after: %s (%d cores)\n' "$load_before" "$load_after" "$(nproc)"
}

report() {
	if [ $json -eq 1 ]; then
		report_json
	else
		report_table
	fi
}

# cmp_finish: the report (also to --out FILE); exit 1 if be-perf failed in
# any repetition of any of our measurements, else 0. Targets missed and
# other tools failing do not change the exit status.
cmp_finish() {
	local n rc=0
	if [ -n "$out" ]; then
		report | tee "$out"
	else
		report
	fi
	for n in "${names[@]}"; do
		if [ "${OURS[$n]}" = 1 ] && [ "${FAILS[$n]}" -gt 0 ]; then
			echo "$prog: be-perf failed for $n (${FAILS[$n]}/${WANT[$n]}): ${ERRS[$n]:-}" >&2
			rc=1
		fi
	done
	exit $rc
}
