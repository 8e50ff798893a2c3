#!/usr/bin/env bash
# Side-by-side on one host: podnet bench p2p over shared memory against ucx_perftest (UCX's
# shared-memory transports) and single-thread memcpy; each measured --repeats times with the
# tools interleaved; prints medians and podnet/anchor ratios against the targets of issue 4.
# Collectives over shm against Open MPI's shared-memory transport: bench/compare_coll.sh
# --transport shm. Run with --help for the options.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/compare_shm.sh [OPTIONS]

Compares, in one invocation, on this host:
  - 8 B latency, median RTT/2:   podnet run -n 2 -- podnet bench p2p -o send -m lat -s 8
      anchor: UCX_TLS=posix,self ucx_perftest -t tag_lat -s 8 (its 50.0%ile column)
      target: podnet / UCX <= 1.0
  - bandwidth 1M 4M 16M 64M:     podnet bench p2p -o write -m bw (and -o send)
      anchors: UCX_TLS=cma,posix,self ucx_perftest -t tag_bw (MB/s), and memcpy_bw
               (bench/anchors/memcpy_bw.cc: one thread copying between two buffers)
      targets: podnet / memcpy >= 0.8; podnet / UCX cma >= 1.0
  - the same for write and send with `--alloc` (buffers from Context::allocate_memory: over
    shm a one-sided write, or the receiver's copy of a large send, is then a memcpy through a
    mapping of the peer's memory, docs/shm.md)
  - information only, where transparent huge pages are not 'never': write bandwidth with
    `podnet bench p2p --hugepages` beside `memcpy_bw --hugepages` (both buffers on 2 MiB pages)
  - information only: send bandwidth without cross-memory attach (PODNET_SHM_CMA=0, the path
    a container without ptrace permission gets: pipelined copies through the ring) beside memcpy
  - information only: send latency (median RTT/2) of mid-size messages, past the eager size
    (64K 256K): podnet bench p2p -o send -m lat beside UCX_TLS=cma,posix,self ucx_perftest
    -t tag_lat (both a single cross-memory copy or, podnet from PODNET_SHM_SPLIT_MIN, two
    halves copied by both sides at once)

Options:
  --repeats N     repeats per measurement, tools interleaved (default 3)
  --sizes "LIST"  bandwidth sizes in bytes or with K/M suffix (default "1M 4M 16M 64M")
  --lat-sizes "LIST"  mid-size latency sizes (default "64K 256K"; "" for none)
  --podnet PATH   podnet binary (default: $PODNET, else build/tools/podnet/podnet, else PATH)
  --no-ucx        skip ucx_perftest (when Debian's ucx-utils is not installed)
  -h, --help      show this help

Needs python3 and g++; ucx_perftest from Debian's ucx-utils. ucx_perftest's server listens
on 127.0.0.1 only (its out-of-band connection); podnet ranks use shared memory.
Placement: `podnet run` binds its two ranks to the first two CPUs this script may use (when
there are two); ucx_perftest's server and client are pinned to the same two (taskset).
Exit status: 0 when everything ran (targets met or not: this is a report); 1 on an error;
2 on bad arguments.
EOF
}

die() { echo "compare_shm: error: $*" >&2; exit 1; }
repeats=3; sizes="1M 4M 16M 64M"; lat_sizes="64K 256K"; podnet_arg="${PODNET:-}"; use_ucx=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --lat-sizes) lat_sizes=$2; shift 2 ;;
    --podnet) podnet_arg=$2; shift 2 ;;
    --no-ucx) use_ucx=0; shift ;;
    *) echo "compare_shm: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bad --repeats $repeats" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/lib.sh"
podnet_arg=$(find_podnet "$root" "$podnet_arg") || exit 1
command -v python3 >/dev/null || die "python3 not found"
((use_ucx)) && { command -v ucx_perftest >/dev/null || die "ucx_perftest not found (apt-get install ucx-utils) or pass --no-ucx"; }

