#!/usr/bin/env bash
# podnet against Open MPI and Gloo across a virtual pod (`podnet lab`): every tool's ranks run
# in the same lab hosts over the same rate-limited links; busbw as a fraction of the link
# rate, ratios per size, and the p2p all-pairs matrix with one host slowed down.
# See bench/README.md and docs/lab.md. Run with --help for the options. Needs root.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: bench/compare_lab.sh [OPTIONS]          (as root)

For each host count N (--hosts) it creates a lab of N hosts with one rail each, every link
shaped to --rate in both directions (podnet lab up), runs one rank per host:
  podnet:   podnet run --lab L -n N -- podnet bench coll COLL -b MIN -e MAX -f 4 --json -n ITERS -w W -c 0
  Open MPI: podnet lab exec --name L h0 -- mpirun -n N --hostfile (podnet-L-h0 .. h<N-1>)
              --mca plm_rsh_agent bench/lab_rsh.sh --mca pml ob1 --mca btl tcp,self
              --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 mpi_coll_bench ...
  Gloo:     podnet run --lab L -n N --env GLOO_BENCH_IFACE=eth0 -- gloo_coll_bench RANK N ...
            (allreduce: ring-chunked and halving-doubling, the better one counts)
and removes the lab. Then, on the largest N, it slows every link of one host by --slow-factor
and runs `podnet bench p2p --all-pairs`: the matrix must show exactly that host as the outlier.

busbw follows nccl-tests (allreduce: algbw x 2(N-1)/N; allgather, reduce_scatter, alltoall:
algbw x (N-1)/N), computed from each tool's time per call, and is shown as a fraction of the
link rate. ratio = podnet busbw / the anchor's in the same form, the lowest over the anchors
(> 1: podnet faster): podnet in place against Gloo's allreduce (Gloo's exists only in place),
out of place otherwise. Targets (allreduce): ratio >= 1.0 at every size; podnet >= 0.90 of the link rate at
sizes >= 16 MiB. The other collectives are reported without a target.

Options:
  --hosts "LIST"     host counts (default "4 8")
  --rate RATE        link rate, podnet lab syntax (default 1gbit)
  --colls "LIST"     collectives (default "allreduce allgather reduce_scatter alltoall")
  --min SIZE         smallest size (default 1K); --max SIZE: largest (default 256M); x4 steps
  --iters N          timed calls per size below 1 MiB (default 10); warm-up --warmup (2)
  --big-iters N      timed calls per size from 1 MiB (default 3); warm-up --big-warmup (1)
  --quick            --max 16M --iters 5 --big-iters 2 (a few minutes)
  --repeats N        run every sweep N times, the tools interleaved (podnet, Open MPI, Gloo, then
                     again); the table shows each tool's median per size (default 1; a shared
                     machine drifts between phases of a long run: 3 evens that out)
  --slow-host HOST   the host to slow down (default: the middle one, h<N/2>)
  --slow-factor F    how much slower (default 4)
  --no-outlier       skip the all-pairs part; --no-mpi, --no-gloo: skip that anchor
  --name PREFIX      lab name prefix (default cmplab<pid>; labs PREFIX-<N>)
  --table-from FILE  run nothing (no root needed): print the report of an earlier run's --json
                     FILE under today's rules; with --json, write the new rows too
  --podnet-env K=V   pass K=V to podnet's ranks (repeatable; for investigations: the header
                     prints it, and the table is then not podnet's defaults)
  --json FILE        also write every measurement and the table as JSON
  --podnet PATH      podnet binary (default: $PODNET, else build/tools/podnet/podnet, else
                     PATH); copied to a temporary directory first
  -h, --help         this help

Needs root, iproute2, python3, mpicxx/mpirun (libopenmpi-dev, openmpi-bin), g++ and
libgloo-dev. Exit status: 0 when everything ran (targets met or not: this is a report);
1 on an error; 2 on bad arguments.
USAGE
}

die() { echo "compare_lab.sh: $*" >&2; exit 1; }

