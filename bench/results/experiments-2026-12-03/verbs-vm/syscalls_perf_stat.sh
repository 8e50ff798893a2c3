# syscalls per latency iteration (perf stat, low overhead), podnet and perftest, inside the VM
cd /tmp
N=3000
EV=-e\ syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex,syscalls:sys_enter_read,context-switches,task-clock
for round in 1 2; do
for op in write write_notify send; do
  PODNET_TRANSPORT=verbs timeout 600 $podnet run -n 2 --bind-to none -- sh -c "perf stat $EV -o /lab-out/ps-$op-$round-\$PODNET_RANK.txt $podnet bench p2p -o $op -m lat -s 8 -n $N -w 100" 2>&1 | tail -1
done
for t in ib_write_lat ib_send_lat; do
  perf stat $EV -o /lab-out/ps-$t-$round-server.txt $t -d rxe0 -x $gid_index -F -s 8 -n $N > /lab-out/$t-server.log 2>&1 &
  sleep 2
  perf stat $EV -o /lab-out/ps-$t-$round-client.txt $t -d rxe0 -x $gid_index -F -s 8 -n $N $ip > /lab-out/$t-client.log 2>&1
  wait
  echo "$t $(tail -2 /lab-out/$t-client.log | head -1)"
done
done
