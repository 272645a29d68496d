#!/usr/bin/env bash
# Two hosts, one card (docs/ha.md), end to end with real processes: the card served by
# `vslflash serve`, two vsld hosts (--host-id, --luns) each exporting its own LUNs over
# its own NBD socket, real clients (fio, nbdcopy, ext4 through nbdfuse + loop):
#   claims       two hosts start for the same LUN: exactly one serves it, the other's
#                attach is refused naming the holder
#   isolation    fio on A's LUN while B is SIGKILLed, restarted, one of its LUNs reset
#                and its controller reformatted: no error and no stall reaches A
#   failover     a writer with fsync on ext4 on A's LUN; SIGKILL A; B (--takeover auto)
#                takes the LUN over once A's lease runs out; every fsynced file is there,
#                fsck clean; the time from the kill to B's first served read is reported
#   zombie       SIGSTOP B while it writes; A takes B's LUN over by force and writes;
#                SIGCONT B: its writes are refused by the card (stale generation), it
#                reports the LUN fenced and serves it no more; A's data is intact
#   give-back    the taken LUN handed back cleanly: released, attached from the checkpoint
#   bad input    sharing flags without a host id, a LUN the card lacks: refused, clearly
#   power cut    the card process SIGKILLed under fio: the hosts stop without hanging, the
#                card comes back, the LUN attaches again with its acknowledged data
#   ha_system_test.sh VSLD VSLCTL VSLFLASH
set -euo pipefail
VSLD="$1"
VSLCTL="$2"
VSLFLASH="$3"
export PATH="/usr/bin:$PATH"
skip() { echo "SKIP: $*"; exit 77; }
for t in fio nbdcopy nbdinfo python3; do command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup installs it)"; done
T=$(mktemp -d)
CARD="$T/card"
LEASE_MS=1500
declare -A PIDS=()
CARDPID=""
LOOP=""
cleanup() {
  set +e
  mountpoint -q "$T/mnt" && umount -l "$T/mnt"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  mountpoint -q "$T/fuse" && fusermount3 -u -z "$T/fuse"
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  [ -n "$CARDPID" ] && kill -KILL "$CARDPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do echo "--- $f" >&2; tail -25 "$f" >&2; done
  exit 1
}
ctl() { local h="$1"; shift; "$VSLCTL" --socket "$T/$h.sock" "$@"; }
uri() { echo "nbd+unix:///$2?socket=$T/$1-nbd.sock"; }
# lun_state HOST LUN: the LUN's state as HOST reports it.
lun_state() {
  ctl "$1" --json status 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin)
print(next(l['state'] for l in d['cards'][0]['luns'] if l['index']==$2))" 2>/dev/null || echo "?"
}
# wait_state HOST LUN STATE [SECONDS]
wait_state() {
  local n=$(( ${4:-30} * 20 ))
  for _ in $(seq 1 "$n"); do
    [ "$(lun_state "$1" "$2")" = "$3" ] && return 0
    sleep 0.05
  done
  fail "$1: lun$2 is $(lun_state "$1" "$2"), not $3"
}
# host NAME ID LUNS [vsld args]: starts a vsld host and waits for its sockets.
host() {
  local name="$1" id="$2" luns="$3"
  shift 3
  "$VSLD" --card "shared:$CARD" --host-id "$id" --luns "$luns" --lease-ms "$LEASE_MS" --socket "$T/$name.sock" \
    --ublk off --monitor-interval 0 "$@" >>"$T/$name.log" 2>&1 &
  PIDS[$name]=$!
  for _ in $(seq 1 400); do
    if [ -S "$T/$name-nbd.sock" ] && ctl "$name" --json status >/dev/null 2>&1; then return 0; fi
    kill -0 "${PIDS[$name]}" 2>/dev/null || fail "host $name exited at start"
    sleep 0.05
  done
  fail "host $name did not come up"
}
stop_host() {
  kill -TERM "${PIDS[$1]}"
  wait "${PIDS[$1]}" || fail "host $1: exit code $? on SIGTERM"
  unset "PIDS[$1]"
}
kill_host() {
  kill -KILL "${PIDS[$1]}"
  wait "${PIDS[$1]}" 2>/dev/null || true
  unset "PIDS[$1]"
}

"$VSLFLASH" create "$CARD" --profile duo-slc-small --blocks 48 >/dev/null
"$VSLFLASH" serve "$CARD" >>"$T/card.log" 2>&1 &
CARDPID=$!
for _ in $(seq 1 200); do [ -S "$CARD/card.sock" ] && break; sleep 0.05; done
[ -S "$CARD/card.sock" ] || fail "vslflash serve did not come up"
# Formatted from one host, which then stops cleanly (every LUN released).
host f 1 0,1,2,3
ctl f format --yes >/dev/null || fail "format"
stop_host f