hosts_list="4 8"; rate=1gbit; colls="allreduce allgather reduce_scatter alltoall"
min_arg=1K; max_arg=256M; iters=10; warmup=2; big_iters=3; big_warmup=1; repeats=1
slow_host=""; slow_factor=4; outlier=1; use_mpi=1; use_gloo=1
name_prefix="cmplab$$"; json_out=""; podnet_arg="${PODNET:-}"; podnet_env=(); table_from=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts_list="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --colls) colls="$2"; shift 2 ;;
    --min) min_arg="$2"; shift 2 ;;
    --max) max_arg="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --big-iters) big_iters="$2"; shift 2 ;;
    --big-warmup) big_warmup="$2"; shift 2 ;;
    --quick) max_arg=16M; iters=5; big_iters=2; shift ;;
    --repeats) repeats="$2"; shift 2 ;;
    --slow-host) slow_host="$2"; shift 2 ;;
    --slow-factor) slow_factor="$2"; shift 2 ;;
    --no-outlier) outlier=0; shift ;;
    --no-mpi) use_mpi=0; shift ;;
    --no-gloo) use_gloo=0; shift ;;
    --name) name_prefix="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --podnet) podnet_arg="$2"; shift 2 ;;
    --podnet-env) podnet_env+=(--env "$2"); shift 2 ;;
    --table-from) table_from="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
min=$(to_bytes "$min_arg"); max=$(to_bytes "$max_arg")
for c in $colls; do
  case "$c" in allreduce|allgather|reduce_scatter|alltoall) ;; *) echo "bad collective $c" >&2; exit 2 ;; esac
done
for n in $hosts_list; do [[ "$n" =~ ^[0-9]+$ && $n -ge 2 ]] || { echo "bad host count $n" >&2; exit 2; }; done
[[ "$slow_factor" =~ ^[1-9][0-9]*$ ]] || { echo "bad --slow-factor $slow_factor" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bad --repeats $repeats" >&2; exit 2; }
[[ -n $table_from || $(id -u) -eq 0 ]] || die "needs root (podnet lab creates network namespaces)"

if [[ -z $table_from ]]; then
  podnet_arg=$(find_podnet "$root" "$podnet_arg") || exit 1
  check_coll_anchors "$use_mpi" "$use_gloo" || exit 1
fi

# ---- temporary directory, labs, background jobs, cleanup ---------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_lab.XXXXXX")
chmod 755 "$work"
bg_pids=()
labs=()
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  stop_pids 80 "${bg_pids[@]+"${bg_pids[@]}"}"
  bg_pids=()
  for l in "${labs[@]+"${labs[@]}"}"; do "$podnet" lab down --name "$l" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z $table_from ]]; then
  podnet=$(copy_podnet "$podnet_arg" "$work") || exit 1
  export PODNET_BIN="$podnet"  # for bench/lab_rsh.sh
  build_coll_anchors "$work" "$use_mpi" "$use_gloo" || exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
raw="$work/raw.jsonl"   # {"tool", "hosts", "coll", "algo", "bytes", "time_us"} per measurement
: >"$raw"
if [[ -n $table_from ]]; then
  # Re-render the report of an earlier run (its --json file): nothing is run, no lab made.
  [[ -r $table_from ]] || die "--table-from: cannot read $table_from"
  read -r rate_bps largest slow_host slow_factor outlier < <(python3 - "$table_from" "$raw" "$work" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    for d in doc["raw"]:
        out.write(json.dumps(d) + "\n")
largest = max([d["hosts"] for d in doc["raw"]] or [0])
pairs = doc.get("pairs")
if pairs:
    json.dump(pairs, open(f"{sys.argv[3]}/pairs.{largest}.json", "w"))
print(int(doc["rate_bps"]), largest, doc.get("slow_host") or f"h{largest // 2}", doc.get("slow_factor", 4),
      1 if pairs else 0)
PY
) || die "cannot read measurements from $table_from"
  [[ -n $rate_bps ]] || die "cannot read measurements from $table_from"
  echo "# compare_lab: table from $table_from; nothing run"
fi

small_max=$((256 * 1024)); big_min=$((1024 * 1024))
ranges=()
[[ $min -le $small_max ]] && ranges+=("$min $((max < small_max ? max : small_max)) $iters $warmup")
if [[ $max -ge $big_min ]]; then
  lo=$min
  while [[ $lo -lt $big_min ]]; do lo=$((lo * 4)); done
  ranges+=("$lo $max $big_iters $big_warmup")
fi

# Runs a command in the background and waits for it, so that the INT/TERM traps (and the
# cleanup) run at once instead of after a long foreground command.
run_bg() {
  local rc=0
  "$@" &
  bg_pids=($!)
  wait "${bg_pids[0]}" || rc=$?
  bg_pids=()
  return "$rc"
}

