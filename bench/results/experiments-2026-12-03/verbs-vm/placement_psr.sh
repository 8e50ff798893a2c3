# which vCPU each rank runs on, against the write ping-pong latency (slow and fast runs), inside the VM
cd /tmp
N=${N:-100000}
P=$podnet
psrs() { for k in 1 2 3 4 5 6 7 8; do sleep 0.3; ps -eLo pid,tid,psr,pcpu,comm | awk -v pat="$1" '$5 ~ pat && $4 > 5 {printf "%s/%s:%s:%s ", $1, $2, $3, $4}'; echo -n "| "; done; }
for round in 1 2 3 4 5; do
  ib_write_lat -d rxe0 -x $gid_index -F -s 8 -n $N > /tmp/pt-server.log 2>&1 & sleep 1.5
  timeout 60 ib_write_lat -d rxe0 -x $gid_index -F -s 8 -n $N $ip > /tmp/pt.log 2>&1 &
  sleep 0.3; s=$(psrs ib_write); wait
  echo "ib_write_lat $(awk '$1==8{print $5}' /tmp/pt.log) $s"
  PODNET_TRANSPORT=verbs timeout 120 $P run -n 2 --bind-to none -- $P bench p2p -o write -m lat -s 8 -n $N -w 100 > /tmp/pn.log 2>&1 &
  sleep 1.0; s=$(psrs podnet); wait
  echo "podnet $(awk '$1=="[0]" && $2==8 {print $5}' /tmp/pn.log) $s"
done
