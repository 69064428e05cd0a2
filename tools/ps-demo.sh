#!/usr/bin/env bash
# ps-demo.sh [BUILD_DIR] - the parameter server on this host: 4 logical
# shards on 4 servers, each a primary and a serving replica (both on shm,
# with tcp as their fallback address), a trainer pushing gradients and a
# ranker fetching under the 30 ms deadline for about 20 seconds; half way
# through one serving replica is killed with SIGKILL. Prints the ranker's
# latency table, where the latency CDF plot was written (BUILD_DIR/ps-demo/
# fetch-cdf.png, with gnuplot; its data beside it) and, last, one line:
#   demo: fetches N, failed F, p50 X us, p99 Y us
# Leaves no process and no other file behind. BE_DEMO_SECONDS changes the
# length.
set -euo pipefail

build=${1:-build}
bin=$build/tools
secs=${BE_DEMO_SECONDS:-20}
work=$(mktemp -d /tmp/be-ps-demo.XXXXXX)
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	# The servers are disowned (no job notice when one is killed): wait
	# for them through kill -0.
	for p in "${pids[@]}"; do
		while kill -0 "$p" 2>/dev/null; do
			sleep 0.05
		done
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

for b in be-ps be-ps-load; do
	[ -x "$bin/$b" ] || { echo "demo: $bin/$b is not built" >&2; exit 1; }
done

cat >"$work/model.conf" <<EOF
shards 4
servers 4
table user dim=16 optimizer=adagrad lr=0.05 init=uniform lo=-0.01 hi=0.01
table item dim=32 optimizer=adagrad lr=0.05 init=uniform lo=-0.01 hi=0.01
table ctx dim=16 optimizer=sgd lr=0.01 init=zeros
table ad dim=64 optimizer=ftrl lr=0.05 init=zeros
EOF

# start NAME ARGS...: a be-ps in the background; waits for "ready" and
# sets $addrs to its addresses, space-separated.
start() {
	local name=$1 out
	shift
	out=$work/$name.out
	"$bin/be-ps" --config "$work/model.conf" "$@" >"$out" 2>"$work/$name.err" &
	pids+=($!)
	disown "${pids[-1]}"
	for _ in $(seq 200); do
		grep -q '^ready$' "$out" && break
		kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/$name.err" >&2; exit 1; }
		sleep 0.05
	done
	grep -q '^ready$' "$out" || { echo "demo: $name did not start" >&2; exit 1; }
	addrs=$(sed -n 's/^listening //p' "$out" | tr '\n' ' ')
}

record() { # SERVICE REPLICA ADDRS...
	local svc=$1 rep=$2 a line
	shift 2
	line="$svc $rep"
	for a in "$@"; do
		line="$line addr=$a"
	done
	echo "$line"
}

echo "demo: 4 shards x (primary + replica) over shm, tcp fallback; ranker + trainer for ${secs} s"
mkdir -p "$work/ckpt"
naming=$work/naming
: >"$naming"
for i in 0 1 2 3; do
	start "p$i" --server $i --listen "shm://be-demo-$$-p$i" --listen tcp://127.0.0.1:0 \
		--ckpt-dir "$work/ckpt" --ckpt-every 2
	# shellcheck disable=SC2086
	{ record "be.ps.$i" "p$i" $addrs; record "be.ps.$i.primary" "p$i" $addrs; } >>"$naming"
	start "r$i" --server $i --listen "shm://be-demo-$$-r$i" --listen tcp://127.0.0.1:0 \
		--replica --follow "$work/ckpt" --follow-ms 200
	# shellcheck disable=SC2086
	record "be.ps.$i" "r$i" $addrs >>"$naming"
	eval "pid_r$i=${pids[-1]}"
done
server_pids=()
for p in "${pids[@]}"; do
	server_pids+=(--server-pid "$p")
done

"$bin/be-ps-load" trainer --config "$work/model.conf" --naming "file://$naming" --tables 4 \
	--keys 512 --duration "$secs" --compute-us 20000 --period-ms 50 >"$work/trainer.out" \
	2>"$work/trainer.err" &
trainer=$!
pids+=($trainer)
"$bin/be-ps-load" ranker --config "$work/model.conf" --naming "file://$naming" --tables 4 \
	--keys 256 --rate 50 --duration "$secs" --progress "${server_pids[@]}" --cdf "$work/cdf" \
	>"$work/ranker.out" 2>"$work/ranker.err" &
ranker=$!
pids+=($ranker)

half=$((secs / 2))
for s in $(seq "$secs"); do
	sleep 1
	tail -n 1 "$work/ranker.err" 2>/dev/null | sed 's/^/  /' || true
	if [ "$s" -eq "$half" ]; then
		# shellcheck disable=SC2154
		kill -9 "$pid_r1" 2>/dev/null || true
		echo "  ($s s) killed serving replica r1 (shard 1) with SIGKILL"
	fi
done
wait "$ranker" || { cat "$work/ranker.err" >&2; exit 1; }
wait "$trainer" || { cat "$work/trainer.err" >&2; exit 1; }

echo "== trainer"
cat "$work/trainer.out"
echo "== ranker"
cat "$work/ranker.out"
plots=$build/ps-demo
mkdir -p "$plots"
cp "$work/cdf" "$plots/fetch-cdf.txt"
if command -v gnuplot >/dev/null 2>&1 &&
	gnuplot -e "set terminal png size 800,500; set output '$plots/fetch-cdf.png';
		set title 'demo: ranker fetch latency (one replica killed half way)';
		set logscale x; set grid; set key bottom right; set yrange [0:1];
		set xlabel 'latency (us)'; set ylabel 'fraction of fetches';
		plot '$plots/fetch-cdf.txt' using 1:2 with lines lw 2 title 'be-ps-load ranker'" \
		2>/dev/null; then
	echo "demo: latency CDF plot written to $plots/fetch-cdf.png"
else
	echo "demo: latency CDF data in $plots/fetch-cdf.txt (install gnuplot-nox for the plot)"
fi
awk '
	/^ranker:/ { n = $2; for (i = 1; i <= NF; i++) if ($i == "errors") f = $(i + 1) }
	/^fetch/ { for (i = 1; i <= NF; i++) { if ($i == "p50") p50 = $(i + 1); if ($i == "p99") p99 = $(i + 1) } }
	END { gsub(",", "", f); printf "demo: fetches %d, failed %d, p50 %.0f us, p99 %.0f us\n", n, f, p50, p99 }
' "$work/ranker.out"
