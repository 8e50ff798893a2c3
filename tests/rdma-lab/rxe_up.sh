# shellcheck shell=bash
# Sourced by the lab's guest scripts (PID 1 after switch_root): mounts, then eth0 with the
# address from the kernel command line (podnet.ip) and rxe0 on top; sets gid_index to the
# first RoCEv2 IPv4 GID, out=/lab-out, results=$out/results.txt, build (podnet.build), podnet,
# result NAME PASS|FAIL DETAIL, and powers the VM off when the script exits.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
# No tmpfs on /tmp: the root is already writable (the overlay's tmpfs upper layer), and a
# checkout or build under the host's /tmp must stay visible.
mount -t tmpfs tmpfs /run
mkdir -p /dev/shm /dev/pts && mount -t tmpfs tmpfs /dev/shm && mount -t devpts devpts /dev/pts
out=/lab-out
results=$out/results.txt
: >"$results"

cmdline() { local w; for w in $(cat /proc/cmdline); do [[ $w == "podnet.$1="* ]] && echo "${w#podnet.$1=}"; done; }
build=$(cmdline build)
ip=$(cmdline ip)
podnet=$build/tools/podnet/podnet
result() { echo "$1 $2 ${*:3}" | tee -a "$results"; }
finish() { sync; echo o >/proc/sysrq-trigger; sleep 10; }
trap finish EXIT

hostname "lab-$ip"
ulimit -l unlimited
modprobe -a virtio_net rdma_rxe ib_uverbs rdma_ucm 2>"$out/modprobe.log" || true
ip link set lo up
ip link set eth0 up
ip addr add "$ip/24" dev eth0
rdma link add rxe0 type rxe netdev eth0 2>>"$out/modprobe.log"
# The first RoCEv2 IPv4 GID (the table has 1024 entries: shell builtins only, stop early).
gid_index=""
for i in $(seq 0 15); do
  f=/sys/class/infiniband/rxe0/ports/1/gids/$i
  [[ -r $f ]] || break
  read -r g <"$f" 2>/dev/null || continue
  read -r t <"/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i" 2>/dev/null || t=""
  if [[ $g == 0000:0000:0000:0000:0000:ffff:* && $t == "RoCE v2" ]]; then gid_index=$i; break; fi
done
export PODNET_IFNAME=eth0 PODNET_LOG=${PODNET_LOG:-warn}

