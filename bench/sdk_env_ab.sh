#!/bin/bash
# A/B of one environment variable on one row of docs/performance.md's zero-time table:
# for each VALUE in turn, a fresh duo-slc-small card served by vsld --timing none (with
# VAR=VALUE) in /dev/shm, 256 MiB written, then vsl-bench attached through the SDK.
#
#   bench/sdk_env_ab.sh [-w WORKLOAD] [-j JOBS] [-q QD] [-b BUILD] VAR VALUE...
#   e.g. bench/sdk_env_ab.sh VSL_CRC32C avx512-vpclmulqdq sse4.2-crc32 avx512-vpclmulqdq sse4.2-crc32
#
# Prints one line per run: the value, IOPS and mean latency (us). Alternate the values:
# this machine's runs drift, so only interleaved runs compare.
set -euo pipefail
W=4k-randread J=4 Q=4 B=build
while getopts "w:j:q:b:" o; do
  case $o in w) W=$OPTARG ;; j) J=$OPTARG ;; q) Q=$OPTARG ;; b) B=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n 2,10p "$0"; exit 2; }
VAR=$1
shift
for v in "$@"; do
  T=$(mktemp -d /dev/shm/vsl-ab.XXXXXX)
  "$B/tools/vslctl" create-card "$T/card" --profile duo-slc-small >/dev/null
  env "$VAR=$v" "$B/tools/vsld" --card "$T/card" --socket "$T/vsld.sock" --ublk off --timing none >"$T/log" 2>&1 &
  P=$!
  for _ in $(seq 200); do [ -S "$T/vsld.sock" ] && break; sleep 0.05; done
  "$B/tools/vslctl" --socket "$T/vsld.sock" format --yes >/dev/null
  for _ in $(seq 200); do [ -S "$T/vsld-sdk.sock" ] && break; sleep 0.05; done
  sleep 1
  fio --name=p --ioengine=nbd --uri="nbd+unix:///lun0?socket=$T/vsld-nbd.sock" --rw=write --bs=1m --iodepth=8 \
    --size=256M >/dev/null 2>&1
  env "$VAR=$v" "$B/tools/vsl-bench" --json --attach "$T/vsld-sdk.sock" --lun lun0 --workload "$W" --jobs "$J" \
    --iodepth "$Q" --runtime 5 --ramp 0.5 --span 65536 |
    python3 -c "import json,sys; x=json.load(sys.stdin)['result']; print('$v', int(x['iops']), round(x['lat_us']['avg'], 1))"
  kill "$P"
  wait "$P" 2>/dev/null || true
  rm -rf "$T"
done
