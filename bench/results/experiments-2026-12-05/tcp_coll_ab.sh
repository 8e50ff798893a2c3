#!/bin/bash
# Three interleaved rounds of one collective at one size over loopback tcp: podnet bound
# (podnet run's default placement), podnet unbound (--bind-to none) and Open MPI (ob1, tcp);
# podnet's two figures are out of place and in place, us per call.
#   COLL=broadcast|allreduce|... tcp_coll_ab.sh RANKS BYTES ITERS
# Expects /tmp/anc/podnet (a copy of the binary) and /tmp/anc/mpi_coll_bench
# (mpicxx -O2 -o /tmp/anc/mpi_coll_bench bench/anchors/mpi_coll_bench.cc).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
N=$1; S=$2; IT=$3; COLL=${COLL:-broadcast}
P=/tmp/anc/podnet
for r in 1 2 3; do
  a=$($P run -n $N --env PODNET_IFNAME=lo --env PODNET_TRANSPORT=tcp -- $P bench coll $COLL -b $S -e $S -n $IT -w 200 -c 0 --json 2>/dev/null | grep -o '"time_us": *[0-9.]*' | head -2 | awk '{printf "%s ", $2}')
  b=$($P run -n $N --bind-to none --env PODNET_IFNAME=lo --env PODNET_TRANSPORT=tcp -- $P bench coll $COLL -b $S -e $S -n $IT -w 200 -c 0 --json 2>/dev/null | grep -o '"time_us": *[0-9.]*' | head -2 | awk '{printf "%s ", $2}')
  m=$(mpirun -n $N --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo /tmp/anc/mpi_coll_bench $COLL $S $S 4 $IT 200 2>/dev/null | grep -o '"time_us": [0-9.]*' | awk '{print $2}')
  echo "round $r: podnet core [$a] none [$b] mpi $m"
done
