# lib.sh - what the scripts of bench/paper/ (the paper's experiments,
# issue 16 section 4) share. Sourced, never run:
#
#   prog=fetch
#   . "$(dirname "$0")/lib.sh"
#   paper_args "$@"            # common options; the rest in PAPER_REST
#   paper_opts --qps=qps --busy:polling=--busy   # the script's own options
#   paper_bins be-ps be-ps-load      # every binary must be built
#   ... measure: paper_ps_start, paper_spawn, paper_jget, paper_add ...
#   paper_stats_all; paper_table_add ...; paper_json ...
#   paper_conditions EXPERIMENT ...  # or paper_table_print
#   paper_plot / paper_plot_files / paper_plot_cdf
#
# Functions, each documented where it is defined: processes (paper_spawn,
# paper_wait_pid, paper_kill, paper_ps_start, paper_model,
# paper_naming_add, paper_shm_name, paper_cleanup), numbers (paper_add,
# paper_stats_all, stats, median, paper_spread, paper_jstats, jfield,
# paper_jget, paper_load), output (paper_json, paper_table_add,
# paper_table_print, paper_conditions, paper_gnuplot, paper_plot, paper_plot_files,
# paper_plot_cdf), paper_die and paper_log.
#
# Common options (paper_args):
#   --json        one JSON line per measurement on stdout (the table goes
#                 to stderr then); without it, the table on stdout
#   --quick       a smoke run: reps 1 and the script's shortest settings
#                 (quick=1; each script decides what it shortens)
#   --reps N      repetitions per measurement (default 3)
#   --build DIR   the build directory holding tools/ (default: $root/build)
#   --out DIR     where the JSON and PNG files go (default: $root/build/paper)
#   --keep        keep the work directory (server logs) and say where
#   -h|--help     print the comment block at the top of the script
# Anything else is left, in order, in the array PAPER_REST.
#
# Globals set by paper_args:
#   root      the source tree          work   a temp dir, removed on exit
#   json quick reps build out keep     the options
#   bin       $build/tools              tag    a per-run name (be-paper-PID)
#   port      a TCP port base; take ports with $((port++))
#   jsonfile  $out/$prog.json, one JSON line per paper_json call (the file
#             is written whether or not --json was given)
#
# Exit status conventions: paper_die exits 2 (usage, missing binaries);
# scripts exit 1 when a run broke (a program failed, a row was wrong, a
# measurement gave no figures), else 0. Deadline misses are results, and
# goals (ratios against kernel TCP) are reported, never enforced.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
json=0
quick=0
reps=3
build=""
out=""
keep=0
PAPER_REST=()
PAPER_PIDS=()
declare -A VALS

paper_die() { echo "$prog: $*" >&2; exit 2; }
paper_log() { echo "$prog: $*" >&2; }

paper_args() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--json) json=1; shift ;;
		--quick) quick=1; reps=1; shift ;;
		--reps) [ $# -ge 2 ] || paper_die "--reps needs a value"; reps=$2; shift 2 ;;
		--build) [ $# -ge 2 ] || paper_die "--build needs a value"; build=$2; shift 2 ;;
		--out) [ $# -ge 2 ] || paper_die "--out needs a value"; out=$2; shift 2 ;;
		--keep) keep=1; shift ;;
		-h|--help) sed -n '2,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) PAPER_REST+=("$1"); shift ;;
		esac
	done
	case "$reps" in ''|*[!0-9]*|0) paper_die "--reps needs a number > 0" ;; esac
	build=${build:-$root/build}
	bin=$build/tools
	out=${out:-$build/paper}
	mkdir -p "$out" || paper_die "cannot create $out"
	jsonfile=$out/$prog.json
	: >"$jsonfile"
	tag=be-paper-$$
	port=$((20000 + $$ % 20000))
	work=$(mktemp -d "/tmp/$tag.XXXXXX")
	trap paper_cleanup EXIT
	trap 'exit 130' INT TERM
}

