#!/usr/bin/env bash
# SIGKILL of vsld under a mounted ext4 filesystem with an fsyncing writer, through the
# kernel's block drivers (run in the VM: tests/vm/run-in-vm):
#   ublk  the kernel keeps /dev/ublkbN and holds its I/O while vsld is down; the restarted
#         vsld takes the same device over (user recovery, requests re-issued); the writer
#         never sees an error, the kernel logs none, and the filesystem stays mounted.
#   nbd   nbd-client over the Unix socket; the kernel fails the requests in flight when
#         the connection drops (the writer may see errors then, and the filesystem may
#         abort its journal); the filesystem is unmounted, nbd-client reconnects to the
#         restarted vsld, the journal is replayed by mounting again.
# Either way every file whose fsync returned is intact and fsck is clean afterwards.
#   kernel_kill_test.sh VSLD VSLCTL ublk|nbd [ROUNDS] [SEED]
VSLD="$1"
VSLCTL="$2"
MODE="$3"
ROUNDS="${4:-2}"
SEED="${5:-$RANDOM}"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/nbd_lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root"
case "$MODE" in
  ublk) [ -c /dev/ublk-control ] || skip "this kernel has no ublk (tests/vm/run-in-vm boots one that has)" ;;
  nbd)
    [ -b /dev/nbd0 ] || skip "this kernel has no nbd module (tests/vm/run-in-vm boots one that has)"
    command -v nbd-client >/dev/null || skip "nbd-client is not installed"
    ;;
  *) echo "mode: ublk or nbd" >&2; exit 2 ;;
esac
command -v jq >/dev/null || skip "jq is not installed"
echo "seed $SEED, $ROUNDS rounds, $MODE (replay: kernel_kill_test.sh VSLD VSLCTL $MODE $ROUNDS $SEED)"
RANDOM=$SEED
M="$T/mnt"
mkdir -p "$M"
WPID=""
CLEANUP_HOOKS+=('[ -n "$WPID" ] && kill "$WPID" 2>/dev/null')
CLEANUP_HOOKS+=('mountpoint -q "$M" && umount -l "$M"')
[ "$MODE" = nbd ] && CLEANUP_HOOKS+=('nbd-client -d /dev/nbd0 >/dev/null 2>&1')

dev() { ctl --json status | jq -r --arg e "$1" '.front_ends.ublk.devices[] | select(.export == $e) | .device'; }
nbd_connect() { nbd-client -N lun1 -u "$NSOCK" /dev/nbd0 -b 4096 >/dev/null 2>&1; }

make_card 4096
stop
start
if [ "$MODE" = ublk ]; then
  DEV=$(dev lun1)
  start_args=()
else
  start_args=(--ublk off)
  stop
  start "${start_args[@]}"
  DEV=/dev/nbd0
  nbd_connect || fail "nbd-client"
fi
[ -b "$DEV" ] || fail "no block device for lun1"
mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
mount "$DEV" "$M" || fail "mount"
dmesg -C 2>/dev/null || true

