#!/usr/bin/env bash
# The soft-RoCE lab: boots Debian's kernel under qemu (software emulation, no KVM needed),
# brings up an rdma_rxe device (a real RoCEv2 verbs device in software) and runs podnet's
# verbs tests inside. The guest sees the host's root read-only (9p + a tmpfs overlay), so the
# binaries built here run there unchanged. Nothing is installed on the host besides the
# Debian packages scripts/setup.sh lists; the kernel package is unpacked into a cache folder.
#
#   tests/rdma-lab/run.sh [--build-dir DIR] [--out DIR] [--suite NAMES] [--two-vm]
#     --build-dir DIR  podnet build to test (default: build/)
#     --out DIR        where results land (default: DIR/rdma-lab/out); summary.txt lists them
#     --suite NAMES    comma list of guest suites: smoke,xfer,p2p,coll,compare (default: all
#                      but compare), or none; the guest script is tests/rdma-lab/guest.sh
#     --two-vm         also run the peer-loss test between two VMs joined by a UDP link
#     --exec SCRIPT    also run `bash SCRIPT` in the VM once rxe0 is up, as the suite "exec"
#                      (its output: <out>/vm1/exec.log; $podnet, $build, $gid_index, $ip set);
#                      for experiments, e.g. a knob sweep with --suite none
# Prints "N passed, M failed" and exits 0 only if nothing failed; exits 77 (the skip code
# ctest is told about) when qemu or the kernel package cannot be obtained, saying why.
# PODNET_LAB_CACHE overrides the cache folder (default: <build-dir>/rdma-lab).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir="$root/build"
out=""
suites="smoke,xfer,p2p,coll"
two_vm=0
exec_script=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir=$(cd "$2" && pwd); shift ;;
    --out) out=$2; shift ;;
    --suite) suites=$2; shift ;;
    --two-vm) two_vm=1 ;;
    --exec) exec_script=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rdma-lab: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

skip() { echo "rdma-lab: SKIPPED: $*"; exit 77; }
fail() { echo "rdma-lab: FAILED: $*"; echo "0 passed, 1 failed"; exit 1; }

