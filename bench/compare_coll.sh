#!/usr/bin/env bash
# Side-by-side, on loopback only: podnet bench coll against Open MPI (forced to TCP) and Gloo
# (TCP transport) for allreduce, allgather, broadcast and alltoall with 2 and 4 ranks; prints
# per size the times, the best anchor and best_anchor/podnet ratios against targets.
# See bench/README.md. Run with --help for the options.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: bench/compare_coll.sh [OPTIONS]

Compares podnet's collectives with Open MPI and Gloo on 127.0.0.1, float32, each anchor in
the form it has: in place against Gloo's allreduce and every broadcast (Gloo's and MPI_Bcast
exist only in place), out of place otherwise (podnet bench coll times both):
  podnet:   podnet run -n N -- podnet bench coll COLL -b MIN -e MAX -f 4 --json -n ITERS -w W -c 0
  Open MPI: mpirun -n N --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
            mpi_coll_bench (bench/anchors/mpi_coll_bench.cc, built with mpicxx -O2)
  Gloo:     N processes of gloo_coll_bench (bench/anchors/gloo_coll_bench.cc, -lgloo), TCP on
            127.0.0.1; allreduce runs both AllreduceRingChunked and AllreduceHalvingDoubling
Sizes: 8 B, x4 up to 8 KiB (--small-iters timed calls), 32 KiB up to 512 KiB (--iters), then
1 MiB, x4 up to --max (--big-iters).
ratio = anchor time / podnet time in the same form, the lowest over the anchors (> 1: podnet
faster). Targets, per row:
  tcp (the collectives issue): ratio >= 1.0 at every size; ratio >= 1.3 at >= 1 MiB; 8 B
  allreduce: podnet <= 0.8 x Open MPI.
  shm (the shared-memory issue): ratio >= 1.0 at every size.

Options:
  --ranks "LIST"     rank counts (default "2 4")
  --max SIZE         largest size, K/M/G binary suffixes (default 256M)
  --colls "LIST"     collectives (default "allreduce allgather broadcast alltoall")
  --small-iters N    timed calls per size up to 8 KiB (default 10 x --iters); warm-up:
                     --small-warmup (10 x --warmup). Small calls take microseconds: a few
                     hundred of them are over before the scheduler has switched once (a time
                     slice is milliseconds), so with more ranks than CPUs one preemption more
                     or less swings the figure several times over (OSU's micro-benchmarks
                     also run many more iterations below 8 KiB than above)
  --iters N          timed calls per size from 32 KiB to 512 KiB (default 20); warm-up:
                     --warmup (5)
  --big-iters N      timed calls per size from 1 MiB (default 5); warm-up: --big-warmup (1)
  --repeats N        run the whole sweep N times (tools interleaved); the table shows the
                     median per tool and size (default 1; use 3 on a shared machine)
  --transport T      tcp (default): podnet over tcp against Open MPI forced to TCP and Gloo;
                     shm: podnet over shared memory against Open MPI with its default
                     shared-memory transport (--mca btl vader,self); Gloo is skipped (TCP only)
  --no-gloo          skip Gloo; --no-mpi: skip Open MPI
  --alloc            podnet's buffers from Context::allocate_memory (podnet bench coll --alloc:
                     over shm the peers map them, docs/io-api.md); the anchors keep their usual
                     buffers, which no anchor can map, so the rows are marked "info" and count
                     toward neither PASS nor FAIL
  --json FILE        also write every measurement and the table as JSON to FILE
  --table-from FILE  run nothing: print the table of the measurements in FILE (an earlier
                     run's --json file, or one raw measurement per line); with --json, write
                     the new rows too
  --podnet PATH      podnet binary (default: $PODNET, else build/tools/podnet/podnet, else PATH);
                     copied to a temporary directory first
  -h, --help         show this help

Needs python3, mpicxx/mpirun (Debian libopenmpi-dev, openmpi-bin), g++ and libgloo-dev.
Exit status: 0 when everything ran (targets met or not: this is a report); 1 on an error;
2 on bad arguments.
USAGE
}

