#!/usr/bin/env bash
# vsld's LUNs as /dev/ublkbN through the kernel's ublk driver, as a user gets them: every
# LUN a block device at start (the default --ublk auto); ext4 and XFS mkfs -> write a tree
# -> unmount -> fsck clean; fio crc32c verify at QD16 with trims; blkdiscard reading back
# zeroes; the lifecycle while a device is mounted (LUN detach: I/O fails, attach: it
# resumes); SIGTERM of vsld returns within a few seconds with every ublk device deleted;
# a restart serves them again with the data intact; a 512-byte-sector LUN. Needs the
# kernel's ublk_drv (run it in the VM: tests/vm/run-in-vm); skips (77) where it is absent.
#   ublk_system_test.sh VSLD VSLCTL
VSLD="$1"
VSLCTL="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/nbd_lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root"
[ -c /dev/ublk-control ] || skip "this kernel has no ublk (/dev/ublk-control is absent; tests/vm/run-in-vm boots one that has)"
for t in mkfs.ext4 fsck.ext4 mkfs.xfs xfs_repair fio blkdiscard jq; do
  command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup installs it)"
done
mkdir -p "$T/m0" "$T/m1"
CLEANUP_HOOKS+=('for m in "$T"/m0 "$T"/m1; do mountpoint -q "$m" && umount -l "$m"; done')

# dev EXPORT: the ublk block device vsld serves EXPORT on.
dev() { ctl --json status | jq -r --arg e "$1" '.front_ends.ublk.devices[] | select(.export == $e) | .device'; }
ublk_count() { ls /sys/block 2>/dev/null | grep -c '^ublkb' || true; }
# stop_timed: SIGTERM; vsld must exit 0 within LIMIT seconds with no ublk device left.
stop_timed() {
  local limit="$1" t0 t1
  t0=$(date +%s.%N)
  kill -TERM "$PID"
  for _ in $(seq 1 $((limit * 20))); do kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$PID" 2>/dev/null && fail "vsld still running ${limit}s after SIGTERM (ublk teardown hangs)"
  wait "$PID" || fail "vsld exit code $? on SIGTERM"
  PID=""
  t1=$(date +%s.%N)
  echo "   SIGTERM -> exit in $(echo "$t1 - $t0" | bc -l | cut -c1-5) s"
  for _ in $(seq 1 40); do [ "$(ublk_count)" = 0 ] && break; sleep 0.05; done
  [ "$(ublk_count)" = 0 ] || fail "ublk devices left after a clean stop: $(ls /sys/block | grep ublk | tr '\n' ' ')"
  ls /dev/ublkc* >/dev/null 2>&1 && fail "ublk char devices left after a clean stop"
  return 0
}

echo "== four LUNs, 4 KiB sectors, served as ublk devices"
make_card 4096
# The card was blank at start (no devices): the format makes them, without a restart.
[ "$(ctl --json status | jq -r '.front_ends.ublk.state')" = serving ] || fail "ublk not serving: $(ctl --json status | jq -c .front_ends.ublk)"
n=$(ctl --json status | jq '.front_ends.ublk.devices | length')
[ "$n" = 4 ] || fail "$n ublk devices, not 4"
D0=$(dev lun0)
D1=$(dev lun1)
D2=$(dev lun2)
D3=$(dev lun3)
for d in "$D0" "$D1" "$D2" "$D3"; do [ -b "$d" ] || fail "$d is not a block device"; done
[ "$(blockdev --getss "$D0")" = 4096 ] || fail "$D0 logical block size $(blockdev --getss "$D0"), not 4096"
size=$(blockdev --getsize64 "$D0")
[ "$(cat /sys/block/$(basename "$D0")/queue/discard_granularity)" = 4096 ] || fail "discard granularity"
q="/sys/block/$(basename "$D0")"
[ "$(cat "$q/queue/write_cache")" = "write back" ] || fail "no volatile cache advertised"
[ "$(cat "$q/queue/fua")" = 1 ] || fail "FUA not advertised (the kernel would turn FUA writes into flushes)"
[ "$(cat "$q/queue/max_hw_sectors_kb")" = 512 ] || fail "max I/O $(cat "$q/queue/max_hw_sectors_kb") KiB, not 512"
[ "$(cat "$q/mq/0/nr_tags")" = 128 ] || fail "queue depth $(cat "$q/mq/0/nr_tags"), not 128"
echo "   $D0 $D1 $D2 $D3, $size bytes each"

