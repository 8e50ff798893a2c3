#!/usr/bin/env bash
# Side by side on one RDMA device, same host, same run: perftest (ib_write_bw, ib_read_bw,
# ib_send_lat, ib_write_lat) and `podnet bench p2p` over the verbs transport; prints each
# pair and the podnet/perftest ratio against the targets (bandwidth >= 0.9x, latency <= 1.1x).
# Runs wherever an RDMA device is up; in CI inside the soft-RoCE VM:
#   tests/rdma-lab/run.sh --suite compare        (writes <out>/vm1/compare.txt)
# Under emulation (rxe in qemu TCG) absolute numbers mean nothing; ratios still say whether
# podnet adds overhead over raw verbs on the same device.
#
#   bench/compare_verbs.sh [--podnet PATH] [--device rxe0] [--gid N] [--out FILE] [--iters N]
#                          [--qps "1 4"]   queue pairs per connection: perftest -q Q beside
#                                          podnet with PODNET_VERBS_QPS=Q (bandwidth rows)
#                          [--bind none|core]  placement, the same for both tools: none
#                                          (default): nothing bound (podnet run --bind-to
#                                          none); core: perftest's server and client pinned to
#                                          the two CPUs `podnet run` binds its ranks to
#                          [--repeats N]   run every measurement N times, the tools interleaved
#                                          (perftest, then podnet, per measurement and round);
#                                          the table shows each tool's median and range
#                                          (default 1; under emulation one round swings +-50 %)
# Exit status: 0 when every measurement ran (a report, targets met or not); 1 on an error.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
podnet=${PODNET:-$root/build/tools/podnet/podnet}
device=${PODNET_VERBS_DEVICE:-rxe0}
gid=${PODNET_LAB_GID_INDEX:-1}
out=""
bw_iters=500
lat_iters=1000
qps_list="1"
bind=none
repeats=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --podnet) podnet=$2; shift ;;
    --device) device=$2; shift ;;
    --gid) gid=$2; shift ;;
    --out) out=$2; shift ;;
    --iters) bw_iters=$2; lat_iters=$((2 * $2)); shift ;;
    --qps) qps_list=$2; shift ;;
    --bind) bind=$2; shift ;;
    --repeats) repeats=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_verbs: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ "$bind" == none || "$bind" == core ]] || { echo "compare_verbs: --bind must be none or core, got '$bind'" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "compare_verbs: --repeats must be a positive integer, got '$repeats'" >&2; exit 2; }
# pin INDEX: process INDEX of 2 on the CPU podnet run gives rank INDEX (--bind core), else nothing.
pin() { [[ "$bind" == core ]] && pin_to "$1" 2; return 0; }
for t in ib_write_bw ib_read_bw ib_send_lat ib_write_lat python3; do
  command -v "$t" >/dev/null || { echo "compare_verbs: '$t' missing (Debian: perftest, python3)" >&2; exit 1; }
done
server_ip=$(ip -4 -o addr show | awk '$2 != "lo" {sub(/\/.*/, "", $4); print $4; exit}')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$((18515 + RANDOM % 1000))

# perftest NAME ARGS...: server in the background, client in front; prints the client's output.
perftest() {
  local tool=$1; shift
  echo "compare_verbs: $tool $*" >&2
  port=$((port + 1))
  timeout 100 $(pin 1) "$tool" -d "$device" -x "$gid" -F -p "$port" "$@" >"$work/server.txt" 2>&1 &
  local spid=$!
  sleep 1
  timeout 90 $(pin 0) "$tool" -d "$device" -x "$gid" -F -p "$port" "$@" "$server_ip" >"$work/$tool.txt" 2>&1 || true
  wait "$spid" 2>/dev/null || true
  cat "$work/$tool.txt"
}
# podnet_p2p NAME ARGS...: two ranks over verbs, JSON to $work/NAME.json.
podnet_p2p() {
  local name=$1; shift
  echo "compare_verbs: podnet bench p2p $*" >&2
  PODNET_TRANSPORT=verbs PODNET_VERBS_QPS=${qps:-1} timeout 120 "$podnet" run -n 2 --bind-to "$bind" -- "$podnet" bench p2p --json "$@" \
    >"$work/$name.raw" 2>&1 || true
  sed -n 's/^\[0\] //p' "$work/$name.raw" >"$work/$name.json"
}

for ((rep = 1; rep <= repeats; rep++)); do
  [[ $repeats -gt 1 ]] && echo "compare_verbs: round $rep of $repeats" >&2
  for qps in $qps_list; do
    for size in 65536 1048576; do
      n=$bw_iters; [[ $size -gt 65536 ]] && n=$((bw_iters / 5))
      perftest ib_write_bw -s "$size" -n "$n" -q "$qps" >/dev/null
      mv "$work/ib_write_bw.txt" "$work/pt_write_${size}_q${qps}_r$rep.txt"
      podnet_p2p "pn_write_${size}_q${qps}_r$rep" -o write -m bw -s "$size" -n "$n" -t 128
      perftest ib_read_bw -s "$size" -n "$n" -q "$qps" >/dev/null
      mv "$work/ib_read_bw.txt" "$work/pt_read_${size}_q${qps}_r$rep.txt"
      podnet_p2p "pn_read_${size}_q${qps}_r$rep" -o read -m bw -s "$size" -n "$n" -t 128
    done
  done
  qps=1
  # podnet's default wait (spin, then sleep on the completion channel); PODNET_BUSY_POLL=1
  # polls like perftest but, in a 2-vCPU VM, starves rxe's kernel threads (8.6x worse in one run).
  perftest ib_send_lat -s 8 -n "$lat_iters" >/dev/null
  mv "$work/ib_send_lat.txt" "$work/ib_send_lat_r$rep.txt"
  podnet_p2p "pn_send_lat_r$rep" -o send -m lat -s 8 -n "$lat_iters"
  perftest ib_write_lat -s 8 -n "$lat_iters" >/dev/null
  mv "$work/ib_write_lat.txt" "$work/ib_write_lat_r$rep.txt"
  # The same ping-pong as ib_write_lat (each side watches the last byte of its buffer); then
  # write_notify, which also hands the target a completion (a receive WQE and a CQE at rxe).
  podnet_p2p "pn_write_lat_r$rep" -o write -m lat -s 8 -n "$lat_iters"
  podnet_p2p "pn_wn_lat_r$rep" -o write_notify -m lat -s 8 -n "$lat_iters"
