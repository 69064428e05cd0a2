#!/usr/bin/env bash
# close-soak.sh - issue 13's soak: thousands of connect / send / close /
# destroy cycles per transport, zero messages lost.
#
#   bash bench/close-soak.sh [--cycles N] [--build DIR] [--verbs] [TRANSPORT...]
#
# Runs test/sock/test-sock-close-deliver with --cycles N (default 5000) on
# each TRANSPORT (default: tcp shm). --verbs adds the verbs transport,
# which runs inside the Soft-RoCE guest (test/rxe/rxe-run, holding
# /tmp/be-rxe.lock: one guest at a time). Each run prints its counts and
# fails on the first lost message, wrong close reason or close_notify
# status other than 0; ctest runs the same test with a few hundred cycles.
# Exit status: 0 when every transport passed, 1 otherwise.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cycles=5000
build="$root/build"
verbs=0
xports=()
while [ $# -gt 0 ]; do
	case "$1" in
	--cycles) cycles=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--verbs) verbs=1; shift ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	-*) echo "close-soak: unknown option '$1'" >&2; exit 2 ;;
	*) xports+=("$1"); shift ;;
	esac
done
[ ${#xports[@]} -gt 0 ] || xports=(tcp shm)
[ $verbs = 1 ] && xports+=(verbs)
bin="$build/test/sock/test-sock-close-deliver"
[ -x "$bin" ] || { echo "close-soak: $bin not built (cmake --build $build)" >&2; exit 2; }

rc=0
for x in "${xports[@]}"; do
	start=$(date +%s)
	if [ "$x" = verbs ]; then
		flock /tmp/be-rxe.lock "$root/test/rxe/rxe-run" --timeout 0 -- \
			"$bin" --transport verbs --cycles "$cycles" || rc=1
	else
		"$bin" --transport "$x" --cycles "$cycles" || rc=1
	fi
	echo "close-soak: $x, $cycles cycles, $(($(date +%s) - start)) s"
done
exit $rc
