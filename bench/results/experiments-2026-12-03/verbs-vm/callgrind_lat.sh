# callgrind of the verbs latency ping-pongs, both ranks, inside the VM; files to /lab-out
cd /tmp
for op in ${OPS:-write write_notify send}; do
  PODNET_TRANSPORT=verbs timeout 600 $podnet run -n 2 --bind-to none -- sh -c "valgrind --tool=callgrind --toggle-collect=*run_p2p_pair* --callgrind-out-file=/lab-out/cg-$op-\$PODNET_RANK.out $podnet bench p2p -o $op -m lat -s 8 -n 2000 -w 100" 2>&1 | grep -v "^\[.\] ==" | tail -4
done
