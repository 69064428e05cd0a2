#!/usr/bin/env bash
# quickstart.sh - install what be needs on Debian 12, build, and run.
#
#   bash tools/quickstart.sh demo   install, build (build-release/, Release,
#                                   no tests), run the demo: a parameter
#                                   server cluster on this host (tools/ps-demo.sh)
#   bash tools/quickstart.sh layers install, build (build-release/), walk up
#                                   the layers with be-perf (bemalloc,
#                                   transports, Sockets)
#   bash tools/quickstart.sh test   install, build, run the whole test suite:
#                                   normal build (build/, RelWithDebInfo),
#                                   ASan+UBSan build (build-asan/), TSan on the
#                                   threaded tests (build-tsan/), libFuzzer
#                                   harnesses briefly (build-fuzz/), verbs
#                                   tests on Soft-RoCE
#
# Each mode has its own build folders, so running one after the other does
# not rebuild what the other built.
#
# Environment: BE_JOBS (parallel build jobs), BE_SKIP_RXE=1 (skip the
# Soft-RoCE guest), BE_SKIP_SANITIZERS=1 (normal build only).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${BE_JOBS:-$(nproc)}
mode=${1:-}

# Debian packages: the build (libc6-dev also for the static link of the
# examples test), verbs (rdma-core), and the comparison tools.
build_pkgs=(gcc libc6-dev make cmake pkg-config libssl-dev libibverbs-dev librdmacm-dev ibverbs-providers)
bench_pkgs=(ucx-utils libfabric-bin perftest g++ libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc)
# gnuplot: the demo's latency CDF and the PNGs of bench/paper/.
plot_pkgs=(gnuplot-nox)
# clang and its libFuzzer runtime: the libFuzzer builds of the harnesses.
fuzz_pkgs=(clang libclang-rt-dev)
# etcd discovery (and its tests); a program linking libbe.a links libcurl,
# and libcurl.pc names these libraries for a static link (the examples test).
etcd_pkgs=(etcd-server libcurl4-openssl-dev libjansson-dev)
curl_static_pkgs=(libnghttp2-dev libidn2-dev librtmp-dev libssh2-1-dev libpsl-dev libssl-dev
	libkrb5-dev libldap-dev libzstd-dev libbrotli-dev zlib1g-dev)

install_pkgs() {
	local missing=()
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "quickstart: missing packages: ${missing[*]} (run as root or install them)" >&2
		exit 1
	fi
	echo "quickstart: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
}

# build DIR [cmake args...]
build() {
	local dir=$1
	shift
	cmake -S . -B "$dir" -DBE_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j "$jobs"
}

case "$mode" in
demo)
	install_pkgs "${build_pkgs[@]}" "${plot_pkgs[@]}"
	# The demo runs tools only: no test programs, no gRPC baselines.
	build build-release -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF -DBE_WITH_GRPC=OFF
	exec bash tools/ps-demo.sh build-release
	;;
layers)
	install_pkgs "${build_pkgs[@]}"
	build build-release -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF -DBE_WITH_GRPC=OFF
	# Up the layers: bemalloc against glibc malloc, the shm and tcp
	# transports raw, then Sockets over an Engine (each test forks its
	# own peer process).
	perf=build-release/tools/be-perf
	echo "== bemalloc: registered buffers vs glibc malloc"
	$perf alloc --iters 200000 --runs 3
	for t in shm tcp; do
		echo "== $t transport: WRITE_WITH_IMM ping-pong, 1 MiB writes"
		$perf raw-lat --transport $t --iters 20000
		$perf raw-bw --transport $t --iters 500
		echo "== BE core over $t: 64 B Socket ping-pong, 1 MiB Socket stream"
		$perf lat --transport $t --iters 20000
		$perf bw --transport $t --iters 500
	done
	;;
test)
	install_pkgs "${build_pkgs[@]}" "${bench_pkgs[@]}" "${plot_pkgs[@]}" "${etcd_pkgs[@]}" "${curl_static_pkgs[@]}" \
		"${fuzz_pkgs[@]}"
	if [ -z "${BE_SKIP_RXE:-}" ] && [ -x test/rxe/rxe-setup ]; then
		test/rxe/rxe-setup
	fi
	rc=0
	# The demo's own configuration first: at -O3 GCC inlines further
	# and its -Werror warnings are not the test build's.
	echo "== build: the demo's Release configuration"
	build build-release -DCMAKE_BUILD_TYPE=Release -DBE_BUILD_TESTS=OFF -DBE_WITH_GRPC=OFF || rc=1
	echo "== tests: release build"
	build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBE_BUILD_TESTS=ON
	(cd build && ctest --output-on-failure -j "$jobs" ${BE_SKIP_RXE:+-LE rxe}) || rc=1
	if [ -z "${BE_SKIP_SANITIZERS:-}" ]; then
		echo "== tests: AddressSanitizer + UndefinedBehaviorSanitizer build"
		build build-asan -DCMAKE_BUILD_TYPE=Debug -DBE_SANITIZE=ON
		(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
			ctest --output-on-failure -j "$jobs" -LE rxe) || rc=1
		echo "== tests: ThreadSanitizer build (tests labelled 'threads')"
		build build-tsan -DCMAKE_BUILD_TYPE=Debug -DBE_TSAN=ON
		(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 \
			ctest --output-on-failure -j "$jobs" -L threads) || rc=1
		echo "== tests: libFuzzer build (clang), a brief run of every harness"
		cmake -S . -B build-fuzz -DBE_WERROR=ON -DCMAKE_C_COMPILER=clang -DBE_FUZZ=ON \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
		cmake --build build-fuzz -j "$jobs" --target be-fuzz
		(cd build-fuzz && ctest --output-on-failure -j "$jobs" -L fuzz) || rc=1
	fi
	exit $rc
	;;
*)
	echo "usage: bash tools/quickstart.sh demo|layers|test" >&2
	exit 2
	;;
esac