die() { echo "compare_coll.sh: $*" >&2; exit 1; }

ranks_list="2 4"; max_arg=256M; colls="allreduce allgather broadcast alltoall"
iters=20; warmup=5; small_iters=""; small_warmup=""; big_iters=5; big_warmup=1; json_out=""; podnet_arg="${PODNET:-}"
use_gloo=1; use_mpi=1; repeats=1; transport=tcp; alloc=0; table_from=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks_list="$2"; shift 2 ;;
    --max) max_arg="$2"; shift 2 ;;
    --colls) colls="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --small-iters) small_iters="$2"; shift 2 ;;
    --small-warmup) small_warmup="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --big-iters) big_iters="$2"; shift 2 ;;
    --big-warmup) big_warmup="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --podnet) podnet_arg="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --transport) transport="$2"; shift 2 ;;
    --no-gloo) use_gloo=0; shift ;;
    --no-mpi) use_mpi=0; shift ;;
    --alloc) alloc=1; shift ;;
    --table-from) table_from="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
max=$(to_bytes "$max_arg")
for c in $colls; do
  case "$c" in allreduce|allgather|broadcast|alltoall) ;; *) echo "bad collective $c" >&2; exit 2 ;; esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bad --repeats $repeats" >&2; exit 2; }
[[ "$iters" =~ ^[1-9][0-9]*$ && "$warmup" =~ ^[0-9]+$ ]] || { echo "bad --iters $iters / --warmup $warmup" >&2; exit 2; }
small_iters=${small_iters:-$((iters * 10))}; small_warmup=${small_warmup:-$((warmup * 10))}
for v in "$small_iters" "$big_iters"; do [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "bad iteration count $v" >&2; exit 2; }; done
for n in $ranks_list; do [[ "$n" =~ ^[0-9]+$ && $n -ge 2 ]] || { echo "bad rank count $n" >&2; exit 2; }; done
case "$transport" in
  tcp) mpi_btl=(--mca btl tcp,self --mca btl_tcp_if_include lo) ;;
  shm) mpi_btl=(--mca btl vader,self); use_gloo=0 ;;
  *) echo "bad --transport $transport (tcp or shm)" >&2; exit 2 ;;
esac

if [[ -z $table_from ]]; then
  podnet_arg=$(find_podnet "$root" "$podnet_arg") || exit 1
  check_coll_anchors "$use_mpi" "$use_gloo" || exit 1
fi

# ---- temporary directory, background ranks, cleanup ------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_coll.XXXXXX")
bg_pids=()
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  # TERM first (timeout passes it on; podnet run and mpirun stop their ranks), KILL after 8 s.
  stop_pids 80 "${bg_pids[@]+"${bg_pids[@]}"}"
  bg_pids=()
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z $table_from ]]; then
  podnet=$(copy_podnet "$podnet_arg" "$work") || exit 1
  build_coll_anchors "$work" "$use_mpi" "$use_gloo" || exit 1
fi
podnet_alloc=()
((alloc)) && podnet_alloc=(--alloc)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
raw="$work/raw.jsonl"   # one line per measurement: {"tool", "ranks", "coll", "algo", "bytes", "time_us"}
: >"$raw"
if [[ -n $table_from ]]; then
  [[ -r $table_from ]] || die "--table-from: cannot read $table_from"
  # Re-render a table from the measurements of an earlier run (its --json file, or a file of
  # raw lines): nothing is run. The transport (which decides the targets) comes from the file.
  read -r transport alloc < <(python3 - "$table_from" "$raw" "$transport" "$alloc" <<'PY'
import json, sys
src, raw, transport, alloc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
text = open(src).read()
try:
    doc = json.loads(text)
except ValueError:
    doc = None
if isinstance(doc, dict):
    lines = doc.get("raw", [])
    transport = doc.get("transport", transport)
    alloc = "1" if doc.get("alloc", alloc == "1") else "0"
else:
    lines = [json.loads(l) for l in text.splitlines() if l.strip()]
with open(raw, "w") as out:
    for d in lines:
        out.write(json.dumps(d) + "\n")
print(transport, alloc)
PY
) || die "cannot read measurements from $table_from"
  [[ -n $transport ]] || die "cannot read measurements from $table_from"
  case "$transport" in tcp|shm) ;; *) die "$table_from: unknown transport $transport" ;; esac
  echo "# compare_coll: table from $table_from (podnet over $transport); nothing run"
