#!/usr/bin/env bash
# The Alveo tools on a machine without a card: vslctl alveo-cards and vsld --list-alveo
# fail with a message that says no card is there and what to check; given a file that is
# not an xclbin they say that instead (checked before looking for a card).
#   no_card_test.sh <vsld> <vslctl>
set -euo pipefail
vsld="$1"
vslctl="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

expect_fail() {  # expect_fail <pattern> <command...>: fails, and stderr matches
  local pattern="$1"
  shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: '$*' succeeded without a card"
    exit 1
  fi
  if ! grep -q -- "$pattern" "$tmp/err"; then
    echo "FAIL: '$*' said:"
    cat "$tmp/err"
    echo "(expected: $pattern)"
    exit 1
  fi
  echo "ok: $* -> $(head -1 "$tmp/err")"
}

expect_fail "no Alveo card: XRT sees no device" "$vslctl" alveo-cards
expect_fail "no Alveo card: XRT sees no device" "$vsld" --list-alveo
echo "not an xclbin" >"$tmp/junk.xclbin"
expect_fail "not a readable xclbin" "$vslctl" alveo-cards --xclbin "$tmp/junk.xclbin"
expect_fail "not a readable xclbin" "$vsld" --list-alveo --alveo-xclbin "$tmp/junk.xclbin"
expect_fail "Failed to open file" "$vslctl" alveo-cards --xclbin "$tmp/missing.xclbin"