run_podnet() {  # LAB N COLL MIN MAX ITERS WARM
  local out="$work/podnet.out"
  if ! run_bg timeout 1800 "$podnet" run --lab "$1" -n "$2" --timeout 1700 "${podnet_env[@]+"${podnet_env[@]}"}" -- \
      "$podnet" bench coll "$3" -b "$4" -e "$5" -f 4 --json -n "$6" -w "$7" -c 0 >"$out" 2>"$out.err"; then
    tail -20 "$out" "$out.err" >&2; die "podnet bench coll $3 on $2 hosts failed"
  fi
  python3 - "$out" "$2" >>"$raw" <<'PY'
import json, sys
lines = [l[4:] for l in open(sys.argv[1]) if l.startswith("[0] ")]
rep = json.loads("".join(lines))
for r in rep["results"]:
    print(json.dumps({"tool": "podnet", "hosts": int(sys.argv[2]), "coll": r["collective"],
                      "algo": r.get("algorithm", ""), "bytes": r["size"],
                      "time_us": r["out_of_place"]["time_us"],
                      "time_ip_us": (r.get("in_place") or {}).get("time_us")}))
PY
}

run_mpi() {  # LAB N COLL MIN MAX ITERS WARM
  local out="$work/mpi.out" hostfile="$work/hosts.$1" i
  : >"$hostfile"
  for ((i = 0; i < $2; i++)); do echo "podnet-$1-h$i slots=1" >>"$hostfile"; done
  if ! run_bg timeout 1800 "$podnet" lab exec --name "$1" h0 -- mpirun -n "$2" --hostfile "$hostfile" \
      --mca plm_rsh_agent "$here/lab_rsh.sh" --bind-to none \
      --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      "$work/mpi_coll_bench" "$3" "$4" "$5" 4 "$6" "$7" >"$out" 2>"$out.err"; then
    tail -20 "$out" "$out.err" >&2; die "mpi_coll_bench $3 on $2 hosts failed"
  fi
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(json.dumps({"tool": "mpi", "hosts": d["ranks"], "coll": d["coll"], "algo": "",
                          "bytes": d["bytes"], "time_us": d["time_us"]}))' "$out" >>"$raw"
}

run_gloo() {  # LAB N ALGO MIN MAX ITERS WARM
  local out="$work/gloo.out" store
  store=$(mktemp -d "$work/store.XXXXXX")
  # A rank that dies on exit after rank 0 printed every size is harmless: keep what came.
  run_bg timeout 1800 "$podnet" run --lab "$1" -n "$2" --timeout 1700 --env GLOO_BENCH_IFACE=eth0 -- \
    sh -c 'exec "$0" "$PODNET_RANK" "$PODNET_WORLD_SIZE" "$@"' "$work/gloo_coll_bench" "$store" "$3" "$4" \
    "$5" 4 "$6" "$7" >"$out" 2>"$out.err" || { tail -5 "$out.err" >&2; echo "compare_lab.sh: gloo $3: a rank failed" >&2; }
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("[0] {"):
        d = json.loads(l[4:])
        print(json.dumps({"tool": "gloo", "hosts": d["ranks"], "coll": d["coll"], "algo": d["algo"],
                          "bytes": d["bytes"], "time_us": d["time_us"]}))' "$out" >>"$raw"
  rm -rf "$store"
}

if [[ -z $table_from ]]; then  # the labs and runs (up to the load average at the end); --table-from skips them
largest=0
for n in $hosts_list; do [[ $n -gt $largest ]] && largest=$n; done
[[ -n "$slow_host" ]] || slow_host="h$((largest / 2))"

echo "# compare_lab: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $(uname -r);" \
  "$("$podnet" --version 2>/dev/null | head -1 || echo 'podnet ?');" \
  "$( ((use_mpi)) && mpirun --version 2>/dev/null | head -1 || echo 'no Open MPI')" \
  "(pml ob1, btl tcp,self on eth0); Gloo $( ((use_gloo)) && dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo 'not used')"
echo "# hosts: $hosts_list; links: $rate each way, MTU 1500, one rail (podnet lab up --hosts N --rate $rate);" \
  "one rank per host; sizes $min .. $max B x4; iters $iters (warm-up $warmup) below 1 MiB," \
  "$big_iters (warm-up $big_warmup) from 1 MiB; repeats $repeats (tools interleaved; medians)"
