#!/usr/bin/env bash
# The longer co-simulated campaign (label slow): vsld on the co-simulated RTL controller
# (rtl:) killed (SIGKILL) at random instants under the exact acknowledged-write checker
# (tests/block/nbd_crash_check.py, libnbd) on lun1, restarted (recovery by scan through
# the RTL), and every acknowledged block checked; halfway through, a die of lun1 is
# killed through the controller's fault path before the kill, so later rounds recover
# and verify with FlashBack substituting for it. Any wrong block fails the run.
#   rtl_campaign.sh VSLD VSLCTL [ROUNDS] [SEED]
VSLD="$1"
VSLCTL="$2"
ROUNDS="${3:-8}"
SEED="${4:-$RANDOM}"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../block/nbd_lib.sh"
command -v nbdsh >/dev/null || skip "nbdsh is not installed"
echo "seed $SEED, $ROUNDS rounds (replay: rtl_campaign.sh VSLD VSLCTL $ROUNDS $SEED)"
RANDOM=$SEED
rtl_start() { start_spec "rtl:$T/card"; }
"$VSLCTL" create-card "rtl:$T/card" --blocks 40 >/dev/null || fail "create-card"
rtl_start
ctl format --yes >/dev/null || fail "format"
acked=0
for round in $(seq 1 "$ROUNDS"); do
  nbdsh -u "$(uri lun1)" -c 'h.zero(h.get_size(), 0); h.flush()' || fail "round $round: zeroing lun1"
  python3 "$HERE/../block/nbd_crash_check.py" write "$(uri lun1)" "$T/check.json" $((SEED * 100 + round)) \
    >"$T/check.out" 2>&1 &
  check=$!
  delay_ms=$((2000 + RANDOM % 4000))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if [ "$round" -eq $(((ROUNDS + 1) / 2)) ]; then
    ctl fail-die --lun 1 --die 3 >/dev/null || fail "round $round: fail-die"
    echo "round $round: die 3 of lun1 killed through the fault path"
    sleep 1
  fi
  crash
  wait "$check" || { cat "$T/check.out"; fail "round $round: the checker failed"; }
  rtl_start
  grep -q '"state": *"failed"' <<<"$(ctl --json status)" && fail "round $round: a LUN failed to attach"
  python3 "$HERE/../block/nbd_crash_check.py" verify "$(uri lun1)" "$T/check.json" >>"$T/check.out" 2>&1 ||
    { cat "$T/check.out"; fail "round $round: acknowledged data lost (kill at $delay_ms ms)"; }
  n=$(grep -o 'written: [0-9]*' "$T/check.out" | tail -1 | grep -o '[0-9]*')
  acked=$((acked + n))
  echo "round $round: killed at $delay_ms ms; $(grep verified "$T/check.out" | tail -1)"
done
fb=$(ctl --json status | jq -c '.cards[0].luns[] | select(.name == "lun1") | .flashback')
[ "$(jq '.failed_dies | length' <<<"$fb")" -ge 1 ] || fail "the die failure was not seen: $fb"
[ "$(jq '.lost_sectors' <<<"$fb")" -eq 0 ] || fail "sectors lost: $fb"
stop
echo "PASS: $ROUNDS kills, $acked acknowledged blocks checked exactly, a die failure survived ($fb)"
