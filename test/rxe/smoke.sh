#!/usr/bin/env bash
# smoke.sh - check that the Soft-RoCE guest can do real verbs traffic.
#
#   test/rxe/rxe-run -- test/rxe/smoke.sh [--bw]
#
# Run on the host (no BE_RXE_GUEST), it starts itself in the guest through
# rxe-run. Each check is a server and a client over rxe0 to 10.0.2.15:
# ibv_rc_pingpong (plain verbs, GID index from sysfs), perftest's
# ib_write_lat and ib_send_lat over rdma_cm (-R), rping (librdmacm), and
# with --bw also ib_write_bw. Ends with "N passed, N failed".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${BE_RXE_GUEST:-}" ]; then
	exec "$here/rxe-run" -- "$here/smoke.sh" "$@"
fi

bw=0
[ "${1:-}" = --bw ] && bw=1
dev=${BE_RXE_DEV0:-rxe0}
ip=${BE_RXE_IP0:-10.0.2.15}
iters=${BE_SMOKE_ITERS:-1000}
passed=0
failed=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# pair NAME SERVER... -- CLIENT...: start the server, run the client (with
# retries while the server is not yet listening), both must exit 0. A
# client that dies of a signal or times out has left the one-shot server
# stuck with a dead peer: the round ends and the pair starts afresh, up to
# three rounds (perftest's ib_write_lat client has been seen to segfault
# once in a few hundred runs under emulation, before any traffic).
pair() {
	local name=$1 srv=() cli=() spid crc=1 src=0 try round
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	for round in 1 2 3; do
		crc=1
		src=0
		timeout 120 "${srv[@]}" >"$log/$name.srv" 2>&1 &
		spid=$!
		for try in 1 2 3 4 5 6 7 8 9 10; do
			sleep 0.5
			crc=0
			timeout 60 "${cli[@]}" >"$log/$name.cli" 2>&1 || crc=$?
			[ $crc -eq 0 ] && break
			kill -0 "$spid" 2>/dev/null || break
			echo "  ($name: client attempt $try failed with $crc)"
			[ $crc -ge 124 ] && break
		done
		if [ $crc -ne 0 ]; then
			kill "$spid" 2>/dev/null || true
		fi
		wait "$spid" || src=$?
		[ $crc -eq 0 ] && break
		[ $round -lt 3 ] && echo "  ($name: round $round failed, restarting the server)"
	done
	if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
		echo "PASS $name"
		passed=$((passed + 1))
		return 0
	fi
	echo "FAIL $name (client $crc, server $src)"
	echo "--- server: ${srv[*]}"
	cat "$log/$name.srv"
	echo "--- client: ${cli[*]}"
	cat "$log/$name.cli"
	failed=$((failed + 1))
	return 1
}

# GID index of the RoCE v2 GID that holds $ip
gid_index() {
	local p=/sys/class/infiniband/$dev/ports/1 want g
	local -a o
	IFS=. read -r -a o <<<"$ip"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${o[@]}")
	for g in "$p"/gids/*; do
		if [ "$(cat "$g" 2>/dev/null)" = "$want" ] &&
			[ "$(cat "$p/gid_attrs/types/${g##*/}" 2>/dev/null)" = "RoCE v2" ]; then
			echo "${g##*/}"
			return 0
		fi
	done
	return 1
}

# print the perftest result line (header + numbers) of a client log
perf_result() {
	awk '/^ *#bytes/ { h = $0; getline; print h; print; exit }' "$log/$1.cli"
}

echo "== ibv_devinfo -d $dev"
if ibv_devinfo -d "$dev" >"$log/devinfo" 2>&1 && grep -q 'PORT_ACTIVE' "$log/devinfo"; then
	grep -E 'hca_id|transport|state|active_mtu|link_layer' "$log/devinfo"
	echo "PASS ibv_devinfo"
	passed=$((passed + 1))
else
	cat "$log/devinfo"
	echo "FAIL ibv_devinfo"
	failed=$((failed + 1))
fi

gidx=$(gid_index) || gidx=
echo "== RoCE v2 GID of $ip on $dev: index ${gidx:-none}"
if [ -n "$gidx" ]; then
	if pair rc_pingpong ibv_rc_pingpong -d "$dev" -g "$gidx" -n "$iters" -- \
		ibv_rc_pingpong -d "$dev" -g "$gidx" -n "$iters" "$ip"; then
		grep -E 'bytes in' "$log/rc_pingpong.cli" || true
	fi
else
	echo "FAIL rc_pingpong (no RoCE v2 GID for $ip)"
	failed=$((failed + 1))
fi

for t in ib_write_lat ib_send_lat; do
	if pair "$t" "$t" -d "$dev" -R -F -n "$iters" -- \
		"$t" -d "$dev" -R -F -n "$iters" "$ip"; then
		perf_result "$t"
	fi
done

pair rping rping -s -a "$ip" -C 10 -S 64 -- rping -c -a "$ip" -C 10 -S 64 || true

if [ $bw -eq 1 ]; then
	if pair ib_write_bw ib_write_bw -d "$dev" -R -F -n 5000 -- \
		ib_write_bw -d "$dev" -R -F -n 5000 "$ip"; then
		perf_result ib_write_bw
	fi
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