echo "== claims: two hosts start for lun0 at once"
host a 1 0 &
HA=$!
host b 2 0 &
HB=$!
wait "$HA" "$HB" || fail "a host did not come up"
# `host` ran in subshells: find the processes by their sockets' owners.
PIDS[a]=$(pgrep -f -- "--socket $T/a.sock")
PIDS[b]=$(pgrep -f -- "--socket $T/b.sock")
sa=$(lun_state a 0)
sb=$(lun_state b 0)
[ "$sa/$sb" = "online/elsewhere" ] || [ "$sa/$sb" = "elsewhere/online" ] || fail "lun0 is $sa on A and $sb on B"
loser=a
[ "$sa" = online ] && loser=b
out=$(ctl "$loser" attach --lun 0 2>&1) && fail "the second claim was granted: $out"
grep -q "is held by host" <<<"$out" || fail "the refusal does not name the holder: $out"
echo "   one host serves lun0; the other is told: $out"
# Not this shell's children (started in subshells): stopped by signal, awaited by polling.
for h in a b; do
  kill -TERM "${PIDS[$h]}"
  for _ in $(seq 1 600); do kill -0 "${PIDS[$h]}" 2>/dev/null || break; sleep 0.05; done
  kill -0 "${PIDS[$h]}" 2>/dev/null && fail "host $h did not stop"
  grep -q "stopped cleanly" "$T/$h.log" || fail "host $h did not stop cleanly"
  unset "PIDS[$h]"
done

echo "== isolation: fio on A's lun0 while B is killed, restarted, reset and reformatted"
host a 1 0,1
host b 2 2,3
wait_state a 0 online
wait_state b 2 online
run_fio() {  # run_fio NAME SECONDS: 4 KiB random writes at depth 16 on A's lun0
  (cd "$T" && fio --name=iso --ioengine=nbd --uri="$(uri a lun0)" --rw=randwrite --bs=4k --size=64m --iodepth=16 \
    --time_based --runtime="$2" --output-format=json --output="$T/$1.json" >/dev/null 2>&1)
}
run_fio calm 8 || fail "fio (undisturbed) failed"
run_fio busy 14 &
FIO=$!
sleep 2
kill_host b
host b 2 2,3
wait_state b 2 online
ctl b reset --lun 2 >/dev/null || fail "reset of B's lun2"
ctl b format --controller 1 --yes >/dev/null || fail "reformat of B's controller"
wait_state b 3 online
wait "$FIO" || fail "fio on A's LUN saw errors while B was disturbed"
python3 - "$T/calm.json" "$T/busy.json" <<'EOF' || fail "A's I/O stalled while B was disturbed"
import json, sys
calm, busy = (json.load(open(p))["jobs"][0] for p in sys.argv[1:3])
assert busy["error"] == 0, busy["error"]
assert busy["write"]["io_bytes"] > 0
worst = busy["write"]["clat_ns"]["max"] / 1e9
ratio = busy["write"]["iops"] / calm["write"]["iops"]
print(f"   A: {calm['write']['iops']:.0f} IOPS undisturbed, {busy['write']['iops']:.0f} while B was disturbed "
      f"(ratio {ratio:.2f}; bench/ha_bench.sh measures it properly); worst latency {worst:.3f} s")
assert worst < 3.0, f"a write waited {worst:.1f} s"
EOF
stop_host a
stop_host b

echo "== failover: ext4 with fsync on A's lun0; SIGKILL A; B takes over"
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ] || ! command -v nbdfuse >/dev/null || ! losetup --find >/dev/null 2>&1; then
  echo "   (skipped: needs root, /dev/fuse, nbdfuse and a free loop device)"
  FAILOVER=0
else
  FAILOVER=1
fi
host a 1 0,1
host b 2 2,3 --takeover auto
wait_state a 0 online
mkdir -p "$T/fuse" "$T/mnt"
attach_fs() {  # attach_fs HOST: lun0 of HOST as a loop device on nbdfuse
  nbdfuse "$T/fuse" "$(uri "$1" lun0)" &
  for _ in $(seq 1 100); do [ -e "$T/fuse/nbd" ] && break; sleep 0.05; done
  [ -e "$T/fuse/nbd" ] || fail "nbdfuse did not expose $1's lun0"
  LOOP=$(losetup --find --show --sector-size 4096 --direct-io=on "$T/fuse/nbd") || fail "losetup"
}
detach_fs() {
  mountpoint -q "$T/mnt" && umount -l "$T/mnt"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  LOOP=""
  fusermount3 -u -z "$T/fuse" 2>/dev/null || true
  sleep 0.3
}
if [ "$FAILOVER" = 1 ]; then
  attach_fs a
  mkfs.ext4 -q -F "$LOOP" || fail "mkfs.ext4"
  mount "$LOOP" "$T/mnt" || fail "mount"
  # Each file is fsynced (and its directory) before it is listed as acknowledged.
  python3 - "$T/mnt" "$T/acked" <<'EOF' &
