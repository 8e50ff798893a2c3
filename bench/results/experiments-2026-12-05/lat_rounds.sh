#!/bin/bash
# Twenty-second session: interleaved rounds of the 8 B shm send ping-pong (RTT/2 typical) with
# two podnet binaries (PODNET_START: the session's first commit, 485288c; PODNET_NOW: the last), the
# latter also with PODNET_BENCH_TIMER=clock and =fenced, beside ucx_perftest tag_lat over posix.
# Usage: PODNET_START=... PODNET_NOW=... bash lat_rounds.sh ROUNDS

lat() { local P=$1; shift; env "$@" $P run -n 2 --env PODNET_TRANSPORT=shm -- $P bench p2p -o send -m lat -s 8 -n 100000 -w 2000 --json 2>/dev/null | sed -n 's/^\[0\] //p' | python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; print(r["t_typical_us"])'; }
ucx() { local p=$((23000 + RANDOM % 5000)); UCX_TLS=posix,self taskset -c 0 ucx_perftest -p $p >/dev/null 2>&1 & local s=$!; for i in $(seq 50); do out=$(UCX_TLS=posix,self taskset -c 1 ucx_perftest 127.0.0.1 -p $p -t tag_lat -s 8 -n 100000 2>&1) && break; sleep 0.1; done; wait $s; echo "$out" | awk '/^Final/{print $3}'; }
for r in $(seq ${1:-5}); do echo "round $r: start $(lat "$PODNET_START") now $(lat "$PODNET_NOW") now-clock $(lat "$PODNET_NOW" PODNET_BENCH_TIMER=clock) fenced $(lat "$PODNET_NOW" PODNET_BENCH_TIMER=fenced) ucx $(ucx)"; done