fi

# Size ranges: (min max iters warmup); sizes below 1 MiB step x4 from 8, then 1 MiB x4.
tiny_max=$((8 * 1024)); mid_min=$((32 * 1024)); small_max=$((512 * 1024)); big_min=$((1024 * 1024))
ranges=()
ranges+=("8 $((max < tiny_max ? max : tiny_max)) $small_iters $small_warmup")
[[ $max -ge $mid_min ]] && ranges+=("$mid_min $((max < small_max ? max : small_max)) $iters $warmup")
[[ $max -ge $big_min ]] && ranges+=("$big_min $max $big_iters $big_warmup")

# Run a command in the background and wait for it: bash runs the TERM/INT traps (and so the
# cleanup) at once while it waits, instead of after a foreground command ends.
run_bg() {
  local rc=0
  "$@" &
  bg_pids=($!)
  wait "${bg_pids[0]}" || rc=$?
  bg_pids=()
  return "$rc"
}

run_podnet() {  # N COLL MIN MAX ITERS WARM
  local n=$1 c=$2 out="$work/podnet.out"
  if ! run_bg timeout 900 "$podnet" run -n "$n" --timeout 800 --env PODNET_IFNAME=lo \
      --env PODNET_TRANSPORT="$transport" -- \
      "$podnet" bench coll "$c" -b "$3" -e "$4" -f 4 --json -n "$5" -w "$6" -c 0 "${podnet_alloc[@]}" \
      >"$out" 2>"$out.err"; then
    tail -20 "$out" "$out.err" >&2; die "podnet bench coll $c -n $n failed"
  fi
  python3 - "$out" "$n" >>"$raw" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1])]
if any(l.startswith("[0] ") for l in lines):
    lines = [l[4:] for l in lines if l.startswith("[0] ")]
rep = json.loads("".join(lines))
for r in rep["results"]:
    print(json.dumps({"tool": "podnet", "ranks": int(sys.argv[2]), "coll": r["collective"],
                      "algo": r.get("algorithm", ""), "bytes": r["size"],
                      "time_us": r["out_of_place"]["time_us"],
                      "time_ip_us": (r.get("in_place") or {}).get("time_us")}))
PY
}

run_mpi() {  # N COLL MIN MAX ITERS WARM
  local n=$1 out="$work/mpi.out"
  if ! run_bg timeout 900 mpirun -n "$n" --allow-run-as-root --oversubscribe --bind-to none \
      --mca pml ob1 "${mpi_btl[@]}" --mca oob_tcp_if_include lo \
      "$work/mpi_coll_bench" "$2" "$3" "$4" 4 "$5" "$6" >"$out" 2>"$out.err"; then
    tail -20 "$out" "$out.err" >&2; die "mpi_coll_bench $2 -n $n failed"
  fi
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(json.dumps({"tool": "mpi", "ranks": d["ranks"], "coll": d["coll"], "algo": "",
                          "bytes": d["bytes"], "time_us": d["time_us"]}))' "$out" >>"$raw"
}

