#!/bin/bash
# Two-VM peer-loss test, run in both VMs of `run.sh --two-vm` (two rxe devices joined by a
# qemu UDP link). The survivor (rank 0, 10.77.0.1) streams RDMA writes to the victim (rank 1,
# 10.77.0.2) with podnet_xfer_rank; once the victim is connected and a few seconds in, its VM
# powers off on the spot (no process exit, no socket close: a lost host). The survivor must
# turn its work completion errors into an error naming rank 1 within the retry budget, not
# hang. Torchrun-style variables give rank, size and the store (rank 0 hosts it).
set -u
source "$(dirname "$0")/rxe_up.sh"
role=$(cmdline role)
peer=$(cmdline peer)
rank_prog=$build/tests/tools/podnet_xfer_rank
[[ -n $gid_index ]] || { result "peer_loss_$role" FAIL "no RoCEv2 IPv4 GID on rxe0"; exit 0; }

rank=0; [[ $role == victim ]] && rank=1
master=10.77.0.1; [[ $role == victim ]] && master=$peer
export RANK=$rank WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=$master MASTER_PORT=29400
export PODNET_TRANSPORT=verbs PODNET_VERBS_TIMEOUT=${PODNET_VERBS_TIMEOUT:-12} PODNET_LOG=info

if [[ $role == victim ]]; then
  "$rank_prog" stream 65536 >"$out/victim.log" 2>&1 &
  for _ in $(seq 1 240); do grep -q ready "$out/victim.log" && break; sleep 0.5; done
  sleep 5
  echo "victim: powering off now" | tee -a "$out/victim.log"
  sync
  echo o >/proc/sysrq-trigger  # gone: no FIN, no QP teardown, nothing
  sleep 30
  exit 0
fi

t0=$SECONDS
timeout -k 5 240 "$rank_prog" stream 65536 >"$out/survivor.log" 2>&1
rc=$?
verdict=$(grep -m1 'rank 0 error after' "$out/survivor.log" || true)
if [[ $rc -eq 0 && -n $verdict && $verdict == *"rank 1"* ]] && grep -q 'first write done' "$out/survivor.log"; then
  result peer_loss PASS "survivor saw it in $((SECONDS - t0)) s total: ${verdict:0:300}"
else
  result peer_loss FAIL "exit $rc after $((SECONDS - t0)) s: ${verdict:-no verdict line (see survivor.log)}"
fi