done

python3 - "$work" "$device" "$gid" "$qps_list" "$bind" "$repeats" <<'EOF' | tee "${out:-/dev/null}"
import json, os, re, sys, datetime
work, device, gid, qps_list, bind = sys.argv[1:6]
repeats = int(sys.argv[6])
def median(vals):
    # The middle value; of an even count the upper middle one (a measured value, not a mean).
    v = sorted(vals)
    return v[len(v) // 2] if v else None
def rounds(get, name, *args):
    """Every round's value of one measurement (rounds without a value are left out)."""
    return [x for x in (get(f"{name}_r{k}", *args) for k in range(1, repeats + 1)) if x is not None]
def span(vals):
    return "n/a" if not vals else f"{min(vals):.3f}-{max(vals):.3f} ({len(vals)} rounds)"
def perftest(name, col):
    # NAME.txt, the client's result row: first field the size, then iterations and the figures
    try:
        for line in open(os.path.join(work, name + ".txt")):
            f = line.split()
            if len(f) > col and re.fullmatch(r"\d+", f[0]) and re.fullmatch(r"\d+", f[1]):
                v = float(f[col])
                return v if v == v and v not in (float("inf"), 0.0) else None  # perftest's failed clock: inf
    except OSError:
        pass
    return None
def podnet(name, key):
    try:
        r = json.load(open(os.path.join(work, name + ".json")))["results"][0]
        return r.get(key)
    except (OSError, ValueError, KeyError, IndexError):
        return None
rows = []
for q in qps_list.split():
    for size in (65536, 1048576):
        for op in ("write", "read"):
            # BW average in MB/sec, MB = 2^20 bytes (perftest's format_factor): 4 significant
            # digits where --report_gbits gives 0.29 Gb/s, a 2 % step.
            pts = []
            for k in range(1, repeats + 1):
                name = f"pt_{op}_{size}_q{q}_r{k}"
                pt, rate = perftest(name, 3), perftest(name, 4)     # MsgRate [Mpps]
                if pt is None:
                    continue
                pt = pt * 1048576 * 8 / 1e9
                if rate and rate >= 1e-4 and abs(pt / (rate * size * 8 / 1e3) - 1) > 0.05:
                    sys.exit(f"compare_verbs: perftest's MB/sec and MsgRate disagree for {op} {size}: units changed?")
                pts.append(pt)
            pns = rounds(podnet, f"pn_{op}_{size}_q{q}", "bw_gbits_per_s")
            qp = "" if q == "1" else f", {q} QPs"
            rows.append((f"{op} bandwidth {size} B{qp} [Gb/s]", f"ib_{op}_bw" + ("" if q == "1" else f" -q {q}"),
                         pts, pns, "bw"))
for tool, name, pnname in (("ib_send_lat", "send", "pn_send_lat"), ("ib_write_lat", "write", "pn_write_lat"),
                            ("ib_write_lat", "write_notify", "pn_wn_lat")):
    pts = rounds(perftest, tool, 4)                        # t_typical [usec]
    pns = rounds(podnet, pnname, "t_typical_us")
    rows.append((f"{name} latency 8 B, typical [us]", tool, pts, pns, "lat"))
print(f"# podnet verbs vs perftest, {datetime.datetime.now():%Y-%m-%d %H:%M}, device {device} GID index {gid}")
print(f"# same device, same run, same placement (--bind {bind}); bandwidth target >= 0.90x, latency target <= 1.10x")
if repeats > 1:
    print(f"# {repeats} rounds, the tools interleaved; each figure is the tool's median over the rounds"
          " (ranges below the table); ratio = podnet median / perftest median")
print(f"# {'measurement':42} {'perftest tool':18} {'perftest':>10} {'podnet':>10} {'ratio':>7}  target")
ranges = []
for label, tool, pts, pns, kind in rows:
    pt, pn = median(pts), median(pns)
    if repeats > 1:
        ranges.append(f"#   {label}: perftest {span(pts)}, podnet {span(pns)}")
    ratio = pn / pt if pt and pn else None
    ok = None if ratio is None else (ratio >= 0.9 if kind == "bw" else ratio <= 1.1)
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"
    verdict = "n/a" if ok is None else ("met" if ok else "MISSED")
    print(f"  {label:42} {tool:18} {fmt(pt):>10} {fmt(pn):>10} {fmt(ratio):>7}  {verdict}")
for line in ranges:
    print(line)
EOF
echo "# raw outputs:"
for f in "$work"/pt_*.txt "$work"/ib_*_lat_r*.txt; do echo "## $(basename "$f")"; tail -4 "$f"; done
for f in "$work"/pn_*.raw; do echo "## $(basename "$f")"; grep -v '^\[1\]' "$f" | tail -25; done
