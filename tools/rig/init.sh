#!/bin/busybox sh
# The rig guest's init: load modules, mount the host's root read-only (9p) plus the per-run
# folder, set up rxe (guest-net.sh), run the command in a chroot, report its exit code, power off.
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for w in $($B cat /proc/cmdline); do
  case "$w" in
    rig.run=*) RUN=${w#rig.run=} ;;
    rig.guest=*) G=${w#rig.guest=} ;;
    rig.share=*) SHARE=${w#rig.share=} ;;
    rig.keep=*) KEEP=${w#rig.keep=} ;;
  esac
done
off() { $B sync; $B poweroff -f; }
fail() {
  echo "rig: guest $G: $*"
  if [ -d "/host$RUN" ]; then echo 98 > "/host$RUN/exit$G"; $B dmesg | $B tail -40 > "/host$RUN/dmesg$G"; fi
  off
}
for m in $($B cat /modules/order); do $B insmod "/modules/$m.ko" || fail "insmod $m failed"; done
$B mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro hostroot /host || fail "9p mount of the host root failed"
$B mount -t proc proc /host/proc
$B mount -t sysfs sys /host/sys
$B mount -t devtmpfs dev /host/dev
# /tmp and /run become guest-local tmpfs; host paths under them that the command needs (the
# checkout, its working folder) are bound back in over the tmpfs.
for k in $(echo "${KEEP:-}" | $B tr , ' '); do
  case "$k" in /tmp/*|/run/*) $B mkdir -p "/keep$k" && $B mount --bind "/host$k" "/keep$k" ;; esac
done
$B mount -t tmpfs tmp /host/tmp
$B mount -t tmpfs run /host/run
for k in $(echo "${KEEP:-}" | $B tr , ' '); do
  case "$k" in /tmp/*|/run/*) $B mkdir -p "/host$k" && $B mount --bind "/keep$k" "/host$k" ;; esac
done
$B mkdir -p /host/dev/shm /host/dev/pts
$B mount -t tmpfs shm /host/dev/shm
$B mount -t devpts pts /host/dev/pts
$B mkdir -p "/host$RUN"
$B mount -t 9p -o trans=virtio,version=9p2000.L rigrun "/host$RUN" || fail "9p mount of the run folder failed"
if [ -n "${SHARE:-}" ]; then
  $B mkdir -p "/host$SHARE" 2>/dev/null
  $B mount -t 9p -o trans=virtio,version=9p2000.L rigshare "/host$SHARE" || fail "9p mount of $SHARE failed"
fi
export RIG_GUEST=$G RIG_GUEST_ADDR=169.254.78.$((G + 1)) RIG_PEER_ADDR=169.254.78.$((2 - G))
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
$B chroot /host /bin/bash "$RUN/cmd.sh"
rc=$?
[ "$rc" = 0 ] || $B dmesg | $B tail -40 > "/host$RUN/dmesg$G"
echo "$rc" > "/host$RUN/exit$G"
off
