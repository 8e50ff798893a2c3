# write/send latency: perftest beside podnet with wait knobs, interleaved rounds, inside the VM
cd /tmp
N=3000
EV=-e\ syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sched_yield,context-switches
pt() { # tool
  $1 -d rxe0 -x $gid_index -F -s 8 -n $N > /tmp/pt-server.log 2>&1 &
  sleep 1.5
  echo "$1 $(timeout 60 $1 -d rxe0 -x $gid_index -F -s 8 -n $N $ip 2>&1 | awk '$1==8{print $5}')"
  wait
}
pn() { # label op env...
  local label=$1 op=$2; shift 2
  local r=$(env PODNET_TRANSPORT=verbs "$@" timeout 120 $podnet run -n 2 --bind-to none -- sh -c "perf stat $EV -x, -o /tmp/ps-\$PODNET_RANK.txt $podnet bench p2p -o $op -m lat -s 8 -n $N -w 100" 2>&1 | awk '$1=="[0]" && $2==8 {print $5}')
  echo "$label $op $r $(cat /tmp/ps-0.txt /tmp/ps-1.txt | awk -F, '/sys_enter|context/{sub("syscalls:sys_enter_","",$3); printf "%s=%s ", $3, $1}')"
}
for round in 1 2 3 4; do
  echo "-- round $round"
  pt ib_write_lat
  pn default write
  pn noyield write PODNET_SPIN_YIELD_EVERY=1048576
  pn busy write PODNET_BUSY_POLL=1
  pt ib_send_lat
  pn default send
  pn noyield send PODNET_SPIN_YIELD_EVERY=1048576
  pn busy send PODNET_BUSY_POLL=1
  pn default write_notify
  pn noyield write_notify PODNET_SPIN_YIELD_EVERY=1048576
done