cache=${PODNET_LAB_CACHE:-$build_dir/rdma-lab}
out=${out:-$cache/out}
mkdir -p "$cache" "$out"
out=$(cd "$out" && pwd)
rm -rf "$out"/*.txt "$out"/*.log "$out"/vm* 2>/dev/null || true

for tool in qemu-system-x86_64 busybox depmod modprobe cpio dpkg-deb apt-get; do
  command -v "$tool" >/dev/null || skip "'$tool' is not installed (scripts/setup.sh installs it)"
done
if [[ $suites != smoke ]]; then
  [[ -x "$build_dir/tools/podnet/podnet" ]] || fail "no podnet binary in $build_dir (build first)"
  grep -q '^#define PODNET_HAVE_VERBS 1' "$build_dir/generated/podnet/features.h" 2>/dev/null ||
    skip "podnet in $build_dir was built without verbs (libibverbs-dev/librdmacm-dev missing at configure time)"
fi

# --- kernel: Debian's current linux-image, unpacked (never installed) ---------------------
kimg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[[ -n "$kimg" ]] || skip "apt-cache cannot resolve linux-image-amd64 (run apt-get update)"
kver=${kimg#linux-image-}
kroot="$cache/kernel-$kver"
if [[ ! -f "$kroot/.ready" ]]; then
  echo "rdma-lab: fetching $kimg"
  rm -rf "$kroot" && mkdir -p "$kroot"
  (cd "$cache" && rm -f "${kimg}"_*.deb && apt-get download "$kimg" >/dev/null 2>"$cache/download.log") ||
    skip "apt-get download $kimg failed: $(tail -1 "$cache/download.log")"
  dpkg-deb -x "$cache/${kimg}"_*.deb "$kroot"
  rm -f "$cache/${kimg}"_*.deb
  depmod -b "$kroot" "$kver"  # the .deb ships no modules.dep
  touch "$kroot/.ready"
fi
kernel="$kroot/boot/vmlinuz-$kver"
[[ -f "$kernel" ]] || fail "no $kernel in the unpacked package"

# --- initramfs: busybox, its libraries, and the modules that reach the host's root ----------
initrd="$cache/initrd-$kver.cpio.gz"
if [[ ! -f "$initrd" || "$0" -nt "$initrd" || "$root/tests/rdma-lab/init.sh" -nt "$initrd" ]]; then
  work=$(mktemp -d "$cache/initramfs.XXXXXX")
  mkdir -p "$work"/{bin,lib/modules,proc,sys,dev,newroot,lower,upper}
  cp /bin/busybox "$work/bin/"
  for lib in $(ldd /bin/busybox | grep -o '/[^ ]*'); do
    mkdir -p "$work$(dirname "$lib")" && cp -L "$lib" "$work$lib"
  done
  mods=""
  for m in virtio_pci 9pnet_virtio 9p overlay; do
    mods+=$(modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}')$'\n'
  done
  : >"$work/modules.list"
  for ko in $(echo "$mods" | awk 'NF && !seen[$0]++'); do
    cp "$ko" "$work/lib/modules/" && echo "/lib/modules/$(basename "$ko")" >>"$work/modules.list"
  done
  cp "$root/tests/rdma-lab/init.sh" "$work/init" && chmod +x "$work/init"
  (cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd"
  rm -rf "$work"
fi

# --- boot ------------------------------------------------------------------------------------
# One VM: the guest script runs the suites against rxe0 (client and server in one VM).
# cmdline: podnet.script is read by init.sh, podnet.* words by the guest scripts.
boot_vm() {  # name ip netdev-args script cmdline-words timeout
  local name=$1 ip=$2 netdev=$3 script=$4 args=$5 limit=$6
  local vmout="$out/$name"
  # Distinct MACs: rxe takes a frame to its own MAC for loopback (two VMs with qemu's default
  # MAC never reach each other over RDMA, though TCP works).
  mkdir -p "$vmout"
  timeout --foreground -k 10 "$limit" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1536 \
    -nodefaults -no-user-config -display none -serial stdio -no-reboot \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet panic=-1 net.ifnames=0 clocksource=tsc tsc=reliable podnet.kver=$kver podnet.script=$script podnet.ip=$ip $args" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$kroot/lib/modules,mount_tag=kmods,security_model=none,readonly=on" \
    -virtfs "local,path=$vmout,mount_tag=labout,security_model=none" \
    $netdev -device "virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:4c:00:$(printf %02x "${ip##*.}")" >"$vmout/console.log" 2>&1 || true
}

[[ -z $exec_script || -f $exec_script ]] || fail "--exec $exec_script: no such file"
[[ $exec_script != *[[:space:]]* ]] || fail "--exec: the path may not contain spaces (it travels on the kernel command line)"
guest_args="podnet.build=$build_dir podnet.suites=$suites${exec_script:+ podnet.exec=$exec_script}"
start=$(date +%s)
echo "rdma-lab: booting $kver under qemu (TCG); suites $suites"
if [[ $suites != none || -n $exec_script ]]; then
  boot_vm vm1 10.77.0.1 "-netdev hubport,id=n0,hubid=0" "$root/tests/rdma-lab/guest.sh" "$guest_args" 900
fi
if [[ $two_vm -eq 1 ]]; then
  echo "rdma-lab: two-VM peer-loss test"
  p1=$((20000 + RANDOM % 20000)); p2=$((p1 + 1))
  boot_vm vm2a 10.77.0.1 "-netdev socket,id=n0,localaddr=127.0.0.1:$p1,udp=127.0.0.1:$p2" \
    "$root/tests/rdma-lab/peer_loss.sh" "podnet.build=$build_dir podnet.role=survivor podnet.peer=10.77.0.2" 300 &
  pa=$!
  boot_vm vm2b 10.77.0.2 "-netdev socket,id=n0,localaddr=127.0.0.1:$p2,udp=127.0.0.1:$p1" \
    "$root/tests/rdma-lab/peer_loss.sh" "podnet.build=$build_dir podnet.role=victim podnet.peer=10.77.0.1" 300 &
  pb=$!
  wait $pa $pb || true
fi

# --- results: each suite wrote "<name> PASS|FAIL|SKIP detail" lines to results.txt ----------
cat "$out"/vm*/results.txt >"$out/summary.txt" 2>/dev/null || true
if [[ ! -s "$out/summary.txt" ]]; then
  echo "rdma-lab: the guest wrote no results; last console lines:"
  for f in "$out"/vm*/console.log; do echo "== $f"; tail -30 "$f"; done
  fail "no results from the VM"
fi
cat "$out/summary.txt"
passed=$(grep -c ' PASS' "$out/summary.txt" || true)
failed=$(grep -c ' FAIL' "$out/summary.txt" || true)
for f in $(grep ' FAIL' "$out/summary.txt" | awk '{print $1}'); do
  log=$(find "$out" -name "$f.log" | head -1)
  [[ -n "$log" ]] && { echo "--- $f.log (tail)"; tail -40 "$log"; }
done
echo "rdma-lab: $(( $(date +%s) - start )) s; results in $out"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
