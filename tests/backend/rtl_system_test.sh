#!/usr/bin/env bash
# vsld on the co-simulated RTL controller (rtl: backend), as a user runs it: every sector
# of the filesystem passes through the Verilated vsl_ctrl (rings, DMA, ECC, the ONFI pin
# engine) into pin-level die models whose pages live in the card directory.
#   1. vslctl create-card rtl:DIR; vsld --card rtl:DIR; format; `vslctl status --json`
#      shows the backend, the controller identity and register-map version read from its
#      registers, four LUNs online and temperatures from its SENSOR registers.
#   2. LUN 0's export through nbdfuse + a loop device: mkfs.ext4, a file tree copied in,
#      fsck -fn clean; vsld stopped (SIGTERM) and started again: fsck clean, checksums equal.
#   3. A writer that fsyncs each file; SIGKILL vsld under it; restart: the journal replays,
#      fsck clean, every file whose fsync returned is intact.
#   4. A die of LUN 1 killed through the controller's fault path (its ONFI die model stops
#      answering; the controller reports R/B# timeouts) while writes go on: nothing
#      acknowledged is lost, FlashBack remaps and rebuilds, status shows the dead die; it
#      stays dead across a restart.
# Needs /dev/fuse, loop devices, nbdfuse, losetup, mkfs.ext4, jq (skips with the reason).
VSLD="$1"
VSLCTL="$2"
BLOCKS="${3:-40}"  # blocks per die: small enough to format in seconds, big enough for a journal
source "$(dirname "$0")/../block/nbd_lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (loop devices, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
for t in nbdfuse losetup fusermount3 mkfs.ext4 fsck.ext4 jq; do
  command -v "$t" >/dev/null || skip "$t missing"
done
losetup --find >/dev/null 2>&1 || skip "no free loop device"

rtl_start() { start_spec "rtl:$T/card"; }
LOOP=""
mkdir -p "$T/fuse" "$T/mnt"
CLEANUP_HOOKS+=('mountpoint -q "$T/mnt" && umount -l "$T/mnt"')
CLEANUP_HOOKS+=('[ -n "$LOOP" ] && losetup -d "$LOOP"')
CLEANUP_HOOKS+=('mountpoint -q "$T/fuse" && fusermount3 -u -z "$T/fuse"')
attach() {
  nbdfuse "$T/fuse" "$(uri "$1")" &
  for _ in $(seq 1 200); do
    [ -e "$T/fuse/nbd" ] && break
    sleep 0.05
  done
  [ -e "$T/fuse/nbd" ] || fail "nbdfuse did not expose $1"
  LOOP=$(losetup --find --show --sector-size 4096 --direct-io=on "$T/fuse/nbd") || fail "losetup"
}
detach() {
  losetup -d "$LOOP" || true
  LOOP=""
  fusermount3 -u -z "$T/fuse" || true
  sleep 0.3
}
lun_json() { ctl --json status | jq -c ".cards[0].luns[] | select(.name == \"$1\")"; }

"$VSLCTL" create-card "rtl:$T/card" --blocks "$BLOCKS" >/dev/null || fail "create-card"
[ "$(cat "$T/card/BACKEND")" = rtl ] || fail "no backend marker"
# The card is not a simulated one: opening it as such is refused with the reason.
if "$VSLD" --card "$T/card" --socket "$T/wrong.sock" >"$T/wrong.log" 2>&1; then fail "a rtl card opened as sim"; fi
grep -q "rtl backend" "$T/wrong.log" || fail "no clear error for the wrong backend: $(tail -2 "$T/wrong.log")"

echo "== 1. vsld on rtl:$T/card"
rtl_start
t0=$(date +%s.%N)
ctl format --yes >/dev/null || fail "format"
echo "format: $(echo "$(date +%s.%N) - $t0" | bc) s"
S=$(ctl --json status)
[ "$(jq -r '.cards[0].backend' <<<"$S")" = rtl ] || fail "backend: $(jq -c '.cards[0].backend' <<<"$S")"
jq -r '.cards[0].hardware' <<<"$S" | grep -q "vsl_ctrl (ID 4F56534C, register map 1.3" ||
  fail "identity not from the registers: $(jq -r '.cards[0].hardware' <<<"$S")"
[ "$(jq -r '.cards[0].firmware_version' <<<"$S")" = 1.3 ] || fail "firmware version"
[ "$(jq '[.cards[0].luns[] | select(.state == "online")] | length' <<<"$S")" -eq 4 ] || fail "not four LUNs online"
[ "$(jq '.cards[0].controllers | length' <<<"$S")" -eq 2 ] || fail "not two controllers"
for k in 0 1; do
  tc=$(jq ".cards[0].controllers[$k].temperature_c" <<<"$S")
  # The board model warms the card above the 25 C air from its static power.
  awk -v t="$tc" 'BEGIN { exit !(t > 25.0 && t < 90.0) }' || fail "controller $k temperature $tc C"
done
jq -r '.cards[0].controllers[] | "controller \(.index): \(.serial) \(.temperature_c) C, PLP \(.plp)"' <<<"$S"
jq -r '.cards[0].hardware' <<<"$S"

