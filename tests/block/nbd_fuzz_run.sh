#!/usr/bin/env bash
# Runs the NBD libFuzzer target for SECONDS from the seed corpus; a crash leaves its input
# in the build directory (replay it with nbd_fuzz_replay FILE).
#   nbd_fuzz_run.sh NBD_FUZZ_LIBFUZZER NBD_FUZZ_REPLAY SECONDS
set -euo pipefail
FUZZ="$1"
REPLAY="$2"
SECONDS_TO_RUN="$3"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
"$REPLAY" --write-seeds "$corpus"
# One process, so the run fits two cores beside the rest of the suite; leaks are checked.
"$FUZZ" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$PWD/nbd-fuzz-" "$corpus" 2>&1 | grep -v "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)" | tail -25
exit "${PIPESTATUS[0]}"