# The writer: files of random sizes, each fsynced, then named in $T/acked with its checksum
# (on tmpfs, outside the device): a file named there was durable before vsld died.
writer() {  # writer ROUND: files r<ROUND>-<i>
  local i=0 r=0 f
  set +e
  while [ ! -e "$T/stop-writer" ]; do
    i=$((i + 1))
    head -c $(((RANDOM * 13) % 200000 + 1)) /dev/urandom >"$T/chunk"
    f="r$1-$i"
    if dd if="$T/chunk" of="$M/$f" bs=64k conv=fsync status=none 2>>"$T/writer.err"; then
      echo "$(sha256sum <"$T/chunk" | cut -d' ' -f1)  $f" >>"$T/acked"
    else
      r=$((r + 1))
      echo "$f" >>"$T/failed"
    fi
  done
  exit $r
}
# wait_writer SECS: the writer's exit status; fails the test if it has not ended by then.
wait_writer() {
  for _ in $(seq 1 $(($1 * 10))); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$WPID" 2>/dev/null && fail "the writer is stuck $1 s after it was told to stop"
  local rc=0
  wait "$WPID" || rc=$?
  WPID=""
  return $rc
}
: >"$T/acked"
: >"$T/failed"
total_kills=0
for round in $(seq 1 "$ROUNDS"); do
  rm -f "$T/stop-writer"
  writer "$round" &
  WPID=$!
  sleep "$(( RANDOM % 3 + 1 )).$(( RANDOM % 10 ))"
  before=$(wc -l <"$T/acked")
  # A SIGKILLed vsld is reaped at once: the kernel cancels its queue's commands and
  # quiesces the devices (the old teardown left it for minutes).
  t0=$(date +%s%N)
  crash
  reap_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$reap_ms" -lt 10000 ] || fail "vsld took $reap_ms ms to be reaped after SIGKILL"
  total_kills=$((total_kills + 1))
  echo "== round $round: vsld SIGKILLed after $before fsynced files (reaped in $reap_ms ms)"
  sleep 1
  if [ "$MODE" = ublk ]; then
    start "${start_args[@]}"
    ctl --json status | jq -e '.front_ends.ublk.devices[] | select(.export == "lun1") | .recovered' >/dev/null ||
      fail "lun1's ublk device was not recovered: $(ctl --json status | jq -c .front_ends.ublk)"
    [ "$(dev lun1)" = "$DEV" ] || fail "lun1 came back as $(dev lun1), not $DEV"
    sleep 2  # the writer goes on through the recovered device
    touch "$T/stop-writer"
    wait_writer 60 || fail "the writer saw $? failed writes through a recovered ublk device: $(tail -3 "$T/writer.err")"
    [ "$(wc -l <"$T/acked")" -gt "$before" ] || fail "no write completed after the recovery"
    if dmesg 2>/dev/null | grep -E "I/O error|EXT4-fs error|Buffer I/O" | grep -v "^$" >"$T/kerr"; then
      cat "$T/kerr"
      fail "the kernel logged errors across the recovery"
    fi
    mountpoint -q "$M" || fail "the filesystem is no longer mounted"
  else
    start "${start_args[@]}"
    touch "$T/stop-writer"
    # The connection is dead and nbd-client does not reconnect it: disconnecting the device
    # fails whatever the kernel still holds for it (a writer can otherwise wait for ever in
    # writeback), then the writer ends.
    nbd-client -d "$DEV" >/dev/null 2>&1 || true
    wait_writer 60 || echo "   the writer saw $? failed writes while the connection was down (expected over NBD)"
    umount "$M" 2>/dev/null || umount -l "$M"
    nbd-client -d "$DEV" >/dev/null 2>&1 || true
    sleep 0.5
    nbd_connect || fail "nbd-client could not reconnect to the restarted vsld"
    mount "$DEV" "$M" || fail "mount after reconnect (journal replay)"
  fi
done
echo "== every fsynced file intact, fsck clean ($(wc -l <"$T/acked") files, $total_kills kills)"
(cd "$M" && sha256sum --quiet -c "$T/acked") || fail "an fsynced file differs after the kills"
umount "$M"
fsck.ext4 -fn "$DEV" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck after the kills"; }
if [ "$MODE" = ublk ]; then
  echo "== vsld killed and not coming back: the writer waits; vsld --ublk-release fails its I/O"
  mount "$DEV" "$M" || fail "mount before the release"
  rm -f "$T/stop-writer"
  : >"$T/failed"
  writer release &
  WPID=$!
  sleep 1
  crash
  sleep 3
  held=$(wc -l <"$T/acked")
  sleep 2
  [ "$(wc -l <"$T/acked")" = "$held" ] || fail "writes completed with no vsld serving the device"
  kill -0 "$WPID" 2>/dev/null || fail "the writer ended while its I/O should be held"
  "$VSLD" --socket "$SOCK" --ublk-release >"$T/release.out" 2>&1 || { cat "$T/release.out"; fail "vsld --ublk-release"; }
  grep -q "4 ublk device(s) released" "$T/release.out" || { cat "$T/release.out"; fail "not every device released"; }
  touch "$T/stop-writer"
  for _ in $(seq 1 200); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$WPID" 2>/dev/null && fail "the writer is still blocked 10 s after the release"
  wait "$WPID" && fail "the writer saw no error after its device was released"
  WPID=""
  [ -e "/sys/block/$(basename "$DEV")" ] && fail "$DEV still there after the release"
  umount -l "$M"
  echo "   the writer's held I/O failed; every file fsynced before the kill is still on the LUN:"
  start
  DEV=$(dev lun1)
  fsck.ext4 -fy "$DEV" >"$T/fsck" 2>&1 || [ $? -le 1 ] || { cat "$T/fsck"; fail "fsck after the release"; }
  mount "$DEV" "$M" || fail "mount after the release"
  (cd "$M" && sha256sum --quiet -c "$T/acked") || fail "an fsynced file differs after the release"
  umount "$M"
fi
if [ "$MODE" = nbd ]; then nbd-client -d "$DEV" >/dev/null 2>&1; fi
stop
echo "PASS: $MODE: $total_kills SIGKILLs under an fsyncing writer, $(wc -l <"$T/acked") fsynced files intact, fsck clean"