echo "== 2. ext4 on lun0 through the RTL"
attach lun0
mkfs.ext4 -q -F -E nodiscard -J size=4 "$LOOP" || fail "mkfs.ext4"
# The crash round relies on the journal (a card too small for one gets none).
tune2fs -l "$LOOP" | grep -q "features:.*has_journal" || fail "mkfs made no journal (LUN too small?)"
mount "$LOOP" "$T/mnt" || fail "mount"
mkdir -p "$T/mnt/tree"
for d in a b c; do
  mkdir -p "$T/mnt/tree/$d"
  for i in $(seq 1 6); do head -c $((i * 7000 + 123)) /dev/urandom >"$T/mnt/tree/$d/f$i"; done
done
cp -r /work/main/rtl/ctrl "$T/mnt/tree/src" 2>/dev/null || cp -r "$(dirname "$0")/../../rtl/ctrl" "$T/mnt/tree/src"
(cd "$T/mnt/tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
umount "$T/mnt"
fsck.ext4 -fn "$LOOP" >"$T/fsck1" 2>&1 || { cat "$T/fsck1"; fail "fsck after the copy"; }
detach
stop
rtl_start
attach lun0
fsck.ext4 -fn "$LOOP" >"$T/fsck2" 2>&1 || { cat "$T/fsck2"; fail "fsck after the restart"; }
mount -o ro "$LOOP" "$T/mnt" || fail "mount after restart"
(cd "$T/mnt/tree" && sha256sum -c --quiet "$T/sums") || fail "checksums differ after the restart"
umount "$T/mnt"
echo "tree of $(wc -l <"$T/sums") files intact across a clean restart"

echo "== 3. SIGKILL under an fsyncing writer"
mount "$LOOP" "$T/mnt" || fail "mount rw"
: >"$T/synced"
(
  i=0
  while [ $i -lt 400 ]; do
    f="$T/mnt/w$i"
    head -c 6000 /dev/urandom >"$f.tmp" 2>/dev/null || exit 0
    python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)" "$f.tmp" 2>/dev/null || exit 0
    sha256sum "$f.tmp" | sed "s|$T/mnt/||" >>"$T/synced"
    i=$((i + 1))
  done
) &
WRITER=$!
for _ in $(seq 1 600); do
  [ "$(wc -l <"$T/synced")" -ge 8 ] && break
  sleep 0.1
done
[ "$(wc -l <"$T/synced")" -ge 8 ] || fail "the writer made no progress"
crash  # nbdfuse may abort on the dead connection (its assertion): that is the client's end
wait "$WRITER" 2>/dev/null || true
umount -l "$T/mnt" 2>/dev/null || true
detach
N=$(wc -l <"$T/synced")
rtl_start
[ "$(ctl --json status | jq '.cards[0].controllers[0].unsafe_power_offs')" -ge 1 ] || fail "no unsafe power-off counted"
attach lun0
mount "$LOOP" "$T/mnt" || fail "mount after the crash (journal replay)"
umount "$T/mnt"
fsck.ext4 -fn "$LOOP" >"$T/fsck3" 2>&1 || { cat "$T/fsck3"; fail "fsck after the crash"; }
mount -o ro "$LOOP" "$T/mnt" || fail "mount ro"
(cd "$T/mnt" && sha256sum -c --quiet "$T/synced") || fail "an fsynced file was lost or changed"
(cd "$T/mnt/tree" && sha256sum -c --quiet "$T/sums") || fail "the tree changed"
umount "$T/mnt"
detach
echo "$N fsynced files intact after SIGKILL"

echo "== 4. a die of lun1 killed while it serves writes"
head -c $((1024 * 1024)) /dev/urandom >"$T/pattern"
nbdcopy "$T/pattern" "$(uri lun1)" || fail "first write"
nbdcopy "$T/pattern" "$(uri lun1)" &
COPY=$!
sleep 2
ctl fail-die --lun 1 --die 2 >/dev/null || fail "fail-die"
wait "$COPY" || fail "the write under the die failure failed"
same_prefix "$(uri lun1)" $((1024 * 1024)) "$T/pattern" || fail "data lost after the die failure"
for _ in $(seq 1 600); do
  L=$(lun_json lun1)
  [ "$(jq '.flashback.rebuild_lebs_left' <<<"$L")" -eq 0 ] && [ "$(jq '.flashback.failed_dies | length' <<<"$L")" -ge 1 ] && break
  sleep 0.5
done
L=$(lun_json lun1)
[ "$(jq '.flashback.failed_dies | length' <<<"$L")" -ge 1 ] || fail "no remapped die: $(jq -c .flashback <<<"$L")"
[ "$(jq '.flashback.rebuild_lebs_left' <<<"$L")" -eq 0 ] || fail "rebuild did not finish: $(jq -c .flashback <<<"$L")"
[ "$(jq '.flashback.lost_sectors' <<<"$L")" -eq 0 ] || fail "sectors lost: $(jq -c .flashback <<<"$L")"
[ "$(ctl --json status | jq '.cards[0].controllers[0].failed_dies')" -eq 1 ] || fail "status does not show the dead die"
echo "lun1: $(jq -c .flashback <<<"$L")"
stop
rtl_start
[ "$(ctl --json status | jq '.cards[0].controllers[0].failed_dies')" -eq 1 ] || fail "the die came back to life"
same_prefix "$(uri lun1)" $((1024 * 1024)) "$T/pattern" || fail "data lost across the restart"
stop
echo "PASS"
