#!/bin/sh
# Open MPI's rsh agent for a podnet lab: where mpirun would run `ssh HOST CMD...`, this runs
# CMD inside lab host HOST (`podnet lab exec`), so daemons and ranks use the lab's links.
#
#   mpirun --mca plm_rsh_agent bench/lab_rsh.sh --hostfile HOSTS ...
#
# HOSTS lists lab hosts by their namespace names, podnet-NAME-h<i> (the hostname that
# `podnet lab exec` gives them, so Open MPI's idea of each node's name is consistent).
# Like ssh, CMD's words are joined and run by a shell (Open MPI quotes for that shell).
# Runs podnet from $PODNET_BIN, else from PATH.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # rsh/ssh options Open MPI may add
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "lab_rsh.sh: usage: lab_rsh.sh podnet-NAME-h<i> CMD..." >&2; exit 255; }
host=$1
shift
case "$host" in
  podnet-*-h[0-9]*) ;;
  *) echo "lab_rsh.sh: '$host' is not a lab host (expected podnet-NAME-h<i>)" >&2; exit 255 ;;
esac
rest=${host#podnet-}
lab=${rest%-h*}
index=${rest##*-h}
exec "${PODNET_BIN:-podnet}" lab exec --name "$lab" "h$index" -- sh -c "$*"
