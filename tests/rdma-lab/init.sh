#!/bin/busybox sh
# PID 1 of the lab's initramfs: loads the 9p/overlay modules, mounts the host's root
# read-only with a tmpfs overlay on top, the unpacked kernel's modules and the results
# share, then hands over to the guest script named on the kernel command line.
/bin/busybox mkdir -p /proc /sys /dev
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for ko in $(/bin/busybox cat /modules.list); do /bin/busybox insmod "$ko" 2>/dev/null; done

script=""
for w in $(/bin/busybox cat /proc/cmdline); do
  case "$w" in podnet.script=*) script=${w#podnet.script=} ;; esac
done
o="trans=virtio,version=9p2000.L,msize=262144"
/bin/busybox mount -t 9p -o "$o,ro,cache=loose" hostroot /lower || { echo "init: cannot mount the host root"; /bin/busybox poweroff -f; }
/bin/busybox mount -t tmpfs -o size=512m tmpfs /upper
/bin/busybox mkdir -p /upper/up /upper/work
/bin/busybox mount -t overlay -o lowerdir=/lower,upperdir=/upper/up,workdir=/upper/work overlay /newroot
/bin/busybox mkdir -p /newroot/lib/modules
/bin/busybox mount -t 9p -o "$o,ro" kmods /newroot/lib/modules
/bin/busybox mkdir -p /newroot/lab-out
/bin/busybox mount -t 9p -o "$o" labout /newroot/lab-out
/bin/busybox mount --move /dev /newroot/dev
/bin/busybox umount /proc /sys
exec /bin/busybox switch_root /newroot /bin/bash "$script"
