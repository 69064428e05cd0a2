# shellcheck shell=sh
# guest-init.sh - second stage of the Soft-RoCE guest, run by the
# initramfs's busybox sh from the control share (/ctl) that rxe-run fills
# for each run. Not meant to be run on the host.
#
# It brings up lo and the NICs, mounts the host's / (read-only 9p) under a
# tmpfs overlay, adds one rxe device per NIC, waits until each has its
# RoCE v2 GID, then runs /ctl/run.sh in the chroot as root and leaves its
# exit status in /ctl/status. Failures before that go to /ctl/failed.

# shellcheck disable=SC1091
. /ctl/config
R=/newroot

log() {
	echo "be-rxe: $*"
}
fail() {
	log "FAILED: $*"
	echo "$*" >/ctl/failed
	dmesg | tail -n 40
	poweroff -f
	exit 1
}

# nic_ip N: NIC N's address, from /ctl/config (default 10.0.(2+N).15).
nic_ip() {
	eval "a=\${IP$1:-10.0.$((2 + $1)).15}"
	echo "$a"
}

hostname be-rxe
# ---- network
ip link set lo up || fail "lo up"
i=0
while [ "$i" -lt "$NICS" ]; do
	ip link set "eth$i" up || fail "eth$i missing"
	ip addr add "$(nic_ip "$i")/24" dev "eth$i" || fail "eth$i address"
	i=$((i + 1))
done

# ---- root: host / read-only, writes go to tmpfs
o="trans=virtio,version=9p2000.L,msize=262144"
mkdir -p /lower /rw "$R"
mount -t 9p -o "$o,ro,cache=loose" hostroot /lower || fail "mount host root (9p)"
mount -t tmpfs -o mode=755 tmpfs /rw || fail "tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay "$R" ||
	fail "overlay root"
mount -t proc proc "$R/proc" || fail "proc"
mount -t sysfs sysfs "$R/sys" || fail "sysfs"
mount -t devtmpfs devtmpfs "$R/dev" || fail "devtmpfs"
mkdir -p "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$R/dev/pts" || true
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm" || fail "/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$R/run" || fail "/run"
mkdir -p "$R/run/be-rxe" "$R/run/lock"
mount --bind /ctl "$R/run/be-rxe" || fail "bind /ctl"
i=0
while [ "$i" -lt "${RW_DIRS:-0}" ]; do
	d=
	eval "d=\$RW_DIR$i"
	mkdir -p "$R$d"
	mount -t 9p -o "$o" "rw$i" "$R$d" || fail "mount --rw $d"
	i=$((i + 1))
done

# ---- Soft-RoCE
i=0
while [ "$i" -lt "$NICS" ]; do
	chroot "$R" rdma link add "rxe$i" type rxe netdev "eth$i" ||
		fail "rdma link add rxe$i netdev eth$i"
	i=$((i + 1))
done

# the IPv4-mapped GID of NIC i's address, RoCE v2
gid_ready() {
	want=$(nic_ip "$1" | { IFS=. read -r a b c d
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"; })
	p=/sys/class/infiniband/rxe$1/ports/1
	for g in "$p"/gids/*; do
		[ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
		t=$(cat "$p/gid_attrs/types/${g##*/}" 2>/dev/null)
		[ "$t" = "RoCE v2" ] && return 0
	done
	return 1
}
n=0
while :; do
	ok=1
	i=0
	while [ "$i" -lt "$NICS" ]; do
		{ [ -c "$R/dev/infiniband/uverbs$i" ] && gid_ready "$i"; } || ok=0
		i=$((i + 1))
	done
	[ "$ok" = 1 ] && break
	n=$((n + 1))
	[ "$n" -lt 600 ] || fail "rxe devices not ready after 30 s"
	sleep 0.05
done
[ -c "$R/dev/infiniband/rdma_cm" ] || fail "/dev/infiniband/rdma_cm missing"
log "ready after $(cut -d" " -f1 /proc/uptime) s"
: >/ctl/ready

# ---- the command
# shellcheck disable=SC3045 # busybox ash has it
ulimit -l unlimited
chroot "$R" /bin/bash /run/be-rxe/run.sh </dev/null >/ctl/stdout 2>/ctl/stderr
echo "$?" >/ctl/status.tmp
mv /ctl/status.tmp /ctl/status
sync
poweroff -f