import hashlib, os, sys
mnt, acked = sys.argv[1], sys.argv[2]
log = open(acked, "a")
d = os.open(mnt, os.O_RDONLY)
i = 0
try:
    while True:
        i += 1
        data = os.urandom(4096 * (1 + i % 37))
        with open(f"{mnt}/f{i}", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.fsync(d)
        log.write(f"f{i} {hashlib.sha256(data).hexdigest()}\n")
        log.flush()
except OSError:
    pass
EOF
  WRITER=$!
  touch "$T/acked"
  for _ in $(seq 1 400); do [ "$(wc -l <"$T/acked")" -ge 60 ] && break; sleep 0.05; done
  [ "$(wc -l <"$T/acked")" -ge 60 ] || fail "the writer did not get going"
else
  head -c 4M /dev/urandom >"$T/before"
  nbdcopy "$T/before" "$(uri a lun0)" || fail "nbdcopy to A"
fi
t0=$(date +%s.%N)
kill_host a
# B's first served read of lun0: the failover time.
for _ in $(seq 1 600); do
  nbdinfo --size "$(uri b lun0)" >/dev/null 2>&1 && head_ok=1 && break
  sleep 0.02
done
[ "${head_ok:-0}" = 1 ] || fail "B never served lun0 after A was killed"
( set +o pipefail; nbdcopy "$(uri b lun0)" - 2>/dev/null | head -c 4096 >/dev/null )
t1=$(date +%s.%N)
echo "   failover: A killed -> B served lun0 in $(python3 -c "print(f'{$t1-$t0:.2f}')") s (lease $LEASE_MS ms)"
grep -q "lun0: host 1's lease ran out: taking it over" "$T/b.log" || fail "B did not take lun0 over by lease"
if [ "$FAILOVER" = 1 ]; then
  kill -KILL "$WRITER" 2>/dev/null || true
  wait "$WRITER" 2>/dev/null || true
  n=$(wc -l <"$T/acked")
  detach_fs
  attach_fs b
  # The journal is replayed (a crash leaves it to be) and the superblock's free block and
  # inode totals recounted (ext4 does not keep those on disk exactly); nothing else may
  # need fixing.
  e2fsck -fy "$LOOP" >"$T/fsck1.log" 2>&1 || [ $? -le 1 ] || fail "e2fsck -fy failed: $(tail -5 "$T/fsck1.log")"
  python3 - "$T/fsck1.log" <<'PY' || fail "fsck had to repair more than the journal: $(cat "$T/fsck1.log")"
import sys
lines = [l.strip() for l in open(sys.argv[1])]
fixes = [lines[i - 1] for i, l in enumerate(lines) if l.endswith("? yes") and i > 0]
bad = [f for f in fixes if not f.startswith(("Free blocks count wrong (", "Free inodes count wrong ("))]
sys.exit(1 if bad else 0)
PY
  e2fsck -fn "$LOOP" >"$T/fsck2.log" 2>&1 || fail "fsck is not clean after the failover: $(tail -8 "$T/fsck2.log")"
  mount "$LOOP" "$T/mnt" || fail "mount on B"
  (cd "$T/mnt" && while read -r f sum; do
    echo "$sum  $f"
  done <"$T/acked" | sha256sum --quiet -c -) || fail "an fsynced file is missing or wrong after the failover"
  echo "   $n fsynced files, every one intact on B; fsck clean"
  detach_fs
else
  same=$( (set +o pipefail; nbdcopy "$(uri b lun0)" - 2>/dev/null | cmp -n 4194304 - "$T/before") && echo y || echo n)
  [ "$same" = y ] || fail "A's acknowledged data is not on B"
fi

echo "== zombie: SIGSTOP B while it writes lun2; A takes lun2 by force; SIGCONT B"
host a 1 0,1
wait_state b 2 online
(cd "$T" && fio --name=z --ioengine=nbd --uri="$(uri b lun2)" --rw=randwrite --bs=4k --size=8m --iodepth=16 \
  --time_based --runtime=60 --output="$T/zombie-fio.txt" >/dev/null 2>&1) &
ZFIO=$!
sleep 1.5
kill -STOP "${PIDS[b]}"
ctl a takeover --lun 2 --force >/dev/null || fail "A's takeover of lun2"
head -c 8M /dev/urandom >"$T/mine"
nbdcopy "$T/mine" "$(uri a lun2)" || fail "A's write to lun2"
kill -CONT "${PIDS[b]}"
wait_state b 2 fenced 15
wait "$ZFIO" && fail "B's writer saw no error after it was fenced"
grep -q "lun2: fenced: host 1 took lun2 over" "$T/b.log" || fail "B did not report lun2 lost"
nbdcopy "$(uri b lun2)" - >/dev/null 2>&1 && fail "B still serves lun2"
sleep 0.5
same=$( (set +o pipefail; nbdcopy "$(uri a lun2)" - 2>/dev/null | cmp -n 8388608 - "$T/mine") && echo y || echo n)
[ "$same" = y ] || fail "A's data on lun2 was overwritten by the fenced host"
echo "   B fenced ($(grep -c 'fenced' "$T/b.log") log lines), A's 8 MiB intact"

echo "== give-back: A releases lun2, B takes it back from the checkpoint"
ctl a release --lun 2 >/dev/null || fail "release"
out=$(ctl b --json takeover --lun 2) || fail "B's takeover after the release: $out"
python3 -c "import json,sys; e=json.loads(sys.argv[1])['luns'][0]; assert e['attach']['from_checkpoint'], e" "$out" ||
  fail "the give-back did not attach from the checkpoint: $out"
same=$( (set +o pipefail; nbdcopy "$(uri b lun2)" - 2>/dev/null | cmp -n 8388608 - "$T/mine") && echo y || echo n)
[ "$same" = y ] || fail "lun2's data changed across the give-back"

echo "== bad input: sharing flags without a host id, a LUN the card lacks"
out=$("$VSLD" --card "shared:$CARD" --luns 0 --socket "$T/x.sock" 2>&1) && fail "--luns without --host-id was taken"
grep -q "give --host-id" <<<"$out" || fail "unclear refusal: $out"
out=$("$VSLD" --card "shared:$CARD" --host-id 3 --luns 9 --socket "$T/x.sock" --ublk off 2>&1) && fail "--luns 9 was taken"
grep -q "has no LUN 9" <<<"$out" || fail "unclear refusal: $out"

echo "== the card loses power (SIGKILL of vslflash serve) under writes; acknowledged data survives"
head -c 8M /dev/urandom >"$T/acked3"
nbdcopy "$T/acked3" "$(uri b lun3)" || fail "nbdcopy to lun3"
(cd "$T" && fio --name=cut --ioengine=nbd --uri="$(uri b lun3)" --rw=randwrite --bs=4k --offset=16m --size=16m \
  --iodepth=16 --time_based --runtime=30 --output=/dev/null >/dev/null 2>&1) &
CUTFIO=$!
sleep 1.5
kill -KILL "$CARDPID"
wait "$CARDPID" 2>/dev/null || true
wait "$CUTFIO" && fail "fio saw no error when the card lost power"
# The hosts lose their card: a stop must not hang on it.
for h in a b; do
  kill -TERM "${PIDS[$h]}"
  for _ in $(seq 1 600); do kill -0 "${PIDS[$h]}" 2>/dev/null || break; sleep 0.05; done
  kill -0 "${PIDS[$h]}" 2>/dev/null && fail "host $h hangs on SIGTERM after the card went away"
  wait "${PIDS[$h]}" 2>/dev/null || true
  unset "PIDS[$h]"
done
# The dead card left its socket file: wait for the new one to say it serves.
served=$(grep -c "served on" "$T/card.log")
"$VSLFLASH" serve "$CARD" >>"$T/card.log" 2>&1 &
CARDPID=$!
for _ in $(seq 1 200); do [ "$(grep -c "served on" "$T/card.log")" -gt "$served" ] && break; sleep 0.05; done
host b 2 2,3
wait_state b 3 online
same=$( (set +o pipefail; nbdcopy "$(uri b lun3)" - 2>/dev/null | cmp -n 8388608 - "$T/acked3") && echo y || echo n)
[ "$same" = y ] || fail "acknowledged data on lun3 lost across the card's power cut"
echo "   the card power-cycled under fio; lun3 attached again, its acknowledged 8 MiB intact"
stop_host b
kill -TERM "$CARDPID"
wait "$CARDPID" || fail "vslflash serve: exit code $? on SIGTERM"
CARDPID=""
echo "PASS"
