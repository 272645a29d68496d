#!/usr/bin/env bash
# A kernel filesystem on a LUN: a block device (logical block size = the LUN's sector size)
# -> mkfs.ext4 -> mount -> write a file tree -> unmount -> fsck.ext4 -fn clean -> vsld
# stopped (every LUN detached) and started again (attached from its checkpoint) -> mount
# again -> every file's checksum compared. The block device comes, by DEVICE:
#   fuse  (default) the NBD export -> nbdfuse -> losetup: needs /dev/fuse and loop devices,
#         runs on any kernel;
#   ublk  vsld's own /dev/ublkbN (kernel ublk_drv);
#   nbd   the kernel's NBD client, nbd-client over the Unix socket -> /dev/nbd0.
# ublk and nbd need those kernel drivers: the VM tests run them (tests/vm/run-in-vm).
# Needs root; skips (exit 77) with the reason when the machine lacks what DEVICE needs.
#   nbd_fs_test.sh VSLD VSLCTL SECTOR_BYTES [DEVICE]
VSLD="$1"
VSLCTL="$2"
SECTOR="$3"
DEVICE="${4:-fuse}"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/nbd_lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (block devices, mount)"
for t in mkfs.ext4 fsck.ext4 mount umount; do
  command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup installs it)"
done
case "$DEVICE" in
  fuse)
    [ -c /dev/fuse ] || skip "/dev/fuse is absent"
    for t in nbdfuse losetup fusermount3; do
      command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup installs it)"
    done
    losetup --find >/dev/null 2>&1 || skip "no free loop device"
    VSLD_ARGS=(--ublk off)
    ;;
  ublk)
    [ -c /dev/ublk-control ] || skip "this kernel has no ublk (tests/vm/run-in-vm boots one that has)"
    command -v jq >/dev/null || skip "jq is not installed"
    ;;
  nbd)
    [ -b /dev/nbd0 ] || skip "this kernel has no nbd module (tests/vm/run-in-vm boots one that has)"
    command -v nbd-client >/dev/null || skip "nbd-client is not installed"
    VSLD_ARGS=(--ublk off)
    ;;
  *) echo "DEVICE: fuse, ublk or nbd" >&2; exit 2 ;;
esac

LOOP=""
mkdir -p "$T/fuse" "$T/mnt"
# The hooks run on any exit, in order: unmount, detach the loop, end nbdfuse.
CLEANUP_HOOKS+=('mountpoint -q "$T/mnt" && umount "$T/mnt"')
CLEANUP_HOOKS+=('[ -n "$LOOP" ] && losetup -d "$LOOP"')
CLEANUP_HOOKS+=('[ "$DEVICE" = nbd ] && nbd-client -d /dev/nbd0 >/dev/null 2>&1')
CLEANUP_HOOKS+=('mountpoint -q "$T/fuse" && fusermount3 -u "$T/fuse"')

attach_block() {
  case "$DEVICE" in
    fuse)
      nbdfuse "$T/fuse" "$(uri lun1)" &
      for _ in $(seq 1 100); do
        [ -e "$T/fuse/nbd" ] && break
        sleep 0.05
      done
      [ -e "$T/fuse/nbd" ] || fail "nbdfuse did not expose the export"
      LOOP=$(losetup --find --show --sector-size "$SECTOR" --direct-io=on "$T/fuse/nbd") || fail "losetup"
      ;;
    ublk)
      BLK=$(ctl --json status | jq -r '.front_ends.ublk.devices[] | select(.export == "lun1") | .device')
      [ -b "$BLK" ] || fail "no ublk device for lun1: $(ctl --json status | jq -c .front_ends.ublk)"
      ;;
    nbd)
      nbd-client -N lun1 -u "$NSOCK" /dev/nbd0 -b "$SECTOR" >/dev/null || fail "nbd-client"
      BLK=/dev/nbd0
      ;;
  esac
  [ "$DEVICE" = fuse ] && BLK="$LOOP"
  [ "$(blockdev --getss "$BLK")" -eq "$SECTOR" ] || fail "$BLK logical block size is not $SECTOR"
}
detach_block() {
  case "$DEVICE" in
    fuse)
      losetup -d "$LOOP"
      LOOP=""
      fusermount3 -u "$T/fuse"
      sleep 0.2
      ;;
    nbd) nbd-client -d /dev/nbd0 >/dev/null ;;
    ublk) ;;
  esac
}

make_card "$SECTOR"
if [ "$DEVICE" != ublk ] && [ -c /dev/ublk-control ]; then
  ls /sys/block | grep -q '^ublkb' && fail "--ublk off, yet ublk devices exist: $(ls /sys/block | grep ublkb)"
fi
attach_block
echo "== mkfs.ext4 on $BLK ($SECTOR-byte sectors, $(blockdev --getsize64 "$BLK") bytes)"
mkfs.ext4 -q -F "$BLK" || fail "mkfs.ext4"
mount "$BLK" "$T/mnt" || fail "mount"
# A file tree: sources, many small files, a few large random ones, a hard and a soft link.
cp -r "$HERE/../../vsl" "$T/mnt/src"
mkdir -p "$T/mnt/small"
for i in $(seq 1 400); do head -c $((RANDOM % 9000 + 1)) /dev/urandom >"$T/mnt/small/f$i"; done
for i in 1 2 3; do head -c $((i * 7 << 20)) /dev/urandom >"$T/mnt/big$i"; done
ln "$T/mnt/big1" "$T/mnt/hard"
ln -s big2 "$T/mnt/soft"
rm "$T/mnt/small/f7" "$T/mnt/small/f99"
(cd "$T/mnt" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
nfiles=$(wc -l <"$T/sums")
umount "$T/mnt"
fsck.ext4 -fn "$BLK" >"$T/fsck1" 2>&1 || { cat "$T/fsck1"; fail "fsck after the first mount"; }
detach_block

echo "== vsld stopped (LUNs detached), started again (attached)"
stop
start
grep -q "lun1: online (from checkpoint" "$T/vsld.log" || fail "lun1 did not attach from its checkpoint"
ctl detach --lun 1 >/dev/null || fail "vslctl detach"
ctl attach --lun 1 >/dev/null || fail "vslctl attach"

attach_block
fsck.ext4 -fn "$BLK" >"$T/fsck2" 2>&1 || { cat "$T/fsck2"; fail "fsck after re-attach"; }
mount "$BLK" "$T/mnt" || fail "mount after re-attach"
(cd "$T/mnt" && sha256sum --quiet -c "$T/sums") || fail "checksums differ after re-attach"
[ "$(readlink "$T/mnt/soft")" = big2 ] || fail "symlink lost"
[ "$(stat -c %h "$T/mnt/hard")" -eq 2 ] || fail "hard link lost"
umount "$T/mnt"
detach_block

echo "== fio crc32c verify on another LUN in blocks from one sector up"
(cd "$T" && exec fio --name=v --ioengine=nbd --uri="$(uri lun2)" --rw=randwrite --bsrange="$SECTOR"-64k --size=32m --iodepth=16 \
  --verify=crc32c --verify_fatal=1 --output="$T/fio.out" >/dev/null 2>&1) || { cat "$T/fio.out"; fail "fio verify"; }
stop
echo "PASS: $nfiles files intact on a $SECTOR-byte-sector LUN"