# paper_opts SPEC...: the script's own options, from PAPER_REST, into
# variables. A SPEC is OPTION=VAR (the option takes a value: VAR=value)
# or OPTION:VAR=VALUE[,VAR=VALUE...] (a flag: sets each VAR). An option
# no SPEC names, or one missing its value, is a usage error (exit 2).
paper_opts() {
	local i=0 n=${#PAPER_REST[@]} a s f hit
	while [ "$i" -lt "$n" ]; do
		a=${PAPER_REST[$i]}
		hit=0
		for s in "$@"; do
			case "$s" in
			"$a="*)
				[ $((i + 1)) -lt "$n" ] || paper_die "$a needs a value"
				i=$((i + 1))
				printf -v "${s#*=}" '%s' "${PAPER_REST[$i]}"
				hit=1 ;;
			"$a:"*)
				s=${s#*:}
				for f in ${s//,/ }; do printf -v "${f%%=*}" '%s' "${f#*=}"; done
				hit=1 ;;
			esac
		done
		[ "$hit" = 1 ] || paper_die "unknown option '$a' (--help)"
		i=$((i + 1))
	done
}

# paper_reps N FN: the measurements: FN REP for REP in 1..N, each
# announced ("repetition REP/$reps"), with the load averages around them
# in $load_before and $load_after (paper_conditions reports them).
paper_reps() {
	local n=$1 fn=$2 r
	load_before=$(paper_load)
	for r in $(seq "$n"); do
		paper_log "repetition $r/$reps"
		"$fn" "$r"
	done
	load_after=$(paper_load)
}

# paper_bins NAME...: each of $bin/NAME (or $build/NAME when NAME has a
# slash: bench/grpc/grpc-fetch) must be executable, else exit 2.
paper_bins() {
	local b p
	for b in "$@"; do
		case "$b" in */*) p=$build/$b ;; *) p=$bin/$b ;; esac
		[ -x "$p" ] || paper_die "$p is not built (cmake --build $build --target ${b##*/})"
	done
}

