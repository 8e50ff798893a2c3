#!/bin/bash
# Data lanes in the lab VM: two ranks over verbs where rank 0 offers 4 queue pairs per peer
# (PODNET_VERBS_QPS=4) and rank 1 only 2, with 64K work requests, so the pair must settle on
# 2 and stripe every transfer from 256K over both. Runs `podnet bench p2p ARGS... --check`
# and fails unless the payloads check out and both ranks logged the negotiated 2 QPs.
#   lanes.sh PODNET ARGS...
set -u
podnet=$1; shift
log=$(mktemp)
PODNET_TRANSPORT=verbs PODNET_VERBS_CHUNK=64K PODNET_LOG=info \
  "$podnet" run -n 2 -- bash -c 'PODNET_VERBS_QPS=$((4 - 2 * PODNET_RANK)) exec "$0" "$@"' \
  "$podnet" bench p2p "$@" --check >"$log" 2>&1
rc=$?
cat "$log"
# Each rank's line for the other (its line for itself shows its own count).
a=$(grep -c '^\[0\] .*verbs: rank 1 .*connected: .*, 2 QPs$' "$log")
b=$(grep -c '^\[1\] .*verbs: rank 0 .*connected: .*, 2 QPs$' "$log")
rm -f "$log"
[[ $rc -eq 0 ]] || { echo "lanes: bench exited $rc"; exit 1; }
[[ $a -eq 1 && $b -eq 1 ]] || { echo "lanes: expected rank 0 and rank 1 to connect to each other with 2 QPs ($a, $b)"; exit 1; }
echo "lanes: both ranks striped over 2 queue pairs; payloads checked"
