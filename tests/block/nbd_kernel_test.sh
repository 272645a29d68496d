#!/usr/bin/env bash
# The kernel's own NBD client: nbd-client attaches a LUN as /dev/nbdN (block size = the
# LUN's sector size) -> mkfs.ext4 -> mount -> files -> umount -> fsck -> detach. Needs the
# kernel's nbd module; skips (exit 77) saying so where it is absent (as on the CI machine,
# where tests/block/nbd_fs_test.sh covers the same path through nbdfuse and a loop device).
#   nbd_kernel_test.sh VSLD VSLCTL
VSLD="$1"
VSLCTL="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/nbd_lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root"
[ -b /dev/nbd0 ] || skip "this kernel has no nbd module (/dev/nbd0 is absent): nothing to attach a kernel NBD device to"
command -v nbd-client >/dev/null || skip "nbd-client is not installed (scripts/setup installs it)"
DEV=""
for d in /dev/nbd*; do
  [ -b "$d" ] || continue
  if [ "$(cat "/sys/block/$(basename "$d")/size" 2>/dev/null || echo 1)" = 0 ]; then DEV=$d; break; fi
done
[ -n "$DEV" ] || skip "no free /dev/nbdN"
mkdir -p "$T/mnt"
CLEANUP_HOOKS+=('mountpoint -q "$T/mnt" && umount "$T/mnt"')
CLEANUP_HOOKS+=('nbd-client -d "$DEV" >/dev/null 2>&1')

make_card 4096
nbd-client -N lun2 -u "$NSOCK" "$DEV" -b 4096 || fail "nbd-client attach"
mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
mount "$DEV" "$T/mnt" || fail "mount"
cp -r "$HERE/../../vsl" "$T/mnt/src"
(cd "$T/mnt" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
umount "$T/mnt"
fsck.ext4 -fn "$DEV" >/dev/null 2>&1 || fail "fsck"
mount "$DEV" "$T/mnt" && (cd "$T/mnt" && sha256sum --quiet -c "$T/sums") || fail "checksums"
umount "$T/mnt"
nbd-client -d "$DEV"
stop
echo "PASS: ext4 on $DEV through the kernel's NBD client"
