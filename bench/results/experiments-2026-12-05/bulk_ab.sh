#!/bin/bash
# The twenty-fifth session's A/B of the shm bulk areas: per row base (BASE, the binary of dcbf718: 1 MiB rings),
# r4 (NEW with PODNET_SHM_RING=4M PODNET_SHM_BULK=0) and bulk (NEW's defaults), interleaved; each round starts
# with ring_pipe (RP, ring_pipe.cc built) to show the VM's phase. Usage:
# BASE=/tmp/podnet.base NEW=build/tools/podnet/podnet RP=/tmp/rp SPECS="lat:8 write:16K send:16M" R=4 CMA=0 bash bulk_ab.sh
# configs: base = dcbf718 binary (1M rings); r4 = new binary, 4M rings no bulk; bulk = new binary defaults
run() { # cfg op size
  local cfg=$1 op=$2 s=$3 n=$((2000000000/$(numfmt --from=iec $3)+20))
  case $cfg in
   base) Q=${BASE:?the old binary}; E="--env X=1";;
   r4) Q=${NEW:?the new binary}; E="--env PODNET_SHM_RING=4M --env PODNET_SHM_BULK=0";;
   bulk) Q=${NEW:?the new binary}; E="--env X=1";;
  esac
  if [ $op = lat ]; then
   $Q run -n 2 --env PODNET_TRANSPORT=shm --env PODNET_SHM_CMA=${CMA:-0} $E -- $Q bench p2p -o send -m lat -s $s -n 100000 2>&1 | awk '$2+0>0 && $3+0>0 {printf "%s/%s/%s", $5, $6, $7}' | tail -1
  else
   $Q run -n 2 --env PODNET_TRANSPORT=shm --env PODNET_SHM_CMA=${CMA:-0} $E -- $Q bench p2p -o $op -m bw -s $s -n $n 2>&1 | awk '$2+0>0 && $3+0>0{printf "%.1f", $4}'
  fi
}
for r in $(seq 1 ${R:-3}); do
 echo "round $r phase $(${RP:?ring_pipe binary} 1048576 65536 1048576 1000 | awk '{print $(NF-1)}') $(date +%T)"
 for spec in ${SPECS}; do op=${spec%:*}; s=${spec#*:}
  line="  cma=${CMA:-0} $op $s:"
  for c in base r4 bulk; do line="$line $c=$(run $c $op $s)"; done
  echo "$line"
 done
done