# paper_have PATH: 0 if the binary (as for paper_bins) is built.
paper_have() {
	case "$1" in */*) [ -x "$build/$1" ] ;; *) [ -x "$bin/$1" ] ;; esac
}

# ---- processes --------------------------------------------------------------

# paper_spawn NAME CMD...: run CMD in the background, stdout in
# $work/NAME.out and stderr in $work/NAME.err; its pid in $spawned and
# tracked for cleanup. Disowned, so a kill -9 prints no job notice.
paper_spawn() {
	local name=$1
	shift
	"$@" >"$work/$name.out" 2>"$work/$name.err" &
	spawned=$!
	PAPER_PIDS+=("$spawned")
	disown "$spawned" 2>/dev/null || true
}

# paper_wait_pid PID [SECONDS]: wait (default 120 s) for PID, a process
# of paper_spawn, to exit; 0 when it did, 1 when it is still there.
paper_wait_pid() {
	local p=$1 n=$(( ${2:-120} * 20 ))
	while kill -0 "$p" 2>/dev/null && [ $n -gt 0 ]; do
		sleep 0.05
		n=$((n - 1))
	done
	! kill -0 "$p" 2>/dev/null
}

# paper_kill PID...: SIGKILL (and SIGCONT, for a stopped one) and wait
# until each is gone.
paper_kill() {
	local p
	for p in "$@"; do
		kill -9 "$p" 2>/dev/null || true
		kill -CONT "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		paper_wait_pid "$p" 10 || true
	done
}

# paper_model FILE SHARDS SERVERS [TABLES [DIM]]: a be-ps model config
# (docs/PS.md, "Config file"): TABLES (default 4) tables t0.. of DIM
# (default 32) float32, Adagrad, seeded uniform initializer.
paper_model() {
	local f=$1 shards=$2 servers=$3 tables=${4:-4} dim=${5:-32} i
	{
		echo "shards $shards"
		echo "servers $servers"
		for i in $(seq 0 $((tables - 1))); do
			echo "table t$i dim=$dim optimizer=adagrad lr=0.05 init=uniform lo=-0.01 hi=0.01"
		done
	} >"$f"
}

# paper_ps_start NAME CONFIG ARGS...: a be-ps server (ARGS: --server I
# --listen ADDR ... as be-ps takes them); waits up to 20 s for "ready".
# Sets $spawned to its pid and $addrs to its addresses, space separated
# (the tcp://127.0.0.1:0 it was given becomes the port it bound).
paper_ps_start() {
	local name=$1 conf=$2 i
	shift 2
	paper_spawn "$name" "$bin/be-ps" --config "$conf" "$@"
	for i in $(seq 400); do
		grep -q '^ready$' "$work/$name.out" 2>/dev/null && break
		kill -0 "$spawned" 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -q '^ready$' "$work/$name.out" 2>/dev/null; then
		sed 's/^/  /' "$work/$name.err" >&2
		paper_die "be-ps $name did not start"
	fi
	addrs=$(sed -n 's/^listening //p' "$work/$name.out" | tr '\n' ' ')
}

# paper_naming_add FILE SERVICE REPLICA ADDR...: one naming record
# (rpc.h's file:// format) for be-ps-load --naming file://FILE.
paper_naming_add() {
	local f=$1 line="$2 $3" a
	shift 3
	for a in "$@"; do
		line="$line addr=$a"
	done
	echo "$line" >>"$f"
}

# paper_shm_name NAME: a shm:// address name unique to this run (cleanup
# removes anything of the run's tag left in /dev/shm).
paper_shm_name() { echo "$tag-$1"; }

# paper_cleanup: every process of paper_spawn killed and waited for, the
# run's /dev/shm files removed, the work directory removed unless --keep.
# Runs on exit (trap set by paper_args); a script may call it earlier.
paper_cleanup() {
	local rc=$?
	[ ${#PAPER_PIDS[@]} -gt 0 ] && paper_kill "${PAPER_PIDS[@]}"
	PAPER_PIDS=()
	rm -f /dev/shm/*"$tag"* 2>/dev/null || true
	if [ -n "${work:-}" ] && [ -d "$work" ]; then
		if [ "$keep" = 1 ]; then
			paper_log "kept $work"
		else
			rm -rf "$work"
		fi
	fi
	return $rc
}

# ---- numbers ------------------------------------------------------------------

. "$root/bench/lib-stats.sh" # stats NAME -> "median min max count"; median NAME

# paper_stats_all: the stats of every name of VALS at once (one awk, not
# one per name), kept until the next paper_add; stats, median,
# paper_spread and paper_jstats use them.
declare -A PSTAT
paper_stats_all() {
	local n rest
	PSTAT=()
	while read -r n rest; do
		[ -n "$n" ] && PSTAT[$n]=$rest
	done < <(for n in "${!VALS[@]}"; do echo "$n ${VALS[$n]}"; done | awk 'NF > 1 {
		n = 0
		for (i = 2; i <= NF; i++) v[n++] = $i
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
			if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
		printf "%s %g %g %g %d\n", $1, m, v[0], v[n - 1], n
	}')
}
eval "lib_stats_$(declare -f stats)"
stats() {
	if [ -n "${PSTAT[$1]+x}" ]; then
		echo "${PSTAT[$1]}"
	else
		lib_stats_stats "$1"
	fi
}

# paper_add NAME VALUE: one more value of NAME (empty VALUE is ignored).
paper_add() {
	[ -n "$2" ] && [ "$2" != - ] && VALS[$1]+="$2 "
	unset "PSTAT[$1]"
	return 0
}

# paper_spread NAME: "median (min-max)" for the table, "n/a" without values,
# the median alone with one value.
paper_spread() {
	local s
	[ -n "${PSTAT[$1]+x}" ] && s=${PSTAT[$1]} || s=$(stats "$1")
	[ -n "$s" ] || { echo "n/a"; return; }
	set -- $s
	if [ "$4" -gt 1 ]; then echo "$1 ($2-$3)"; else echo "$1"; fi
}

# paper_jstats KEY NAME: ,"KEY":median,"KEY_min":..,"KEY_max":.. for a JSON
# line (null when NAME has no value).
paper_jstats() {
	local k=$1 s
	[ -n "${PSTAT[$2]+x}" ] && s=${PSTAT[$2]} || s=$(stats "$2")
	if [ -n "$s" ]; then
		set -- $s
		printf '"%s":%s,"%s_min":%s,"%s_max":%s' "$k" "$1" "$k" "$2" "$k" "$3"
	else
		printf '"%s":null,"%s_min":null,"%s_max":null' "$k" "$k" "$k"
	fi
}

# jfield KEY: a number field of one JSON line on stdin ("" when absent).
jfield() { sed -n "s/.*\"$1\":\\([-0-9.eE+]*\\).*/\\1/p" | head -n1; }

# paper_jget LINE KEY...: the number fields KEY... of the JSON line LINE,
# space separated in that order, "-" for a missing one; one process for
# all of them (read -r a b c <<<"$(paper_jget "$line" a b c)").
paper_jget() {
	local line=$1
	shift
	printf '%s\n' "$line" | awk -v keys="$*" '{
		n = split(keys, k, " ")
		for (i = 1; i <= n; i++) {
			v = "-"
			if (match($0, "\"" k[i] "\":-?[0-9.eE+]+")) {
				v = substr($0, RSTART, RLENGTH)
				sub(/^[^:]*:/, "", v)
			}
			printf "%s%s", (i > 1 ? " " : ""), v
		}
		print ""
	}'
}

# paper_load: the 1, 5 and 15 minute load averages.
paper_load() { cut -d' ' -f1-3 /proc/loadavg; }

# ---- output ---------------------------------------------------------------

