#!/bin/busybox sh
# Abhed microVM initramfs /init: load the virtio modules, mount the read-only
# root with a throwaway writable overlay, mount the workspace (virtiofs) at the
# same absolute path as on the host, then hand PID 1 to the guest agent.
# Kernel command line: abhed.ws=<hex of the workspace path>  abhed.port=<name>
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "abhed-init: $*" >&2; echo o > /proc/sysrq-trigger; sleep 5; }
ws=""; port="abhed.agent"; mmio=""
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    abhed.ws=*) ws=$(echo "${arg#abhed.ws=}" | sed 's/../\\x&/g'); ws=$(printf "$ws") ;;
    abhed.port=*) port="${arg#abhed.port=}" ;;
    # QEMU's microvm machine without ACPI names its virtio-mmio devices here;
    # insmod (unlike modprobe) does not pass command-line module options on.
    virtio_mmio.device=*) mmio="$mmio device=${arg#virtio_mmio.device=}" ;;
  esac
done
while read -r mod; do
  params=""
  [ "$mod" = "virtio_mmio.ko" ] && params="$mmio"
  [ -n "$mod" ] && insmod "/modules/$mod" $params 2>/dev/null
done < /modules/order
mkdir -p /lower /upper /newroot
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
mount -t ext4 -o ro /dev/vda /lower || fail "cannot mount the root image"
mount -t tmpfs -o mode=0755 tmpfs /upper
mkdir -p /upper/up /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/up,workdir=/upper/work /newroot \
  || fail "cannot mount the overlay"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
# The workspace last: it may live under /tmp on the host.
if [ -n "$ws" ]; then
  mkdir -p "/newroot$ws"
  mount -t virtiofs workspace "/newroot$ws" || fail "cannot mount the workspace"
fi
ip link set lo up 2>/dev/null
hostname abhed-vm
exec switch_root /newroot /usr/bin/python3 -I /opt/abhed/agent.py serve "$port"