echo "== ext4 on $D0, XFS on $D1"
mkfs.ext4 -q -F "$D0" || fail "mkfs.ext4"
mkfs.xfs -q -f "$D1" || fail "mkfs.xfs"
mount "$D0" "$T/m0" || fail "mount ext4"
mount "$D1" "$T/m1" || fail "mount xfs"
for m in "$T/m0" "$T/m1"; do
  cp -r "$HERE/../../vsl" "$m/src"
  mkdir -p "$m/small"
  for i in $(seq 1 200); do head -c $((RANDOM % 9000 + 1)) /dev/urandom >"$m/small/f$i"; done
  head -c $((12 << 20)) /dev/urandom >"$m/big"
  ln -s big "$m/soft"
  (cd "$m" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$m.sums"
done
umount "$T/m0"
umount "$T/m1"
fsck.ext4 -fn "$D0" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck.ext4"; }
xfs_repair -n "$D1" >"$T/xfsr" 2>&1 || { cat "$T/xfsr"; fail "xfs_repair -n"; }

echo "== fio crc32c verify at QD16 with trims on $D2"
# randtrimwrite: each block trimmed, then written (fio 3.33's trim_percentage trips an
# assertion of its own); verify reads every block back against its crc32c header.
fio --name=v --filename="$D2" --ioengine=libaio --direct=1 --rw=randtrimwrite --bsrange=4k-64k --size=48m \
  --iodepth=16 --verify=crc32c --verify_fatal=1 --output="$T/fio.out" >/dev/null 2>&1 ||
  { cat "$T/fio.out"; fail "fio verify"; }
grep -q "err= 0" "$T/fio.out" || { cat "$T/fio.out"; fail "fio reported errors"; }
grep -q "ublkb.*ios=[1-9]" "$T/fio.out" || { cat "$T/fio.out"; fail "fio did no I/O"; }
trims=$(sed -n 's/.*issued rwts: total=[0-9]*,[0-9]*,\([0-9]*\).*/\1/p' "$T/fio.out")
[ "${trims:-0}" -gt 0 ] || { cat "$T/fio.out"; fail "fio issued no trims"; }
echo "   $trims trims among the verified writes"

echo "== blkdiscard reads back zeroes; write-zeroes"
head -c $((1 << 20)) /dev/urandom | dd of="$D3" bs=1M oflag=direct conv=fsync status=none
blkdiscard -o 0 -l $((1 << 20)) "$D3" || fail "blkdiscard"
cmp -n $((1 << 20)) /dev/zero <(dd if="$D3" bs=1M count=1 iflag=direct status=none) || fail "discarded range not zero"
head -c $((1 << 20)) /dev/urandom | dd of="$D3" bs=1M oflag=direct conv=fsync status=none
blkdiscard -z -o 0 -l $((1 << 20)) "$D3" || fail "blkdiscard -z (write zeroes)"
cmp -n $((1 << 20)) /dev/zero <(dd if="$D3" bs=1M count=1 iflag=direct status=none) || fail "zeroed range not zero"

echo "== bad input: a 512-byte direct write to a 4 KiB-sector device, a write past the end"
if dd if=/dev/zero of="$D3" bs=512 count=1 oflag=direct status=none 2>/dev/null; then
  fail "a 512-byte O_DIRECT write to a 4 KiB-sector device succeeded"
fi
if dd if=/dev/zero of="$D3" bs=4096 count=1 seek=$(($(blockdev --getsize64 "$D3") / 4096)) oflag=direct status=none 2>/dev/null; then
  fail "a write past the end of $D3 succeeded"
fi
echo "== a mounted LUN is not detached, reset or formatted under its filesystem"
mount "$D0" "$T/m0" || fail "mount ext4 again"
for c in "detach --lun 0" "reset --lun 0" "format --yes --controller 0"; do
  # shellcheck disable=SC2086
  if ctl $c >"$T/ctl.out" 2>&1; then fail "vslctl $c went through under a mounted filesystem"; fi
  grep -q "in use" "$T/ctl.out" || { cat "$T/ctl.out"; fail "vslctl $c: no 'in use' reason"; }
done
[ "$(ctl --json status | jq -r '.cards[0].luns[0].state')" = online ] || fail "lun0 not online after the refusals"
dd if=/dev/urandom of="$T/m0/after-refusals" bs=64k count=4 conv=fsync status=none || fail "write after the refusals"
umount "$T/m0"
echo "== unmounted: detach (I/O fails while detached), attach (it resumes)"
ctl detach --lun 0 >/dev/null || fail "vslctl detach of an unmounted LUN"
if dd if="$D0" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; then
  fail "a read of a detached LUN succeeded"
fi
ctl attach --lun 0 >/dev/null || fail "vslctl attach"
fsck.ext4 -fn "$D0" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck after detach and attach"; }
mount "$D0" "$T/m0" || fail "mount after the detach"
(cd "$T/m0" && sha256sum --quiet -c "$T/m0.sums") || fail "ext4 files changed across the detach"
umount "$T/m0"

echo "== SIGTERM: every ublk device deleted, promptly"
stop_timed 10
echo "== restart: the same data through new devices"
start
D0=$(dev lun0)
D1=$(dev lun1)
mount "$D0" "$T/m0" || fail "mount ext4 after restart"
mount "$D1" "$T/m1" || fail "mount xfs after restart"
(cd "$T/m0" && sha256sum --quiet -c "$T/m0.sums") || fail "ext4 checksums after restart"
(cd "$T/m1" && sha256sum --quiet -c "$T/m1.sums") || fail "xfs checksums after restart"
[ "$(readlink "$T/m1/soft")" = big ] || fail "symlink lost"
echo "== SIGTERM with both filesystems mounted: vsld still stops promptly"
sync
stop_timed 10
umount -l "$T/m0" 2>/dev/null || true
umount -l "$T/m1" 2>/dev/null || true

echo "== 512-byte sectors: a format remakes the ublk devices in the new shape"
start
ctl format --yes --sector-size 512 >/dev/null || fail "format 512"
D2=$(dev lun2)
[ "$(blockdev --getss "$D2")" = 512 ] || fail "$D2 logical block size $(blockdev --getss "$D2"), not 512"
mkfs.ext4 -q -F -b 1024 "$D2" || fail "mkfs.ext4 on 512-byte sectors"
mount "$D2" "$T/m0" || fail "mount 512"
cp -r "$HERE/../../vsl/ublk" "$T/m0/u"
(cd "$T/m0" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/s512"
umount "$T/m0"
fsck.ext4 -fn "$D2" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck 512"; }
fio --name=v --filename="$(dev lun3)" --ioengine=libaio --direct=1 --rw=randwrite --bsrange=512-32k --size=16m \
  --iodepth=16 --verify=crc32c --verify_fatal=1 --output="$T/fio.out" >/dev/null 2>&1 || { cat "$T/fio.out"; fail "fio verify 512"; }
stop_timed 10
grep -E "\[ublk\]" "$T/vsld.log" | grep -E "deleted|warn|error" | tail -6
echo "PASS: ext4, XFS, fio verify, discard, detach, clean stops and restarts through ublk"