run_gloo() {  # N ALGO MIN MAX ITERS WARM
  local n=$1 r rc=0 store pid out="$work/gloo.out"
  store=$(mktemp -d "$work/store.XXXXXX")
  bg_pids=()
  for ((r = 0; r < n; r++)); do
    # shellcheck disable=SC2046  # the placement podnet run gives rank r (bench/lib.sh)
    timeout 900 $(pin_to "$r" "$n") "$work/gloo_coll_bench" "$r" "$n" "$store" "$2" "$3" "$4" 4 "$5" "$6" \
      >"$out.$r" 2>"$out.$r.err" &
    bg_pids+=($!)
  done
  for pid in "${bg_pids[@]}"; do wait "$pid" || rc=$?; done
  bg_pids=()
  if [[ $rc -ne 0 ]]; then
    # A rank that dies on exit after rank 0 printed every size is harmless; otherwise fail.
    tail -5 "$out".*.err >&2
    echo "compare_coll.sh: gloo_coll_bench $2 -n $n: a rank exited with $rc" >&2
  fi
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(json.dumps({"tool": "gloo", "ranks": d["ranks"], "coll": d["coll"], "algo": d["algo"],
                          "bytes": d["bytes"], "time_us": d["time_us"]}))' "$out.0" >>"$raw"
  rm -rf "$store"
}

if [[ -z $table_from ]]; then  # the runs (up to the load average at the end); --table-from skips them
echo "# compare_coll: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$("$podnet" --version 2>/dev/null | head -1 || echo 'podnet ?');" \
  "$( ((use_mpi)) && mpirun --version 2>/dev/null | head -1 || echo 'no Open MPI')" \
  "(pml ob1, ${mpi_btl[*]});" "podnet over $transport;" \
  "Gloo $( ((use_gloo)) && dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo 'not used')"
if [[ $transport == tcp ]]; then
  # The anchors use the host's congestion control; podnet sets its own on loopback
  # connections (PODNET_TCP_CONGESTION, default auto: reno); BBR there cost a third or more of
  # the bandwidth (docs/performance.md).
  echo "# TCP congestion control: $(tcp_congestion "Open MPI, Gloo")"
fi
# mpirun --bind-to none: with more ranks than cores mpirun binds none itself.
echo "# placement: podnet run's (rank i on usable CPU i, or i*C/N with C < N CPUs), Gloo pinned alike," \
  "Open MPI unbound (mpirun --bind-to none)"
((alloc)) && echo "# podnet's buffers from Context::allocate_memory (--alloc), the anchors' their usual ones:" \
  "every row is information, not a target"
echo "# ranks: $ranks_list; sizes 8 B .. $max B; iters $small_iters (warm-up $small_warmup) up to 8 KiB," \
  "$iters (warm-up $warmup) from 32 KiB, $big_iters (warm-up $big_warmup) from 1 MiB; repeats $repeats"
# with_cpu_mode NAME CMD...: runs CMD between two readings of the CPUs' mode (bench/lib.sh
# cpu_mode), keyed by tool NAME and the loop's ranks, collective, size range and repeat.
with_cpu_mode() {
  local key
  key=$(printf '{"of": "%s", "ranks": %d, "coll": "%s", "lo": %d, "hi": %d, "rep": %d}' \
    "$1" "$n" "$c" "$lo" "$hi" "$rep_i")
  shift
  cpu_mode "$work" "$raw" "$key"
  "$@"
  cpu_mode "$work" "$raw" "$key"
}
for ((rep_i = 1; rep_i <= repeats; rep_i++)); do
for n in $ranks_list; do
  for c in $colls; do
    for rg in "${ranges[@]}"; do
      read -r lo hi it wu <<<"$rg"
      echo "# [$rep_i/$repeats] n=$n $c $lo..$hi B: podnet" >&2
      with_cpu_mode podnet run_podnet "$n" "$c" "$lo" "$hi" "$it" "$wu"
      if [[ $use_mpi -eq 1 ]]; then
        echo "# [$rep_i/$repeats] n=$n $c $lo..$hi B: Open MPI" >&2
        with_cpu_mode mpi run_mpi "$n" "$c" "$lo" "$hi" "$it" "$wu"
      fi
      if [[ $use_gloo -eq 1 ]]; then
        if [[ $c == allreduce ]]; then algos="allreduce_ring_chunked allreduce_halving_doubling"; else algos=$c; fi
        for a in $algos; do
          echo "# [$rep_i/$repeats] n=$n $c $lo..$hi B: Gloo $a" >&2
          with_cpu_mode "gloo_${a#allreduce_}" run_gloo "$n" "$a" "$lo" "$hi" "$it" "$wu"
        done
      fi
    done
  done
