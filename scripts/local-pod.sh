#!/usr/bin/env bash
# podnet's main job on one machine: a local pod of ranks started by `podnet run`, running the
# benchmarks and printing their tables: point-to-point bandwidth and latency for every
# operation (2 ranks), then every collective (N ranks, default 4). Everything stays on
# loopback.
#   scripts/local-pod.sh [--ranks N] [--quick] [--json]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
podnet="${PODNET:-$root/build/tools/podnet/podnet}"
ranks=4
quick=0
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=$2; shift ;;
    --quick) quick=1 ;;
    --json) json="--json" ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "local-pod.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$podnet" ]] || { echo "local-pod.sh: $podnet not built; run scripts/setup.sh first" >&2; exit 1; }

run() { "$podnet" run -n 2 --timeout 600 -- "$podnet" "$@"; }
run_all() { "$podnet" run -n "$ranks" --timeout 900 -- "$podnet" "$@"; }

if [[ $quick -eq 1 ]]; then sizes=(-s 1M); lat_n=2000; coll_max=1M; else sizes=(-a); lat_n=10000; coll_max=64M; fi
echo "== podnet local pod on $(hostname), $(nproc) cores: p2p between 2 ranks, collectives on $ranks"
for op in write read send write_notify; do
  run bench p2p -o "$op" -m bw "${sizes[@]}" --check $json
  echo
done
for op in send write_notify write read; do
  run bench p2p -o "$op" -m lat -s 8 -n "$lat_n" $json
  echo
done
run_all bench coll all -b 8 -e "$coll_max" -f 4 $json
