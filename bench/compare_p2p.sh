#!/usr/bin/env bash
# Side-by-side, on loopback only: podnet bench p2p against iperf3 (1 and N streams) and
# sockperf TCP ping-pong, each measured --repeats times with the tools interleaved; prints
# the median per tool, podnet/anchor ratios against targets, and the raw values.
# See bench/README.md. Run with --help for the options.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/compare_p2p.sh [OPTIONS]

Compares podnet with standard tools on 127.0.0.1, in one invocation:
  - write bandwidth, 1M 4M 16M 64M:  podnet run -n 2 -- podnet bench p2p -o write -m bw -s SIZE
      info:    sizes >= 16M once more with --hugepages (buffers on 2 MiB pages), against iperf3 -P 1
      anchors: iperf3 -P 1 and iperf3 -P N (N = the tcp streams podnet uses, from its info log)
      target:  podnet / anchor >= 1.00
  - 8 B latency (median, RTT/2):      podnet run -n 2 -- podnet bench p2p -o send -m lat -s 8
      anchor:  sockperf ping-pong --tcp (its smallest message, 14 B; RTT/2)
      target:  podnet / anchor <= 1.05
      info:    the plain-socket floor, bench/anchors/tcp_pingpong.c --spin (two processes,
               one connection, spinning non-blocking recv(); sockperf blocks in recv(), and
               on a VM each wake-up can cost tens of microseconds), built here with cc -O2
Every measurement runs REPEATS times; each repeat runs every tool once, in a rotated order,
and the table shows the median of the repeats. Raw values are printed below the table.

Options:
  --repeats N       repeats per measurement (default 3)
  --time SECONDS    duration of each iperf3 / sockperf run (default 5)
  --bind none|core  none (default): no tool is bound (podnet run --bind-to none, the anchors as
                    they start); core: podnet's two ranks and each anchor's server and client
                    on the first two CPUs (podnet run's own default). sockperf blocks in
                    recv, so bound to two CPUs each of its wake-ups crosses CPUs (28 us on
                    the 2-core VM against ~5 unbound): the default keeps the comparison
                    where the anchor is at its best.
  --json FILE       also write the configuration, raw values and table as JSON to FILE
  --podnet PATH     podnet binary (default: $PODNET, else build/tools/podnet/podnet of this
                    checkout, else podnet from PATH); it is copied to a temporary directory
                    first, so a rebuild during the run does not disturb it
  --iperf-len SIZE  iperf3 write size, -l (default 1M: iperf3's largest, the closest match to
                    podnet's >= 1 MiB writes; iperf3's own default is 128K)
  -h, --help        show this help

Environment: PODNET_* settings (e.g. PODNET_TCP_STREAMS) apply to podnet as usual;
PODNET_IFNAME is forced to "lo" and PODNET_TRANSPORT to tcp (the anchors are TCP tools). Needs iperf3, sockperf and python3 (Debian packages
iperf3, sockperf, python3). Everything binds to and connects to 127.0.0.1 only; servers use
free ports below the ephemeral range and are stopped on exit.

Placement: see --bind; both sides always get the same.
Exit status: 0 when every measurement ran (whether or not the targets are met: this is a
report); 1 on an error (missing tool, failed run); 2 on bad arguments.
EOF
}

die() { echo "compare_p2p: error: $*" >&2; exit 1; }
bad_arg() { echo "compare_p2p: $*" >&2; echo "Try 'bench/compare_p2p.sh --help'." >&2; exit 2; }

repeats=3
duration=5
json_out=""
podnet_arg="${PODNET:-}"
iperf_len="1M"
sizes=(1M 4M 16M 64M)
lat_size=8
lat_iters=20000
bind=none
sockperf_size=14            # sockperf's minimum message size (its own header)
bw_bytes=$((2 * 1024 * 1024 * 1024))   # podnet bench p2p caps a size at ~2 GiB of traffic

