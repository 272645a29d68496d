#!/usr/bin/env bash
# The xrt: backend without a board: `vsld --card xrt:0` and `vslctl create-card xrt:0`
# exit non-zero with one clear line; nothing pretends to be hardware.
set -uo pipefail
VSLD="$1"
VSLCTL="$2"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
if "$VSLD" --card xrt:0 --socket "$T/s.sock" >"$T/out" 2>&1; then fail "vsld started on xrt:0 without a board"; fi
grep -q "no Alveo device for xrt:0" "$T/out" || fail "no clear message: $(cat "$T/out")"
grep "no Alveo device" "$T/out" | head -1
if "$VSLCTL" create-card xrt:0 >"$T/out2" 2>&1; then fail "create-card xrt:0 succeeded without a board"; fi
grep -q "no Alveo device for xrt:0" "$T/out2" || fail "create-card: $(cat "$T/out2")"
if "$VSLD" --card xrt:notanumber --socket "$T/s.sock" >"$T/out3" 2>&1; then fail "xrt:notanumber accepted"; fi
echo PASS