work=$(mktemp -d /tmp/compare_shm.XXXXXX)
bg_pids=()
cleanup() { [[ ${#bg_pids[@]} -gt 0 ]] && stop_pids 20 "${bg_pids[@]}"; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
podnet=$(copy_podnet "$podnet_arg" "$work") || exit 1
g++ -O2 -o "$work/memcpy_bw" "$here/anchors/memcpy_bw.cc" || die "building memcpy_bw failed"

bytes_list=()
for s in $sizes; do bytes_list+=("$(to_bytes "$s")"); done
lat_list=()
for s in $lat_sizes; do lat_list+=("$(to_bytes "$s")"); done
raw="$work/raw.jsonl"
: >"$raw"
record() { echo "{\"metric\":\"$1\",\"tool\":\"$2\",\"value\":$3}" >>"$raw"; }

podnet_p2p() {  # ARGS... ; prints rank 0's JSON result line fields: typical or bw
  # $PODNET_ENV: extra K=V for the ranks (the ring rows' PODNET_SHM_CMA=0).
  local env=(--env PODNET_TRANSPORT=shm)
  [[ -n ${PODNET_ENV:-} ]] && env+=(--env "$PODNET_ENV")
  "$podnet" run -n 2 --timeout 120 "${env[@]}" -- "$podnet" bench p2p --json "$@" >"$work/p.out" 2>"$work/p.err" ||
    { tail -5 "$work/p.out" "$work/p.err" >&2; die "podnet bench p2p $* failed"; }
  python3 - "$work/p.out" "$work/timer" <<'PY'
import json, sys
text = "".join(l[4:] for l in open(sys.argv[1]) if l.startswith("[0] "))
j = json.loads(text)
r = j["results"][0]
if "timer" in j:
    open(sys.argv[2], "w").write(j["timer"])
print(r["t_typical_us"] if "t_typical_us" in r else r["bw_gbytes_per_s"])
PY
}

memcpy_gbps() {  # [--hugepages] ITERS SIZE -> GB/s
  "$work/memcpy_bw" "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["gbytes_per_s"])'
}

port=$((20000 + RANDOM % 10000))
# The same placement for both: `podnet run` binds rank i to the i-th CPU it may use (when
# there are enough), so ucx_perftest's server and client get those two CPUs too.
read -ra pin0 < <(pin_to 0 2)
read -ra pin1 < <(pin_to 1 2)
ucx() {  # TLS TEST SIZE ITERS -> prints the Final line
  local tls=$1 p=$((port++))
  UCX_TLS=$tls "${pin0[@]}" ucx_perftest -p "$p" >"$work/u.srv" 2>&1 &
  bg_pids=($!)
  local ok=0
  for _ in $(seq 50); do
    if UCX_TLS=$tls timeout 60 "${pin1[@]}" ucx_perftest 127.0.0.1 -p "$p" -t "$2" -s "$3" -n "$4" >"$work/u.cli" 2>&1; then ok=1; break; fi
    grep -q "Final" "$work/u.cli" && { ok=1; break; }
    sleep 0.1
  done
  wait "${bg_pids[0]}" 2>/dev/null || true
  bg_pids=()
  ((ok)) || { cat "$work/u.cli" >&2; die "ucx_perftest -t $2 failed"; }
  grep "^Final" "$work/u.cli"
}

# Informational rows with both sides' buffers on transparent huge pages, where the kernel
# offers them: a cross-memory copy pins the peer's pages one by one, and with 4 KiB pages that
# pinning can cost as much as the copy itself (docs/performance.md).
use_huge=0
grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || use_huge=1
echo "# compare_shm: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); podnet $("$podnet" --version 2>/dev/null | head -1);" \
  "$( ((use_ucx)) && ucx_info -v 2>/dev/null | head -1 || echo 'no UCX')"
for ((rep = 1; rep <= repeats; rep++)); do
  echo "# repeat $rep/$repeats" >&2
  v=$(podnet_p2p -o send -m lat -s 8 -n 100000 -w 2000); record lat8 podnet "$v"  # as many as ucx_perftest below
  if ((use_ucx)); then
    # Final: iters  50%ile-latency  avg  overall  (usec)...
    v=$(ucx posix,self tag_lat 8 100000 | awk '{print $3}'); record lat8 ucx "$v"
  fi
  for b in "${lat_list[@]}"; do
    v=$(podnet_p2p -o send -m lat -s "$b" -n 5000 -w 500); record "lat_$b" podnet "$v"
    if ((use_ucx)); then
      v=$(ucx cma,posix,self tag_lat "$b" 5000 | awk '{print $3}'); record "lat_$b" ucx "$v"
    fi
  done
  for b in "${bytes_list[@]}"; do
    it=$(( b >= (16 << 20) ? 100 : 1000 ))
    v=$(podnet_p2p -o write -m bw -s "$b" -n "$it" -w 10); record "write_bw_$b" podnet "$v"
    v=$(podnet_p2p -o send -m bw -s "$b" -n "$it" -w 10); record "send_bw_$b" podnet "$v"
    v=$(podnet_p2p -o write -m bw -s "$b" -n "$it" -w 10 --alloc); record "write_alloc_bw_$b" podnet "$v"
    v=$(podnet_p2p -o send -m bw -s "$b" -n "$it" -w 10 --alloc); record "send_alloc_bw_$b" podnet "$v"
    if ((use_ucx)); then
      # Final: iters 50%ile avg overall bw-average(MB/s) bw-overall(MB/s) ...
      v=$(ucx cma,posix,self tag_bw "$b" "$it" | awk '{printf "%.3f", $7 * 1048576 / 1e9}'); record "bw_$b" ucx "$v"
    fi
    v=$(memcpy_gbps "$it" "$b"); record "bw_$b" memcpy "$v"
    if ((use_huge)); then
      v=$(podnet_p2p -o write -m bw -s "$b" -n "$it" -w 10 --hugepages); record "write_bw_huge_$b" podnet "$v"
      v=$(memcpy_gbps --hugepages "$it" "$b"); record "bw_huge_$b" memcpy "$v"
    fi
    v=$(PODNET_ENV=PODNET_SHM_CMA=0 podnet_p2p -o send -m bw -s "$b" -n "$it" -w 10); record "send_ring_bw_$b" podnet "$v"
  done
done

# How each side timed its latency iterations (perftest-style per-iteration samples).
echo "# latency timers: podnet $(cat "$work/timer" 2>/dev/null || echo unknown) (PODNET_BENCH_TIMER, docs/benchmarks.md); ucx_perftest rdtsc (ucs_get_time)"
LAT_SIZES="${lat_list[*]}" python3 - "$raw" "${bytes_list[@]}" <<'PY'
import os
import json, statistics, sys
raw = [json.loads(l) for l in open(sys.argv[1])]
def med(metric, tool):
    v = [r["value"] for r in raw if r["metric"] == metric and r["tool"] == tool]
    return statistics.median(v) if v else None
def size(b):
    return f"{b >> 20}M" if b % (1 << 20) == 0 else f"{b >> 10}K"
rows = []
p, u = med("lat8", "podnet"), med("lat8", "ucx")
rows.append(("send lat 8B median [us]", "ucx tag_lat posix", p, u, "<=", 1.0))
for b in map(int, os.environ.get("LAT_SIZES", "").split()):
    rows.append((f"send lat {size(b)} (info) [us]", "ucx tag_lat cma", med(f"lat_{b}", "podnet"), med(f"lat_{b}", "ucx"), "info", 0))
for b in map(int, sys.argv[2:]):
    for op, label in (("write", "write"), ("send", "send"), ("write_alloc", "write --alloc"), ("send_alloc", "send --alloc")):
        p = med(f"{op}_bw_{b}", "podnet")
        rows.append((f"{label} BW {size(b)} [GB/s]", "memcpy 1 thread", p, med(f"bw_{b}", "memcpy"), ">=", 0.8))
        rows.append((f"{label} BW {size(b)} [GB/s]", "ucx tag_bw cma", p, med(f"bw_{b}", "ucx"), ">=", 1.0))
    p = med(f"write_bw_huge_{b}", "podnet")
    if p is not None:
        rows.append((f"write BW {size(b)} huge (info)", "memcpy huge pages", p, med(f"bw_huge_{b}", "memcpy"), "info", 0))
    p = med(f"send_ring_bw_{b}", "podnet")
    if p is not None:
        rows.append((f"send BW {size(b)} no CMA (info)", "memcpy 1 thread", p, med(f"bw_{b}", "memcpy"), "info", 0))
print(f"{'metric':<30} {'anchor':<20} {'podnet':>9} {'anchor':>9} {'ratio':>7}  target    result")
passed = failed = 0
for m, a, p, v, cmp, t in rows:
    if p is None or v is None or v == 0:
        print(f"{m:<30} {a:<20} {'-':>9} {'-':>9} {'-':>7}  {cmp} {t:.2f}x  n/a")
        continue
    r = p / v
    if cmp == "info":
        print(f"{m:<30} {a:<20} {p:9.3f} {v:9.3f} {r:6.2f}x  {'-':<8}  -")
        continue
    ok = r <= t if cmp == "<=" else r >= t
    passed += ok; failed += not ok
    print(f"{m:<30} {a:<20} {p:9.3f} {v:9.3f} {r:6.2f}x  {cmp} {t:.2f}x  {'PASS' if ok else 'FAIL'}")
print(f"# {passed} PASS, {failed} FAIL (medians of the repeats; raw values below)")
for r in raw:
    print("# raw", json.dumps(r))
PY
