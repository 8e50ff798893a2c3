#!/bin/bash
# Runs inside the lab VM (started by init.sh after switch_root; the host's tree is visible
# read-only): brings up rxe0 on eth0 and runs the suites named on the kernel command line.
# Each suite appends "<name> PASS|FAIL|SKIP <detail>" to /lab-out/results.txt and keeps its
# output in /lab-out/<name>.log. Powers the VM off at the end (this is PID 1).
set -u
source "$(dirname "$0")/rxe_up.sh"
suites=$(cmdline suites)
src=$(cd "$(dirname "$0")/../.." && pwd)

# run_suite NAME TIMEOUT CMD...: PASS when CMD exits 0.
run_suite() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then result "$name" PASS "$((SECONDS - t0)) s"
  else result "$name" FAIL "exit $rc after $((SECONDS - t0)) s: $*"; fi
  return $rc
}

has() { [[ ",$suites," == *",$1,"* ]]; }

if [[ -z $gid_index ]]; then
  result rxe_up FAIL "no RoCEv2 IPv4 GID on rxe0 (see modprobe.log)"
  
exec_script=$(cmdline exec)
if [[ -n $exec_script ]]; then
  export podnet build gid_index ip
  run_suite exec 900 bash "$exec_script"
fi
exit 0
fi
result rxe_up PASS "rxe0 on eth0 $ip, RoCEv2 IPv4 GID index $gid_index"

if has smoke; then
  run_suite smoke_devinfo 30 ibv_devinfo -d rxe0
  (ib_write_bw -d rxe0 -x "$gid_index" -s 65536 -n 200 -F >"$out/smoke_perftest_server.log" 2>&1 &)
  # The server may need longer than a second to listen under emulation (seen in CI:
  # "Couldn't connect to ...:18515"): wait for its port before starting the client.
  for _ in $(seq 100); do
    ss -ltn 2>/dev/null | grep -q ':18515 ' && break  # perftest's default port
    sleep 0.1
  done
  run_suite smoke_perftest 60 ib_write_bw -d rxe0 -x "$gid_index" -s 65536 -n 200 -F "$ip"
fi

if has xfer; then
  # The conformance suite, the same binary CI runs on the host, over verbs. Less the cases
  # that never touch the transport under test (the request state machine, the TCP wire
  # format, payload descriptors, the shm rings and shm-only cases): the host runs those, and
  # under TCG they took a third of the suite's time (RequestState's racing callbacks 13 s).
  verbs_cases='-RequestState.*:Wire.*:Payload.*:Shm*'
  run_suite xfer_verbs 600 env PODNET_TRANSPORT=verbs "$build/tests/transport/test_xfer" \
    --gtest_brief=1 --gtest_filter="$verbs_cases"
  passed=$(grep -o '\[  PASSED  \] [0-9]* test' "$out/xfer_verbs.log" | grep -o '[0-9]*' || echo 0)
  failed=$(grep -o '\[  FAILED  \] [0-9]* test' "$out/xfer_verbs.log" | grep -o '[0-9]*' || echo 0)
  echo "xfer_verbs: $passed gtest cases passed, ${failed:-0} failed" | tee -a "$out/counts.txt"
  # Data lanes: 4 queue pairs per peer and 64K work requests: transfers from 256K are striped
  # over all four (write_notify's immediate waits for the lanes), smaller ones go whole to
  # the QPs in turn.
  run_suite xfer_verbs_lanes 600 env PODNET_TRANSPORT=verbs PODNET_VERBS_QPS=4 PODNET_VERBS_CHUNK=64K \
    "$build/tests/transport/test_xfer" --gtest_brief=1 --gtest_filter="$verbs_cases"
  # Nothing in podnet checks one-sided operations here: the NIC must refuse on its own.
  run_suite xfer_verbs_nic_check 180 env PODNET_TRANSPORT=verbs PODNET_VERBS_CHECK=0 bash -c \
    "'$build/tests/transport/test_xfer' --gtest_filter='VerbsNic.*' | tee /dev/stderr | grep -q 'PASSED  \] 1 test'"
fi

if has p2p; then
  for op in write read send write_notify; do
    run_suite "p2p_${op}_check" 180 env PODNET_TRANSPORT=verbs "$podnet" run -n 2 -- \
      "$podnet" bench p2p -o "$op" -s 1M -n 20 --check
  done
  # Memory podnet allocated (a shared memfd mapping) registered with the NIC like any other.
  for op in write read; do
    run_suite "p2p_alloc_${op}_check" 180 env PODNET_TRANSPORT=verbs "$podnet" run -n 2 -- \
      "$podnet" bench p2p -o "$op" -s 1M -n 20 --check --alloc
  done
  # Unequal PODNET_VERBS_QPS (rank 0 offers 4, rank 1 accepts 2): the pair stripes over 2,
  # and write_notify's data is checked the moment its notification arrives (lat mode).
  for mode in write_notify:lat write_notify:bw read:bw send:bw; do
    run_suite "p2p_lanes_${mode/:/_}" 180 "$src/tests/rdma-lab/lanes.sh" "$podnet" \
      -o "${mode%:*}" -m "${mode#*:}" -s 4M -n 10
  done
  run_suite p2p_send_lat 120 env PODNET_TRANSPORT=verbs "$podnet" run -n 2 -- \
    "$podnet" bench p2p -o send -m lat -s 8 -n 200 --check
fi

if has coll; then
  for n in 2 3 4; do
    run_suite "coll_all_${n}ranks" 400 env PODNET_TRANSPORT=verbs "$podnet" run -n "$n" -- \
      "$podnet" bench coll all -b 8 -e 256K -f 8 -w 1 -n 2 -c 1
  done
fi

if has compare; then
  # Both placements, the same for both tools each time: unbound, then pinned to two CPUs.
  # Three interleaved rounds each, medians: one round under emulation swings +-50 %.
  run_suite compare_verbs 900 env PODNET_LAB_GID_INDEX="$gid_index" "$src/bench/compare_verbs.sh" \
    --podnet "$podnet" --out "$out/compare.txt" --qps "1 4" --bind none --repeats 3
  run_suite compare_verbs_pinned 900 env PODNET_LAB_GID_INDEX="$gid_index" "$src/bench/compare_verbs.sh" \
    --podnet "$podnet" --out "$out/compare-pinned.txt" --qps 1 --bind core --repeats 3
fi

exec_script=$(cmdline exec)
if [[ -n $exec_script ]]; then
  export podnet build gid_index ip
  run_suite exec 900 bash "$exec_script"
fi
exit 0
