# latency slope against added user work per iteration (write ping-pong), interleaved, inside the VM
cd /tmp
N=3000
P=${XWORK_PODNET:-/tmp/wk/build/tools/podnet/podnet}  # a worktree with added_work.patch applied, built there (the guest sees the host root)
pt() { $1 -d rxe0 -x $gid_index -F -s 8 -n $N > /tmp/pt-server.log 2>&1 & sleep 1.5
  echo "$1 $(timeout 60 $1 -d rxe0 -x $gid_index -F -s 8 -n $N $ip 2>&1 | awk '$1==8{print $5}')"; wait; }
pn() { echo "xwork=$1 $(PODNET_XWORK=$1 PODNET_TRANSPORT=verbs timeout 120 $P run -n 2 --bind-to none -- $P bench p2p -o write -m lat -s 8 -n $N -w 100 2>&1 | awk '$1=="[0]" && $2==8 {print $5}')"; }
for round in 1 2 3 4 5; do
  echo "-- round $round"
  pt ib_write_lat
  pn 0; pn 300; pn 1000; pn 3000
done