done
done
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 python3 - "$raw" "$json_out" "$max" "$iters" "$big_iters" "$transport" "$small_iters" "$alloc" <<'PY'
import json, sys
import statistics
raw = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json_out = sys.argv[2]
rows, keys = [], []
t, samples = {}, {}
cpu = [d for d in raw if d["tool"] == "_cpu" and d.get("rt_ns") is not None]
def cpu_rt(k, name):
    # Median cache-line round trip around `name`'s runs of the range holding row k, or None.
    v = [d["rt_ns"] for d in cpu if d["of"] == name and d["ranks"] == k[0] and d["coll"] == k[1]
         and d["lo"] <= k[2] <= d["hi"]]
    return statistics.median(v) if v else None
for d in raw:
    if d["tool"].startswith("_"):
        continue
    if d["bytes"] == 0:   # 8 B rounded down to 0 for blocks of 4 ranks: nothing to compare
        continue
    k = (d["ranks"], d["coll"], d["bytes"])
    if k not in t:
        t[k] = {}
        keys.append(k)
    name = d["tool"] if d["tool"] != "gloo" else "gloo_" + d["algo"].replace("allreduce_", "")
    samples.setdefault((k, name), []).append(d["time_us"])
    t[k][name] = statistics.median(samples[(k, name)])
    if d["tool"] == "podnet":
        t[k]["_algo"] = d["algo"]
        if d.get("time_ip_us") is not None:
            samples.setdefault((k, "_podnet_ip"), []).append(d["time_ip_us"])
            t[k]["_podnet_ip"] = statistics.median(samples[(k, "_podnet_ip")])
order = {"allreduce": 0, "allgather": 1, "broadcast": 2, "alltoall": 3}
keys.sort(key=lambda k: (k[0], order.get(k[1], 9), k[2]))
def hsize(b):
    for u, s in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if b >= u and b % u == 0:
            return f"{b // u}{s}"
    return f"{b}"
def f(v):
    return "-" if v is None else f"{v:.1f}"
# Like for like (bench/like_for_like.py): Gloo's allreduce and every broadcast against podnet
# in place, every other anchor against podnet out of place.
from like_for_like import in_place_only
hdr = ("ranks", "coll", "size", "podnet_us", "podnet_ip_us", "mpi_us", "gloo_us", "best_anchor", "ratio", "target",
       "result", "podnet_algo")
