# shellcheck shell=bash
# Shared by the bench/ scripts (sourced, not run).

# stop_pids TENTHS PID...: SIGTERM to every PID at once, then waits up to TENTHS/10 s for
# each before SIGKILL, and reaps them.
stop_pids() {
  local tenths=$1 pid i
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for ((i = 0; i < tenths; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# find_podnet ROOT ARG: prints the podnet binary to compare: ARG when set, else ROOT's
# build/tools/podnet/podnet, else podnet from PATH. Fails (status 1) when there is none.
find_podnet() {
  local root=$1 arg=$2
  if [[ -n "$arg" ]]; then echo "$arg"
  elif [[ -x "$root/build/tools/podnet/podnet" ]]; then echo "$root/build/tools/podnet/podnet"
  else command -v podnet || { echo "podnet not found (build it or pass --podnet)" >&2; return 1; }
  fi
}

# copy_podnet SRC WORK: copies the binary into WORK and prints the copy's path (others may
# rebuild SRC while a comparison runs).
copy_podnet() {
  cp "$1" "$2/podnet" && chmod +x "$2/podnet" || { echo "cannot copy $1" >&2; return 1; }
  echo "$2/podnet"
}

# check_coll_anchors USE_MPI USE_GLOO: what building and running the collective anchors
# needs; prints what is missing and its Debian package, status 1 then.
check_coll_anchors() {
  local ok=0
  command -v python3 >/dev/null || { echo "python3 missing (Debian package python3)" >&2; ok=1; }
  if [[ $1 -eq 1 ]]; then
    command -v mpicxx >/dev/null || { echo "mpicxx missing (Debian package libopenmpi-dev), or pass --no-mpi" >&2; ok=1; }
    command -v mpirun >/dev/null || { echo "mpirun missing (Debian package openmpi-bin), or pass --no-mpi" >&2; ok=1; }
  fi
  if [[ $2 -eq 1 && ! -f /usr/include/gloo/allreduce_ring_chunked.h ]]; then
    echo "Gloo headers missing (Debian package libgloo-dev), or pass --no-gloo" >&2; ok=1
  fi
  return $ok
}

# build_coll_anchors DIR USE_MPI USE_GLOO: mpi_coll_bench and gloo_coll_bench (bench/anchors)
# into DIR, and cpu_pingpong (cpu_mode below).
build_coll_anchors() {
  local dir=$1 src
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/anchors
  g++ -O2 -std=c++17 -pthread -o "$dir/cpu_pingpong" "$src/cpu_pingpong.cc" || { echo "building cpu_pingpong failed" >&2; return 1; }
  if [[ $2 -eq 1 ]]; then
    mpicxx -O2 -std=c++17 -o "$dir/mpi_coll_bench" "$src/mpi_coll_bench.cc" || { echo "building mpi_coll_bench failed" >&2; return 1; }
  fi
  if [[ $3 -eq 1 ]]; then
    g++ -O2 -std=c++17 -o "$dir/gloo_coll_bench" "$src/gloo_coll_bench.cc" -lgloo -pthread ||
      { echo "building gloo_coll_bench failed" >&2; return 1; }
  fi
}

# cpu_mode DIR RAW KEY_JSON: appends {"rt_ns": ..., "cpus": [...], "tool": "_cpu", KEY_JSON's
# fields} to RAW: the cache-line round trip between two CPUs right now (DIR/cpu_pingpong, one
# JSON object), which on a shared VM switches between modes that small shared-memory messages
# follow, whatever the tool. KEY_JSON is a non-empty object.
cpu_mode() {
  local line
  line=$("$1/cpu_pingpong" 100000 2>/dev/null) || return 0
  echo "${line%\}}, \"tool\": \"_cpu\", ${3#\{}" >>"$2"
}

# pin_to INDEX COUNT: prints "taskset -c CPU" for process INDEX of COUNT: the placement
# `podnet run` gives rank INDEX (the INDEX-th usable CPU; with fewer usable CPUs C than COUNT,
# CPU INDEX*C/COUNT, consecutive ranks sharing one), so that an anchor runs on the same CPUs
# as podnet. Prints nothing without taskset.
pin_to() {
  local cpu
  cpu=$(python3 -c 'import os, sys; c = sorted(os.sched_getaffinity(0)); i, n = int(sys.argv[1]), int(sys.argv[2]); print(c[i] if n <= len(c) else c[i * len(c) // n])' "$1" "$2")
  [[ -n "$cpu" ]] && command -v taskset >/dev/null && echo "taskset -c $cpu"
  return 0
}

# to_bytes SIZE: 1M -> 1048576 (K/M/G binary suffixes); a bad size is an error (exit 2).
to_bytes() {
  local v="$1" m=1
  case "$v" in
    *[Kk]) m=1024; v=${v%?} ;; *[Mm]) m=$((1024 * 1024)); v=${v%?} ;;
    *[Gg]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
  esac
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "bad size: $1" >&2; exit 2; }
  echo $((v * m))
}

# tcp_congestion ANCHORS: the host's TCP congestion control (which ANCHORS use) and podnet's
# setting (PODNET_TCP_CONGESTION, default auto: reno on loopback connections), for headers.
tcp_congestion() {
  echo "host $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo '?') ($1);" \
    "podnet PODNET_TCP_CONGESTION=${PODNET_TCP_CONGESTION:-auto} (auto: reno on loopback connections)"
}
