#!/usr/bin/env bash
# System test of the vslflash binary: create, info (human and JSON), exercise in all three
# timing modes, and clear errors with the documented exit codes for bad input.
set -euo pipefail
BIN="$1"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" profiles | grep -q '^duo-slc ' || fail "profiles lists duo-slc"
"$BIN" create "$T/card" --profile duo-slc-small --blocks 8 >/dev/null
"$BIN" info "$T/card" | grep -q 'controller 1: serial' || fail "info shows both controllers"
"$BIN" info "$T/card" --json | python3 -c '
import json,sys
j=json.load(sys.stdin)
assert j["profile"]=="duo-slc-small", j
assert len(j["controllers"])==2
assert j["controllers"][0]["dies"]==48
' || fail "info --json"
for timing in virtual null real; do
  out=$("$BIN" exercise "$T/card" --timing $timing --pages 2 --json)
  echo "$out" | python3 -c '
import json,sys
j=json.load(sys.stdin)
assert j["ok"] is True, j
assert j["pages"]["mismatches"]==0
assert j["dies"]["exercised"]==96
assert j["bad_blocks"]["found_by_scan"]==j["bad_blocks"]["marked"]
' || fail "exercise --timing $timing"
done
"$BIN" exercise "$T/card" --pages 2 2>/dev/null | grep -q '^result: PASS' || fail "human output"

set +e
"$BIN" create "$T/card" --profile duo-slc-small >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'already holds' "$T/err" || fail "re-create refused (rc=$rc)"
"$BIN" create "$T/x" --profile nosuch >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no card profile named 'nosuch'" "$T/err" || fail "unknown profile (rc=$rc)"
"$BIN" info "$T/missing" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'does not exist' "$T/err" || fail "missing card (rc=$rc)"
mkdir -p "$T/junk" && head -c 100000 /dev/urandom > "$T/junk/ctrl0.img"
"$BIN" info "$T/junk" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'not an OpenVSL card image' "$T/err" || fail "foreign image (rc=$rc)"
"$BIN" exercise "$T/card" --timing warp 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "bad timing mode (rc=$rc)"
"$BIN" 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "no subcommand (rc=$rc)"
set -e
echo "vslflash CLI: all checks passed"
