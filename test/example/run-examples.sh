#!/usr/bin/env bash
# run-examples.sh - build and run examples/ the way a newcomer does
# (examples/README.md), against this build installed to a fresh prefix:
#
#   1. cmake --install BUILD --prefix P; be.pc must name P, and each of
#      REQUIRES (pkg-config modules of the libraries libbe.a links, such
#      as libcurl and jansson) that pkg-config knows in Requires.private.
#   2. libbe.a must hold plain objects (no GCC LTO bytecode).
#   3. echo_server and echo_client built with pkg-config (libbe.so), the
#      client also with libbe.a and the libraries pkg-config --static
#      names, and fully static when ALL_STATIC is 1 (Debian has no static
#      libraries for some of libcurl's dependencies, which the etcd
#      discovery layer brings in); both with find_package(be)
#      (examples/CMakeLists.txt: be::be, be::be_static).
#   4. each server, over tcp and shm, answers each client; every client
#      must print its echoes and exit 0, every server exit 0 on SIGTERM.
#
# usage: run-examples.sh BUILD_DIR SOURCE_DIR LIBDIR CC ALL_STATIC REQUIRES
# Exit 0 pass, 1 fail, 77 skipped (pkg-config not installed).
set -euo pipefail

build=$1 src=$2 libdir=$3 cc=$4 all_static=$5 requires=${6:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/be-examples.XXXXXX")
server_pid=
cleanup() {
	[ -z "$server_pid" ] || kill -9 "$server_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
step() { echo "== $*"; }

if ! command -v pkg-config >/dev/null; then
	echo "pkg-config is not installed: skipped"
	exit 77
fi

P=$work/prefix
step "cmake --install $build --prefix $P"
cmake --install "$build" --prefix "$P" >"$work/install.log" || { cat "$work/install.log"; fail "install"; }
export PKG_CONFIG_PATH=$P/$libdir/pkgconfig
prefix=$(pkg-config --variable=prefix be)
[ "$prefix" = "$P" ] || fail "be.pc names prefix '$prefix', not $P"
cflags=$(pkg-config --cflags be)
case " $cflags " in
*" -I$P/include "*) ;;
*) fail "pkg-config --cflags be: '$cflags' lacks -I$P/include" ;;
esac
req=$(pkg-config --print-requires-private be)
for m in $requires; do
	pkg-config --exists "$m" || continue
	grep -qw "^$m" <<<"$req" || fail "be.pc: Requires.private lacks $m ($(tr '\n' ' ' <<<"$req"))"
done
echo "be.pc: prefix=$prefix; requires.private: $(tr '\n' ' ' <<<"$req"); static: $(pkg-config --static --libs be | tr -s ' ' | cut -c1-120)..."

step "libbe.a: plain objects"
sections=$(readelf -SW "$P/$libdir/libbe.a")
grep -q ' \.text ' <<<"$sections" || fail "readelf found no .text in libbe.a"
if grep -q '\.gnu\.lto_' <<<"$sections"; then
	fail "libbe.a carries LTO bytecode"
fi

step "build with pkg-config"
mkdir "$work/pc"
for p in echo_server echo_client; do
	# shellcheck disable=SC2046 # pkg-config's output is a list of words
	"$cc" -Wall -Wextra -Werror -o "$work/pc/$p" "$src/examples/$p.c" \
		$(pkg-config --cflags --libs be)
done
# libbe.a first on the search path: -lbe finds it, not libbe.so.
mkdir "$work/static-lib"
ln -s "$P/$libdir/libbe.a" "$work/static-lib/"
# shellcheck disable=SC2046
"$cc" -o "$work/pc/echo_client_static" "$src/examples/echo_client.c" -L"$work/static-lib" \
	$(pkg-config --static --cflags --libs be)
dyn=$(readelf -d "$work/pc/echo_client_static")
grep -q NEEDED <<<"$dyn" || fail "readelf found no NEEDED entry in echo_client_static"
if grep -q 'NEEDED.*libbe\.so' <<<"$dyn"; then
	fail "echo_client_static needs libbe.so"
fi
clients="pc/echo_client pc/echo_client_static cm/echo_client"
if [ "$all_static" = 1 ]; then
	# shellcheck disable=SC2046
	if ! "$cc" -static -o "$work/pc/echo_client_all_static" "$src/examples/echo_client.c" \
		$(pkg-config --static --cflags --libs be) 2>"$work/static.log"; then
		cat "$work/static.log"
		fail "fully static link with pkg-config --static"
	fi
	clients="$clients pc/echo_client_all_static"
else
	echo "fully static link: not tried (etcd discovery is built)"
fi
# (Outputs are read whole: with pipefail, grep -q leaving early could
# fail the pipeline.)
deps=$(LD_LIBRARY_PATH=$P/$libdir ldd "$work/pc/echo_server")
grep -q "libbe\.so\.0 => $P/$libdir/" <<<"$deps" ||
	fail "echo_server does not find $P/$libdir/libbe.so.0"

step "build with find_package(be)"
cmake -S "$src/examples" -B "$work/cm" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$cc" \
	>"$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "configure examples/"; }
cmake --build "$work/cm" >>"$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "build examples/"; }

# run_server NAME CMD ADDR: start a server, wait (bounded) for its address.
run_server() {
	local name=$1 cmd=$2 addr=$3 _
	# Made here, not by the background redirect, so the first sed finds it.
	: >"$work/$name.out"
	"$cmd" "$addr" >"$work/$name.out" 2>&1 &
	server_pid=$!
	for _ in $(seq 100); do
		listen=$(sed -n 's/^listening on //p' "$work/$name.out")
		[ -n "$listen" ] && return 0
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$work/$name.out"
	fail "$name did not start listening on $addr"
}

# stop_server NAME CLIENTS: SIGTERM; it must exit 0 having seen CLIENTS.
stop_server() {
	local name=$1 want=$2 rc=0 n
	kill -TERM "$server_pid"
	wait "$server_pid" || rc=$?
	server_pid=
	n=$(grep -c '^client connected' "$work/$name.out" || true)
	[ "$rc" -eq 0 ] || { cat "$work/$name.out"; fail "$name exited with $rc"; }
	[ "$n" -eq "$want" ] || { cat "$work/$name.out"; fail "$name saw $n clients, not $want"; }
}

big=$(head -c 100000 /dev/zero | tr '\0' x) # past the eager size: the large path
expect=$(printf 'echo: hello\necho: %s... (100000 bytes)' "${big:0:40}")
export LD_LIBRARY_PATH=$P/$libdir # for the pkg-config builds; CMake's have an rpath
for transport in tcp shm; do
	for server in pc/echo_server cm/echo_server; do
		case $transport in
		tcp) addr=tcp://127.0.0.1:0 ;;
		shm) addr=shm://be-example-$$-${server%%/*} ;;
		esac
		name=${server%%/*}-server-$transport
		run_server "$name" "$work/$server" "$addr"
		n=0
		for client in $clients; do
			step "$transport: $server <- $client ($listen)"
			rc=0
			out=$(timeout 60 "$work/$client" "$listen" hello "$big" 2>&1) || rc=$?
			[ $rc -eq 0 ] || { echo "$out"; fail "$client exited with $rc"; }
			[ "$out" = "$expect" ] || { echo "$out"; fail "$client: wrong output"; }
			n=$((n + 1))
		done
		stop_server "$name" $n
	done
done
echo "examples: all echoes came back"