while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --repeats) [[ $# -ge 2 ]] || bad_arg "--repeats needs a value"; repeats=$2; shift 2 ;;
    --repeats=*) repeats=${1#*=}; shift ;;
    --time) [[ $# -ge 2 ]] || bad_arg "--time needs a value"; duration=$2; shift 2 ;;
    --time=*) duration=${1#*=}; shift ;;
    --json) [[ $# -ge 2 ]] || bad_arg "--json needs a value"; json_out=$2; shift 2 ;;
    --json=*) json_out=${1#*=}; shift ;;
    --podnet) [[ $# -ge 2 ]] || bad_arg "--podnet needs a value"; podnet_arg=$2; shift 2 ;;
    --podnet=*) podnet_arg=${1#*=}; shift ;;
    --iperf-len) [[ $# -ge 2 ]] || bad_arg "--iperf-len needs a value"; iperf_len=$2; shift 2 ;;
    --iperf-len=*) iperf_len=${1#*=}; shift ;;
    --bind) [[ $# -ge 2 ]] || bad_arg "--bind needs a value"; bind=$2; shift 2 ;;
    --bind=*) bind=${1#*=}; shift ;;
    *) bad_arg "unknown argument: $1" ;;
  esac
done
[[ "$bind" == none || "$bind" == core ]] || bad_arg "--bind must be none or core, got '$bind'"
# pin INDEX: the placement of process INDEX of 2 under --bind core (bench/lib.sh), else none.
pin() { [[ "$bind" == core ]] && pin_to "$1" 2; return 0; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || bad_arg "--repeats must be a positive integer, got '$repeats'"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || bad_arg "--time must be a positive integer (seconds), got '$duration'"
[[ "$iperf_len" =~ ^[1-9][0-9]*[KkMm]?$ ]] || bad_arg "--iperf-len must be like 128K or 1M, got '$iperf_len'"

# ---- prerequisites ---------------------------------------------------------------------
need() {  # need CMD DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 ||
    die "'$1' not found; install the Debian package '$2' (sudo apt-get install $2)"
}
need iperf3 iperf3
need sockperf sockperf
need python3 python3   # parses iperf3/podnet JSON and sockperf text, computes medians
need timeout coreutils
need cc gcc            # builds bench/anchors/tcp_pingpong.c

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
if [[ -z "$podnet_arg" ]]; then
  if [[ -x "$repo_root/build/tools/podnet/podnet" ]]; then
    podnet_arg="$repo_root/build/tools/podnet/podnet"
  elif command -v podnet >/dev/null 2>&1; then
    podnet_arg=$(command -v podnet)
  else
    die "podnet binary not found: build it (scripts/setup.sh) or pass --podnet PATH"
  fi
fi
[[ -f "$podnet_arg" && -x "$podnet_arg" ]] || die "--podnet '$podnet_arg' is not an executable file"

# ---- temporary directory, background servers, cleanup ----------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_p2p.XXXXXX")
server_pids=()
fg_pid=""
# shellcheck source=bench/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  [[ -z "$fg_pid" ]] || kill -TERM "$fg_pid" 2>/dev/null || true
  stop_pids 20 "${server_pids[@]+"${server_pids[@]}"}"
  server_pids=()
  if [[ -n "$fg_pid" ]]; then wait "$fg_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Copy the binary: others may rebuild it while this runs.
podnet=$(copy_podnet "$podnet_arg" "$work") || exit 1
cc -O2 -o "$work/tcp_pingpong" "$script_dir/anchors/tcp_pingpong.c" || die "cannot build bench/anchors/tcp_pingpong.c"

helper="$work/helper.py"
cat >"$helper" <<'PYEOF'
import json, os, random, re, socket, statistics, sys, time

def freeport():
    # A free TCP port on 127.0.0.1, below the usual ephemeral range (32768-60999) so that
    # outgoing connections cannot take it between this check and the server's bind.
    for _ in range(200):
        port = random.randrange(20000, 32000)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        print(port)
        return
    sys.exit("no free port found")

def listening(port):
    want = "0100007F:%04X" % port
    for path in ("/proc/net/tcp",):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    p = line.split()
                    if p[1] == want and p[3] == "0A":
                        return True
        except OSError:
            return None
    return False

def waitlisten(port, pid, secs):
    # Waits until something listens on 127.0.0.1:port without connecting to it (a probe
    # connection would count as iperf3 -1's one client).
    deadline = time.time() + float(secs)
    while time.time() < deadline:
        try:
            os.kill(int(pid), 0)
        except OSError:
            sys.exit(1)                    # the server died
        st = listening(int(port))
        if st is None:
            time.sleep(1.0); return        # no /proc: just give it a second
        if st:
            return
        time.sleep(0.05)
    sys.exit(1)

def first_json(text):
    i = text.find("{")
    if i < 0:
        raise ValueError("no JSON object in output")
    obj, _ = json.JSONDecoder().raw_decode(text[i:])
    return obj

def iperf(path):
    d = first_json(open(path).read())
    if "error" in d:
        sys.exit("iperf3: " + d["error"])
    print("%.6f" % (d["end"]["sum_received"]["bits_per_second"] / 1e9))   # Gb/s

def sockperf(path):
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(path).read())
    med = re.search(r"percentile 50\.000\s*=\s*([0-9.]+)", text)
    avg = re.search(r"avg-latency=([0-9.]+)", text)
    if not med or not avg:
        sys.exit("sockperf: no 'percentile 50.000' / 'avg-latency' in its output")
    print(med.group(1), avg.group(1))      # usec, RTT/2

def rank0(path):
    # podnet run prefixes each line with "[rank] "; keep rank 0's (all of it if unprefixed).
    lines = open(path).read().splitlines()
    r0 = [l[4:] for l in lines if l.startswith("[0] ")]
    return first_json("\n".join(r0 if r0 else lines))

def podnet_bw(path):
    r = rank0(path)["results"][0]
    print("%.6f" % r["bw_gbits_per_s"], "%.6f" % r["bw_gbytes_per_s"], r["iterations"])

def podnet_lat(path):
    r = rank0(path)["results"][0]
    print(r["t_typical_us"], r["t_avg_us"], r["iterations"])

def fmt(v, unit):
    return "-" if v is None else ("%.2f %s" % (v, unit))

def report(raw_path, cfg_path, json_out):
    cfg = json.load(open(cfg_path))
    raw = {}                               # key -> list of (repeat, value)
    for line in open(raw_path):
        key, rep, val = line.split()
        raw.setdefault(key, []).append((int(rep), float(val)))
    med = {k: statistics.median(v for _, v in vals) for k, vals in raw.items()}
    n = cfg["tcp_streams"]
    rows = []
    def row(metric, pkey, akey, unit, target, higher_better, anchor_name):
        p, a = med.get(pkey), med.get(akey)
        ratio = p / a if p is not None and a else None
        if target is None or ratio is None:
            verdict = "-"
        else:
            ok = ratio >= target if higher_better else ratio <= target
            verdict = "PASS" if ok else "FAIL"
        tgt = "-" if target is None else ("%s %.2fx" % (">=" if higher_better else "<=", target))
        rows.append(dict(metric=metric, anchor=anchor_name, unit=unit, podnet=p, anchor_value=a,
                         ratio=ratio, target=tgt, verdict=verdict))
    for s in cfg["sizes"]:
        row("write BW %s [Gb/s]" % s, "podnet_write_bw_" + s, "iperf3_P1_gbps", "Gb/s",
            1.0, True, "iperf3 -P 1")
        if n != 1:  # with one stream, -P 1 is already the same-stream-count anchor
            row("write BW %s [Gb/s]" % s, "podnet_write_bw_" + s, "iperf3_PN_gbps", "Gb/s",
                1.0, True, "iperf3 -P %d" % n)
    for s in cfg["sizes"]:  # podnet with its buffers on huge pages: not the target row
        if "podnet_write_bw_huge_" + s in med:
            row("write BW %s --hugepages [Gb/s] (info)" % s, "podnet_write_bw_huge_" + s, "iperf3_P1_gbps",
                "Gb/s", None, True, "iperf3 -P 1")
    row("send lat 8B median [us]", "podnet_lat_median_us", "sockperf_median_us", "us",
        1.05, False, "sockperf p50 (%dB)" % cfg["sockperf_msg_size"])
    row("send lat 8B mean [us] (info)", "podnet_lat_avg_us", "sockperf_avg_us", "us",
        None, False, "sockperf avg (%dB)" % cfg["sockperf_msg_size"])
    row("send lat 8B median [us] (info)", "podnet_lat_median_us", "spinpp_median_us", "us",
        None, False, "socket spin p50 (%dB)" % cfg["lat_size"])

    hdr = ["metric", "anchor", "podnet", "anchor value", "ratio", "target", "result"]
    body = []
    for r in rows:
        body.append([r["metric"], r["anchor"],
                     "-" if r["podnet"] is None else "%.2f" % r["podnet"],
                     "-" if r["anchor_value"] is None else "%.2f" % r["anchor_value"],
                     "-" if r["ratio"] is None else "%.2fx" % r["ratio"],
                     r["target"], r["verdict"]])
    w = [max(len(x[i]) for x in [hdr] + body) for i in range(len(hdr))]
    line = lambda cells: "  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i])
                                   for i, c in enumerate(cells)).rstrip()
    print("Medians of %d repeat(s):" % cfg["repeats"])
    print(line(hdr))
    print(line(["-" * x for x in w]))
    for b in body:
        print(line(b))
    npass = sum(r["verdict"] == "PASS" for r in rows)
    nfail = sum(r["verdict"] == "FAIL" for r in rows)
    print("%d PASS, %d FAIL (targets: bandwidth ratio >= 1.00, latency ratio <= 1.05)"
          % (npass, nfail))
    print()
    print("Raw values (repeat 1..%d%s):" % (cfg["repeats"], "" if n == 1 else "; iperf3_PN = iperf3 -P %d" % n))
    order = (["iperf3_P1_gbps", "iperf3_PN_gbps"] + ["podnet_write_bw_" + s for s in cfg["sizes"]]
             + ["podnet_write_bw_huge_" + s for s in cfg["sizes"]]
             + ["sockperf_median_us", "podnet_lat_median_us", "sockperf_avg_us",
                "podnet_lat_avg_us", "spinpp_median_us", "spinpp_avg_us"])
    keys = [k for k in order if k in raw] + sorted(k for k in raw if k not in order)
    kw = max(len(k) for k in raw)
    for k in keys:
        vals = [v for _, v in sorted(raw[k])]
        print("  %s  %s   median %.3f" % (k.ljust(kw), "  ".join("%9.3f" % v for v in vals),
                                         med[k]))
    if json_out:
        out = dict(config=cfg,
                   raw={k: [v for _, v in sorted(vals)] for k, vals in raw.items()},
                   median=med, rows=rows, passed=npass, failed=nfail)
        with open(json_out, "w") as f:
            json.dump(out, f, indent=2, sort_keys=True)
            f.write("\n")
        print()
        print("JSON written to %s" % json_out)

cmd, args = sys.argv[1], sys.argv[2:]
try:
    {"freeport": freeport, "waitlisten": waitlisten, "iperf": iperf, "sockperf": sockperf,
     "podnet_bw": podnet_bw, "podnet_lat": podnet_lat,
     "report": report}[cmd](*args)
except (ValueError, KeyError, IndexError, TypeError) as e:
    sys.exit("%s: cannot parse: %r" % (cmd, e))
PYEOF
py() { python3 "$helper" "$@"; }

# Runs a measuring client in the background and waits for it: a signal to this script then
# runs the trap at once (bash defers traps while a foreground command runs) and the trap
# stops the client. Returns the client's exit status.
run_client() {
  local rc=0
  "$@" &
  fg_pid=$!
  wait "$fg_pid" || rc=$?
  fg_pid=""
  return "$rc"
}

raw="$work/raw.tsv"
: >"$raw"
record() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$raw"; }

show_log() {  # show_log FILE: last lines of a failed tool's output
  echo "---- last lines of $(basename "$1") ----" >&2
  tail -n 20 "$1" >&2 || true
}

# Starts a server on a free loopback port; sets srv_port and srv_pid.
#   start_server NAME CMD... (the literal word PORT in CMD is replaced by the port)
start_server() {
  local name=$1 port arg log
  shift
  for _ in 1 2 3; do
    port=$(py freeport)
    local argv=()
    for arg in "$@"; do argv+=("${arg//PORT/$port}"); done
    log="$work/${name}_server.log"
    "${argv[@]}" >"$log" 2>&1 &
    srv_pid=$!
    server_pids+=("$srv_pid")
    if py waitlisten "$port" "$srv_pid" 10; then
      srv_port=$port
      return 0
    fi
    stop_server "$srv_pid"
  done
  show_log "$log"
  die "$name server did not start on 127.0.0.1"
}

stop_server() {  # stop_server PID
  local pid=$1 keep=() p
  stop_pids 20 "$pid"
  for p in "${server_pids[@]}"; do [[ "$p" == "$pid" ]] || keep+=("$p"); done
  server_pids=("${keep[@]+"${keep[@]}"}")
}

# ---- configuration ---------------------------------------------------------------------
# The stream count podnet really uses here (PODNET_TCP_STREAMS=0 is auto, chosen from the
# interface: src/bootstrap/netif.h): each context logs it at info level.
"$podnet" run -n 2 --timeout 60 --env PODNET_IFNAME=lo --env PODNET_TRANSPORT=tcp --env PODNET_LOG=info -- \
  "$podnet" bench p2p -o send -m lat -s 8 -n 10 >"$work/streams.log" 2>&1 || {
  show_log "$work/streams.log"; die "a short podnet job on loopback failed (a bad PODNET_* value?)"; }
streams=$(sed -n 's/.*context ready.* (\([0-9]*\) streams).*/\1/p' "$work/streams.log" | head -n 1)
[[ "$streams" =~ ^[1-9][0-9]*$ ]] || { show_log "$work/streams.log"; die "cannot tell how many tcp streams podnet uses"; }

podnet_version=$("$podnet" --version 2>/dev/null | head -n 1 || echo unknown)
iperf_version=$(iperf3 --version 2>/dev/null | head -n 1 || echo unknown)
sockperf_version=$(sockperf --version 2>/dev/null | head -n 1 || echo unknown)

echo "compare_p2p: podnet vs iperf3 / sockperf on 127.0.0.1"
echo "  podnet:   $podnet_arg ($podnet_version), PODNET_TCP_STREAMS=$streams"
if (( streams == 1 )); then pn="-P 1 (podnet uses one stream: the same-stream-count anchor too)"; else pn="-P 1 and -P $streams"; fi
echo "  iperf3:   $iperf_version; -t $duration -l $iperf_len, $pn"
echo "  sockperf: $sockperf_version; ping-pong --tcp -t $duration --msg-size $sockperf_size (its minimum)"
echo "  podnet bw: -o write -m bw -s {${sizes[*]}}, ~2 GiB per size; lat: -o send -m lat -s $lat_size -n $lat_iters"
echo "  placement: --bind $bind"
echo "  TCP congestion control: $(tcp_congestion "iperf3, sockperf")"
echo "  repeats: $repeats (tools interleaved, order rotated per repeat); host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# ---- the measurements ------------------------------------------------------------------
client_timeout=$((duration + 60))

run_iperf() {  # run_iperf REPEAT NSTREAMS KEY
  local rep=$1 np=$2 key=$3 out="$work/iperf_${3}_${1}.json" v
  # --bind core: server and client on the two CPUs `podnet run` gives its ranks (bench/lib.sh).
  # shellcheck disable=SC2046
  start_server "iperf3" $(pin 0) iperf3 -s -1 -B 127.0.0.1 -p PORT
  # shellcheck disable=SC2046
  if ! run_client timeout "$client_timeout" $(pin 1) iperf3 -c 127.0.0.1 -p "$srv_port" -t "$duration" \
       -l "$iperf_len" -P "$np" -J >"$out" 2>"$out.err"; then
    show_log "$out"; show_log "$out.err"; die "iperf3 -P $np failed"
  fi
  stop_server "$srv_pid"
  v=$(py iperf "$out") || { show_log "$out"; die "cannot parse iperf3 output"; }
  record "$key" "$rep" "$v"
  printf '  [%d/%d] iperf3 -P %-2d %10.2f Gb/s\n' "$rep" "$repeats" "$np" "$v"
}

run_sockperf() {  # run_sockperf REPEAT
  local rep=$1 out="$work/sockperf_$1.txt" m a
  # shellcheck disable=SC2046
  start_server "sockperf" $(pin 0) sockperf server --tcp -i 127.0.0.1 -p PORT
  # shellcheck disable=SC2046
  if ! run_client timeout "$client_timeout" $(pin 1) sockperf ping-pong --tcp -i 127.0.0.1 -p "$srv_port" \
       -t "$duration" --msg-size "$sockperf_size" >"$out" 2>&1; then
    show_log "$out"; die "sockperf ping-pong failed"
  fi
  stop_server "$srv_pid"
  read -r m a < <(py sockperf "$out") || { show_log "$out"; die "cannot parse sockperf output"; }
  [[ -n "${a:-}" ]] || { show_log "$out"; die "cannot parse sockperf output"; }
  record sockperf_median_us "$rep" "$m"
  record sockperf_avg_us "$rep" "$a"
  printf '  [%d/%d] sockperf pp    %10.3f us median, %.3f us avg (RTT/2)\n' "$rep" "$repeats" "$m" "$a"
}

run_spinpp() {  # run_spinpp REPEAT: the plain-socket floor (bench/anchors/tcp_pingpong.c)
  local rep=$1 out="$work/spinpp_$1.txt" m a
  if ! run_client timeout "$client_timeout" "$work/tcp_pingpong" --spin -s "$lat_size" -n "$lat_iters" >"$out" 2>&1; then
    show_log "$out"; die "tcp_pingpong failed"
  fi
  read -r m a <"$out" || { show_log "$out"; die "cannot parse tcp_pingpong output"; }
  [[ -n "${a:-}" ]] || { show_log "$out"; die "cannot parse tcp_pingpong output"; }
  record spinpp_median_us "$rep" "$m"
  record spinpp_avg_us "$rep" "$a"
  printf '  [%d/%d] socket spin pp %9.3f us median, %.3f us avg (RTT/2)\n' "$rep" "$repeats" "$m" "$a"
}

podnet_job() {  # podnet_job OUT ARGS...: podnet run -n 2 -- podnet ARGS..., loopback only
  local out=$1
  shift
  if ! run_client "$podnet" run -n 2 --bind-to "$bind" --timeout 300 --env PODNET_IFNAME=lo --env PODNET_TRANSPORT=tcp -- "$podnet" "$@" \
       >"$out" 2>"$out.err"; then
    show_log "$out"; show_log "$out.err"; die "podnet run -n 2 -- podnet $* failed"
  fi
}

# podnet_bw_once OUT [bench p2p ARGS...]: one podnet write-bandwidth job in this shell (its
# trap stops the job on an interrupt); sets gbps, gBps and it.
podnet_bw_once() {
  local out=$1
  shift
  podnet_job "$out" bench p2p "$@" --json
  read -r gbps gBps it < <(py podnet_bw "$out") || { show_log "$out"; die "cannot parse podnet output"; }
  [[ -n "${it:-}" ]] || { show_log "$out"; die "cannot parse podnet output"; }
}

run_podnet_bw() {  # run_podnet_bw REPEAT
  local rep=$1 s b iters gbps gBps it
  for s in "${sizes[@]}"; do
    b=$(to_bytes "$s")
    iters=$((bw_bytes / b))
    ((iters >= 8)) || iters=8
    podnet_bw_once "$work/podnet_bw_${s}_${rep}.txt" -o write -m bw -s "$s" -n "$iters"
    record "podnet_write_bw_$s" "$rep" "$gbps"
    printf '  [%d/%d] podnet write %-4s %7.2f Gb/s (%.2f GB/s, %d iterations)\n' \
      "$rep" "$repeats" "$s" "$gbps" "$gBps" "$it"
    # Large sizes once more with the buffers on huge pages (an info row: TLB misses in the
    # kernel's copies of a 16-64 MiB region, which iperf3's 1 MiB buffer does not have).
    ((b >= 16 << 20)) || continue
    podnet_bw_once "$work/podnet_bw_huge_${s}_${rep}.txt" -o write -m bw -s "$s" -n "$iters" --hugepages
    record "podnet_write_bw_huge_$s" "$rep" "$gbps"
    printf '  [%d/%d] podnet write %-4s %7.2f Gb/s with --hugepages\n' "$rep" "$repeats" "$s" "$gbps"
  done
}

run_podnet_lat() {  # run_podnet_lat REPEAT
  local rep=$1 out="$work/podnet_lat_$1.txt" m a it
  podnet_job "$out" bench p2p -o send -m lat -s "$lat_size" -n "$lat_iters" --json
  read -r m a it < <(py podnet_lat "$out") || { show_log "$out"; die "cannot parse podnet output"; }
  [[ -n "${it:-}" ]] || { show_log "$out"; die "cannot parse podnet output"; }
  record podnet_lat_median_us "$rep" "$m"
  record podnet_lat_avg_us "$rep" "$a"
  printf '  [%d/%d] podnet send %dB  %10.3f us median, %.3f us avg (RTT/2)\n' \
    "$rep" "$repeats" "$lat_size" "$m" "$a"
}

steps=(iperf_p1 iperf_pn sockperf spinpp podnet_bw podnet_lat)
(( streams == 1 )) && steps=(iperf_p1 sockperf spinpp podnet_bw podnet_lat)  # -P 1 serves both targets
echo "Measuring:"
for ((r = 1; r <= repeats; r++)); do
  for ((k = 0; k < ${#steps[@]}; k++)); do
    step=${steps[$(((k + r - 1) % ${#steps[@]}))]}
    case "$step" in
      iperf_p1) run_iperf "$r" 1 iperf3_P1_gbps ;;
      iperf_pn) run_iperf "$r" "$streams" iperf3_PN_gbps ;;
      sockperf) run_sockperf "$r" ;;
      spinpp) run_spinpp "$r" ;;
      podnet_bw) run_podnet_bw "$r" ;;
      podnet_lat) run_podnet_lat "$r" ;;
    esac
  done
done
echo "Load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# ---- report ----------------------------------------------------------------------------
cfg="$work/config.json"
python3 - "$cfg" "$repeats" "$duration" "$streams" "${sizes[*]}" "$iperf_len" "$lat_size" \
  "$lat_iters" "$sockperf_size" "$podnet_arg" "$podnet_version" "$iperf_version" \
  "$sockperf_version" "$(nproc)" <<'PYEOF'
import json, sys
a = sys.argv[1:]
json.dump(dict(repeats=int(a[1]), time_s=int(a[2]), tcp_streams=int(a[3]), sizes=a[4].split(),
               iperf_len=a[5], lat_size=int(a[6]), lat_iters=int(a[7]),
               sockperf_msg_size=int(a[8]), podnet=a[9], podnet_version=a[10],
               iperf3_version=a[11], sockperf_version=a[12], nproc=int(a[13]),
               address="127.0.0.1"),
          open(a[0], "w"))
PYEOF
py report "$raw" "$cfg" "$json_out" || die "cannot write the report"
exit 0