lines = ["%-5s %-9s %6s %11s %12s %11s %-27s %-14s %7s %-16s %-6s %s" % hdr]
npass = nfail = ndiff = ndiff_fail = 0
for k in keys:
    v = t[k]
    p = v.get("podnet")
    anchors = {n: x for n, x in v.items() if not n.startswith("_") and n != "podnet"}
    gl = {n: x for n, x in anchors.items() if n.startswith("gloo")}
    if gl:
        gs = "/".join(f"{x:.1f}" for n, x in sorted(gl.items()))
        if len(gl) > 1:
            gs += " (" + "/".join(n[5:].replace("halving_doubling", "hd").replace("ring_chunked", "rc") for n in sorted(gl)) + ")"
    else:
        gs = "-"
    p_ip = v.get("_podnet_ip")
    def podnet_for(name):
        return p_ip if in_place_only(name, k[1]) and p_ip else p
    ratios = {}
    for n, x in anchors.items():
        pv = podnet_for(n)
        if pv: ratios[n] = x / pv
    best_name = min(ratios, key=ratios.get) if ratios else None
    best = anchors[best_name] if best_name else None
    ratio = ratios[best_name] if best_name else None
    tcp = sys.argv[6] == "tcp"
    need = 1.3 if k[2] >= (1 << 20) and tcp else 1.0
    target = f">={need:.1f}x"
    ok = ratio is not None and ratio >= need
    extra = None
    if tcp and k[1] == "allreduce" and k[2] == 8 and "mpi" in v and p:
        extra = p / v["mpi"]
        target += " lat<=0.8"
        ok = ok and extra <= 0.8
    info = sys.argv[8] == "1"
    res = "info" if info else ("PASS" if ok else "FAIL")
    if not info:
        npass += ok; nfail += not ok
    bn = best_name.replace("gloo_halving_doubling", "gloo_hd").replace("gloo_ring_chunked", "gloo_rc") if best_name else "-"
    rstr = "-" if ratio is None else f"{ratio:.2f}"
    if extra is not None:
        res += f" (podnet/mpi {extra:.2f})"
    # The CPUs' mode around podnet's runs and the best anchor's: twice apart or more, the two
    # ran in different modes of the host and the ratio says more about the host than the tools.
    cp, ca = cpu_rt(k, "podnet"), (cpu_rt(k, best_name) if best_name else None)
    modes_differ = cp is not None and ca is not None and max(cp, ca) >= 2 * min(cp, ca)
    if cp is not None or ca is not None:
        res += " cpu %s/%s ns" % tuple("-" if x is None else f"{x:.0f}" for x in (cp, ca))
    if modes_differ:
        res += " MODES DIFFER"
        ndiff += 1
        ndiff_fail += (not info) and (not ok)
    lines.append("%-5d %-9s %6s %11s %12s %11s %-27s %-14s %7s %-16s %-6s %s" % (
        k[0], k[1], hsize(k[2]), f(p), f(p_ip), f(v.get("mpi")), gs, bn, rstr, target, res, v.get("_algo", "")))
    rows.append({"ranks": k[0], "coll": k[1], "bytes": k[2], "podnet_us": p, "podnet_in_place_us": p_ip,
                 "podnet_compared_us": podnet_for(best_name) if best_name else None, "ratios": ratios,
                 "anchors_us": anchors, "best_anchor": best_name, "best_anchor_us": best,
                 "ratio": ratio, "target_ratio": need, "podnet_over_mpi_8B": extra, "pass": ok,
                 "podnet_algorithm": v.get("_algo"), "cpu_rt_ns_podnet": cp, "cpu_rt_ns_best_anchor": ca,
                 "cpu_modes_differ": modes_differ})
print("\n".join(lines))
print(f"# {npass} PASS, {nfail} FAIL (ratio = anchor time / podnet time in the anchor's form, the lowest over"
      " the anchors; >1: podnet faster; in place against Gloo's allreduce and every broadcast)"
      + (" -- --alloc: information only" if sys.argv[8] == "1" else ""))
if cpu:
    print(f"# cpu A/B ns: median cache-line round trip between two CPUs (bench/anchors/cpu_pingpong.cc) before"
          f" and after podnet's runs (A) and the best anchor's (B) of the row's size range; MODES DIFFER: one is"
          f" twice the other or more, the host's mode changed between the tools' runs: {ndiff} rows ({ndiff_fail} FAIL)")
if json_out:
    with open(json_out, "w") as fh:
        json.dump({"benchmark": "compare_coll", "transport": sys.argv[6], "alloc": sys.argv[8] == "1",
                   "max_bytes": int(sys.argv[3]),
                   "small_iters": int(sys.argv[7]), "iters": int(sys.argv[4]), "big_iters": int(sys.argv[5]),
                   "raw": raw, "rows": rows, "table": lines, "pass": npass, "fail": nfail,
                   "rows_cpu_modes_differ": ndiff, "fail_cpu_modes_differ": ndiff_fail}, fh, indent=1)
PY