[[ ${#podnet_env[@]} -eq 0 ]] || echo "# podnet ranks also get: ${podnet_env[*]} (not podnet's defaults)"
rate_bps=0
for n in $hosts_list; do
  lab="$name_prefix-$n"
  "$podnet" lab up --name "$lab" --hosts "$n" --rate "$rate" >/dev/null || die "podnet lab up failed"
  labs+=("$lab")
  rate_bps=$("$podnet" lab status --name "$lab" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["rate_bps"])')
  for ((rep = 1; rep <= repeats; rep++)); do
  for c in $colls; do
    for rg in "${ranges[@]}"; do
      read -r lo hi it wu <<<"$rg"
      [[ $repeats -eq 1 ]] || echo "# repeat $rep of $repeats" >&2
      echo "# $n hosts, $c $lo..$hi B: podnet" >&2
      run_podnet "$lab" "$n" "$c" "$lo" "$hi" "$it" "$wu"
      if [[ $use_mpi -eq 1 ]]; then echo "# $n hosts, $c $lo..$hi B: Open MPI" >&2; run_mpi "$lab" "$n" "$c" "$lo" "$hi" "$it" "$wu"; fi
      if [[ $use_gloo -eq 1 ]]; then
        if [[ $c == allreduce ]]; then algos="allreduce_ring_chunked allreduce_halving_doubling"; else algos=$c; fi
        for a in $algos; do
          echo "# $n hosts, $c $lo..$hi B: Gloo $a" >&2
          run_gloo "$lab" "$n" "$a" "$lo" "$hi" "$it" "$wu"
        done
      fi
    done
  done
  done
  if [[ $outlier -eq 1 && $n -eq $largest ]]; then
    slow_bps=$((rate_bps / slow_factor))
    echo "# $n hosts: every link of $slow_host at ${slow_bps} bit/s ($slow_factor x slower); p2p all pairs" >&2
    "$podnet" lab rate --name "$lab" "$slow_host" all "${slow_bps}bit" || die "podnet lab rate failed"
    if ! run_bg timeout 900 "$podnet" run --lab "$lab" -n "$n" --no-prefix --timeout 800 \
        "${podnet_env[@]+"${podnet_env[@]}"}" -- \
        "$podnet" bench p2p --all-pairs -s 1M --json >"$work/pairs.json" 2>"$work/pairs.err"; then
      tail -20 "$work/pairs.err" >&2; die "podnet bench p2p --all-pairs failed"
    fi
    cp "$work/pairs.json" "$work/pairs.$n.json"
    "$podnet" lab rate --name "$lab" "$slow_host" all "$rate" || die "podnet lab rate failed"
  fi
  "$podnet" lab down --name "$lab" >/dev/null || die "podnet lab down failed"
done
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 python3 - "$raw" "$json_out" "$rate_bps" "$work" "$slow_host" "$slow_factor" "$largest" "$outlier" <<'PY'
import glob, json, os, sys
raw = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json_out, rate_bps, work = sys.argv[2], float(sys.argv[3]), sys.argv[4]
slow_host, slow_factor, largest, outlier = sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), sys.argv[8] == "1"

def factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "allreduce" else (n - 1) / n

def link_frac(d):  # busbw as a fraction of the link rate
    if d["time_us"] <= 0: return None
    busbw = d["bytes"] / (d["time_us"] * 1e-6) * factor(d["coll"], d["hosts"])
    return busbw * 8 / rate_bps

t, keys = {}, []
for d in raw:
    if d["bytes"] == 0: continue
    k = (d["hosts"], d["coll"], d["bytes"])
    if k not in t:
        t[k] = {}
        keys.append(k)
    name = d["tool"] if d["tool"] != "gloo" else "gloo_" + d["algo"].replace("allreduce_", "")
    f = link_frac(d)
    if f is not None: t[k].setdefault(name, []).append(f)
    if d["tool"] == "podnet":
        t[k]["_algo"] = d["algo"]
        if d.get("time_ip_us"):
            f = link_frac(dict(d, time_us=d["time_ip_us"]))
            if f is not None: t[k].setdefault("podnet_ip", []).append(f)
def median(xs):  # of the repeats (--repeats); the upper middle of an even count
    xs = sorted(xs)
    return xs[len(xs) // 2]
for v in t.values():
    for name in [n for n in v if not n.startswith("_")]: v[name] = median(v[name])
# Like for like (bench/like_for_like.py, as compare_coll.sh): Gloo's allreduce against podnet's
# in-place busbw, every other anchor against podnet's out-of-place busbw.
from like_for_like import in_place_only
def podnet_for(v, anchor, coll):
    ip = v.get("podnet_ip")
    return ip if in_place_only(anchor, coll) and ip is not None else v.get("podnet")
order = {"allreduce": 0, "allgather": 1, "reduce_scatter": 2, "alltoall": 3}
keys.sort(key=lambda k: (k[0], order.get(k[1], 9), k[2]))
def hsize(b):
    for u, s in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if b >= u and b % u == 0: return f"{b // u}{s}"
    return f"{b}"
f3 = lambda v: "-" if v is None else f"{v:.3f}"
hdr = ("hosts", "coll", "size", "podnet", "pn_ip", "mpi", "gloo", "best_anchor", "ratio", "target", "result",
       "podnet_algo")
fmt = "%-5s %-14s %6s %7s %7s %7s %-19s %-11s %6s %-16s %-6s %s"
lines = [fmt % hdr]
rows, npass, nfail = [], 0, 0
for k in keys:
    v = t[k]
    p = v.get("podnet")
    anchors = {n: x for n, x in v.items() if not n.startswith("_") and n not in ("podnet", "podnet_ip")}
    gl = {n: x for n, x in anchors.items() if n.startswith("gloo")}
    short = lambda n: n.replace("gloo_halving_doubling", "gloo_hd").replace("gloo_ring_chunked", "gloo_rc")
    gs = "/".join(f"{x:.3f}" for n, x in sorted(gl.items())) if gl else "-"
    if len(gl) > 1: gs += " (" + "/".join(short(n)[5:] for n in sorted(gl)) + ")"
    ratios = {}
    for n, x in anchors.items():
        pv = podnet_for(v, n, k[1])
        if x and pv is not None: ratios[n] = pv / x
    best_name = min(ratios, key=ratios.get) if ratios else None
    best = anchors[best_name] if best_name else None
    ratio = ratios[best_name] if best_name else None
    target, res, ok = "-", "", None
    if k[1] == "allreduce":
        ok = ratio is not None and ratio >= 1.0
        target = ">=1.0x"
        if k[2] >= 16 << 20:
            target += " >=0.90"
            ok = ok and p is not None and p >= 0.90
        res = "PASS" if ok else "FAIL"
        npass += ok; nfail += not ok
    lines.append(fmt % (k[0], k[1], hsize(k[2]), f3(p), f3(v.get("podnet_ip")), f3(v.get("mpi")), gs, short(best_name) if best_name else "-",
                        "-" if ratio is None else f"{ratio:.2f}", target, res, v.get("_algo", "")))
    rows.append({"hosts": k[0], "coll": k[1], "bytes": k[2], "podnet_link_frac": p,
                 "podnet_in_place_link_frac": v.get("podnet_ip"), "anchors_link_frac": anchors,
                 "ratios": ratios, "best_anchor": best_name, "ratio": ratio, "pass": ok,
                 "podnet_algorithm": v.get("_algo")})
print("# busbw as a fraction of the link rate (%.0f Mbit/s each way; TCP over 1500-byte frames carries at most"
      " ~0.957 of it); ratio = podnet / anchor in the same form (pn_ip: podnet in place, against Gloo's allreduce),"
      " the lowest over the anchors" % (rate_bps / 1e6))
print("\n".join(lines))
print(f"# allreduce targets: {npass} PASS, {nfail} FAIL")
for c in sorted({k[1] for k in keys}, key=lambda c: order.get(c, 9)):
    rs = sorted(r["ratio"] for r in rows if r["coll"] == c and r["ratio"] is not None)
    if rs: print(f"# {c}: podnet / best anchor median {rs[len(rs) // 2]:.2f}, min {rs[0]:.2f}, max {rs[-1]:.2f}")

pairs = None
if outlier and os.path.exists(f"{work}/pairs.{largest}.json"):
    pairs = json.load(open(f"{work}/pairs.{largest}.json"))
    n = len(pairs["ranks"])
    print(f"\n# p2p all pairs on {largest} hosts, every link of {slow_host} {slow_factor}x slower: write, "
          f"{pairs['bytes']} B x {pairs['iterations']} per ordered pair, Gb/s; row: from, column: to")
    print("%8s" % "from\\to" + "".join("%8d" % j for j in range(n)) + "   host")
    for i in range(n):
        print("%8d" % i + "".join("%8s" % ("-" if i == j else f"{pairs['matrix'][i][j]:.3f}") for j in range(n))
              + "   " + pairs["ranks"][i]["host"])
    print("%8s %8s %8s   %s" % ("rank", "median", "ratio", "host"))
    for r in pairs["ranks"]:
        print("%8d %8.3f %8.2f   %s%s" % (r["rank"], r["median"], r["ratio"], r["host"],
                                          "   <-- outlier" if r["outlier"] else ""))
    want = [int(slow_host.lstrip("h"))]
    got = pairs["outliers"]
    print(f"# outliers: {got} (expected exactly [{want[0]}] = {slow_host}): {'PASS' if got == want else 'FAIL'}")
if json_out:
    with open(json_out, "w") as fh:
        json.dump({"benchmark": "compare_lab", "rate_bps": rate_bps, "slow_host": slow_host,
                   "slow_factor": slow_factor, "raw": raw, "rows": rows, "table": lines,
                   "pass": npass, "fail": nfail, "pairs": pairs}, fh, indent=1)
PY