# paper_json FIELD...: one JSON line, FIELD as KEY=VALUE. A VALUE that is a
# number, true, false or null is written as is, anything else as a string;
# KEY:s=VALUE forces a string, KEY:stats=NAME expands to KEY, KEY_min,
# KEY_max from the values of NAME (paper_add). The line goes to $jsonfile,
# and to stdout with --json.
paper_json() {
	local f k v line="{" sep=""
	for f in "$@"; do
		k=${f%%=*}
		v=${f#*=}
		case "$k" in
		*:s) line+="$sep\"${k%:s}\":\"$(paper_jesc "$v")\"" ;;
		*:stats) line+="$sep$(paper_jstats "${k%:stats}" "$v")" ;;
		*)
			if [[ "$v" =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] ||
				[ "$v" = true ] || [ "$v" = false ] || [ "$v" = null ]; then
				line+="$sep\"$k\":$v"
			else
				line+="$sep\"$k\":\"$(paper_jesc "$v")\""
			fi
			;;
		esac
		sep=","
	done
	line+="}"
	echo "$line" >>"$jsonfile"
	[ "$json" = 1 ] && echo "$line"
	return 0
}
# paper_jesc S: S escaped for a JSON string (no process: this machine is
# shared and loaded, and every fork costs).
paper_jesc() {
	local v=${1//\\/\\\\}
	v=${v//\"/\\\"}
	v=${v//$'\n'/ }
	printf '%s' "${v//$'\t'/ }"
}

# paper_table_add CELL...: one row of the table (the first call: the
# header). paper_table_print: the table, aligned, on stdout (stderr with
# --json), then the lines of the array notes.
PAPER_TABLE=()
notes=()
paper_table_add() {
	local IFS='|'
	PAPER_TABLE+=("$*")
}
paper_table_print() {
	local fd=1
	[ "$json" = 1 ] && fd=2
	{
		printf '%s\n' "${PAPER_TABLE[@]}" | column -t -s '|'
		[ ${#notes[@]} -gt 0 ] && printf '%s\n' "${notes[@]}"
		true
	} >&$fd
}

# paper_conditions EXPERIMENT FIELD...: the end of a run: its load
# averages ($load_before, $load_after, set by the script around the
# measurements) as a note under the table, a JSON line kind=conditions
# experiment=EXPERIMENT reps=$reps FIELD... (paper_json's form) with the
# load averages and the cores, then paper_table_print.
paper_conditions() {
	local e=$1
	shift
	notes+=("load average before / after: $load_before / $load_after ($(nproc) cores, shared)")
	paper_json kind=conditions experiment="$e" reps="$reps" "$@" \
		load_before:s="$load_before" load_after:s="$load_after" cores="$(nproc)"
	paper_table_print
}

# paper_gnuplot: 0 if gnuplot is there, installing gnuplot-nox with
# apt-get when we are root and it is missing; else 1 with a message saying
# the PNG is skipped. Set PAPER_NO_INSTALL=1 never to install.
paper_gnuplot() {
	command -v gnuplot >/dev/null 2>&1 && return 0
	if [ "${PAPER_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		paper_log "installing gnuplot-nox for the plots"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1 || true
		command -v gnuplot >/dev/null 2>&1 && return 0
	fi
	paper_log "gnuplot is not installed (apt-get install gnuplot-nox): no PNG written"
	return 1
}

# paper_plot PNG SCRIPT: run the gnuplot commands SCRIPT (without terminal
# or output) into PNG (800x500, pngcairo if present, else png); prints
# "PNG: path" on stderr. Returns 0 also when gnuplot is missing (skipped).
paper_plot() {
	local png=$1 script=$2 term=png
	paper_gnuplot || return 0
	gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo && term=pngcairo
	if printf 'set terminal %s size 800,500\nset output "%s"\nset grid\nset key top left\n%s\n' \
		"$term" "$png" "$script" | gnuplot 2>"$work/gnuplot.err"; then
		paper_log "PNG: $png"
	else
		paper_log "gnuplot failed: $(head -n 3 "$work/gnuplot.err" | tr '\n' ' ')"
	fi
	return 0
}

# paper_plot_files PNG SETTINGS STYLE LABEL=FILE...: one curve per FILE
# (columns 1:2, STYLE "lines" or "linespoints"), titled LABEL, after the
# gnuplot SETTINGS (title, axes, scales). Empty or missing FILEs are left
# out; nothing is plotted without any.
paper_plot_files() {
	local png=$1 settings=$2 style=$3 s="" sep="plot " lf
	shift 3
	for lf in "$@"; do
		[ -s "${lf#*=}" ] || continue
		s+="$sep\"${lf#*=}\" using 1:2 with $style lw 2 title \"${lf%%=*}\""
		sep=", "
	done
	[ -n "$s" ] || return 0
	paper_plot "$png" "$settings
$s"
}

# paper_plot_cdf PNG TITLE LABEL=FILE...: latency CDF curves, each FILE of
# lines "latency_us fraction" (be-ps-load --cdf), log-scaled x.
paper_plot_cdf() {
	local png=$1 title=$2
	shift 2
	paper_plot_files "$png" "set title \"$title\"
set logscale x
set xlabel \"latency (us)\"
set ylabel \"fraction of fetches\"
set yrange [0:1]
set key bottom right" lines "$@"
}
