#!/usr/bin/env bash
# Installs every Debian package podnet needs (build, tests, benchmarks) and builds it.
# Idempotent: a second run only rebuilds what changed.
#   scripts/setup.sh [--no-install] [--build-dir DIR] [--sanitize address|thread|undefined|address,undefined]
#                    [--compiler gcc|clang]   (default: CMake's choice, Debian's g++ 12; clang: Debian's clang 14)
set -euo pipefail

usage() {
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
}

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build"
install=1
sanitize=""
compiler=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-install) install=0 ;;
    --build-dir) build_dir=$2; shift ;;
    --sanitize) sanitize=$2; shift ;;
    --compiler) compiler=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

# Build: compiler, CMake, Ninja, libraries. Tests: GoogleTest. Benchmarks and comparisons:
# iperf3, sockperf, Open MPI (also the mpirun launcher test), UCX (ucx_perftest, the shm
# anchor), gnuplot (bench coll --plot).
# Tools the tests call: python3, iproute2, procps.
packages=(
  g++ cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  iperf3 sockperf openmpi-bin libopenmpi-dev libgloo-dev ucx-utils gnuplot-nox
  python3 iproute2 procps
  # A second compiler: scripts/test.sh builds its sanitizer stage with clang (and its runtimes).
  clang libclang-rt-dev
  # RDMA: libibverbs/librdmacm (the verbs transport); rdma-core, providers and perftest (rdma
  # link, the rxe userspace driver, ib_write_bw ...); the soft-RoCE lab's qemu, busybox, kmod, cpio.
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
  qemu-system-x86 busybox kmod cpio
)

if [[ $install -eq 1 ]]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# Only an explicit --compiler names one. A build directory configured with another compiler
# starts over: CMake itself would drop its cache, and with it the other -D settings of the
# command (a sanitizer build would come out without sanitizers).
compiler_args=()
case "$compiler" in
  "") ;;
  gcc | clang)
    cxx=$([[ $compiler == gcc ]] && echo g++ || echo clang++)
    if [[ -f $build_dir/CMakeCache.txt ]]; then
      cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
      if [[ $(readlink -f "$(command -v "$cached" || echo "$cached")") != $(readlink -f "$(command -v "$cxx")") ]]; then
        echo "setup: $build_dir was configured with $cached; configuring it again with $cxx"
        rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
      fi
    fi
    # Named only to a fresh cache (another spelling of the cached compiler, g++ for c++,
    # would make CMake drop the cache too).
    [[ -f $build_dir/CMakeCache.txt ]] || compiler_args=(-DCMAKE_CXX_COMPILER="$cxx")
    ;;
  *) echo "setup.sh: --compiler takes gcc or clang, not '$compiler'" >&2; exit 2 ;;
esac
t0=$SECONDS
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODNET_SANITIZE="$sanitize" \
  "${compiler_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/tools/podnet/podnet ($((SECONDS - t0)) s)"
