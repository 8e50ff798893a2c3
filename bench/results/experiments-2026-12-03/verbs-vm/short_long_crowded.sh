# short vs long write ping-pongs and the crowded verdict's changes, inside the VM
cd /tmp
pt() { ib_write_lat -d rxe0 -x $gid_index -F -s 8 -n $1 > /tmp/pt-server.log 2>&1 & sleep 1.5
  echo "ib_write_lat n=$1 $(timeout 60 ib_write_lat -d rxe0 -x $gid_index -F -s 8 -n $1 $ip 2>&1 | awk '$1==8{print $5}')"; wait; }
pn() { PODNET_LOG=debug PODNET_LOG_SUBSYS=net PODNET_TRANSPORT=verbs timeout 120 $podnet run -n 2 --bind-to none -- $podnet bench p2p -o write -m lat -s 8 -n $1 -w 100 > /tmp/pn.log 2>&1
  echo "podnet n=$1 $(awk '$1=="[0]" && $2==8 {print $5}' /tmp/pn.log) crowded-changes: $(grep -c 'spinning waiters now yield' /tmp/pn.log) $(grep 'spinning waiters now yield' /tmp/pn.log | sed 's/.*threads, 2 CPUs: spinning waiters now yield every/y/' | tr '\n' ' ' | cut -c1-200)"; }
for round in 1 2 3 4 5 6; do
  pt 1000; pn 1000; pn 1000; pt 30000; pn 30000
done
grep -m3 "yield" /tmp/pn.log
