#!/usr/bin/env bash
# The dashboard in a real browser (docs/monitoring.md): vsld with --http on a simulated
# card, fio writing over NBD, then headless Chromium loads / and runs its script against
# the live endpoint. The page must show the card (serial, gauges), its four LUNs and charts
# with points drawn from the history. The screenshot is left at OUT (the test's output;
# docs/monitoring/dashboard.png is one taken this way).
#   dashboard_test.sh VSLD VSLCTL OUT.png
set -euo pipefail
VSLD="$1"
VSLCTL="$2"
OUT="$3"
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "SKIP: chromium is not installed (scripts/setup installs it)"; exit 77; }
command -v fio >/dev/null || { echo "SKIP: fio is not installed"; exit 77; }
T=$(mktemp -d)
SOCK="$T/vsld.sock"
PID=""
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$T/vsld.log" ] && tail -20 "$T/vsld.log" >&2
  exit 1
}
ctl() { "$VSLCTL" --socket "$SOCK" "$@"; }
"$VSLCTL" create-card "$T/card" --profile duo-slc-small --blocks 24 >/dev/null
"$VSLD" --card "$T/card" --socket "$SOCK" --ublk off --http 0 --monitor-interval 0.5 >"$T/vsld.log" 2>&1 &
PID=$!
for _ in $(seq 1 400); do
  ctl --json status >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || fail "vsld exited at start"
  sleep 0.05
done
ctl format --yes >/dev/null
PORT=$(grep -o 'serving http://[^ ]*' "$T/vsld.log" | tail -1 | sed 's/.*:\([0-9]*\)\/$/\1/')
[ -n "$PORT" ] || fail "no HTTP port in the log"
SERIAL=$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["cards"][0]["serial"])')
fio --name=w --ioengine=nbd --uri="nbd+unix:///lun0?socket=$T/vsld-nbd.sock" --rw=randrw --bs=4k --iodepth=8 \
  --size=64m --time_based --runtime=5 --output="$T/fio.txt" || fail "fio: $(cat "$T/fio.txt")"
sleep 1
browse() {  # browse FLAGS...: headless Chromium on the dashboard, 4 s of virtual time for its fetches
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$T/chrome" --window-size=1280,1400 --virtual-time-budget=4000 "$@" \
    "http://127.0.0.1:$PORT/" 2>>"$T/chrome.log"
}
browse --dump-dom >"$T/dom.html" || fail "chromium: $(tail -5 "$T/chrome.log")"
python3 - "$T/dom.html" "$SERIAL" <<'PY' || fail "the page is not what it should be (DOM in $T/dom.html)"
import re, sys
dom = open(sys.argv[1]).read()
serial = sys.argv[2]
assert 'data-ready="1"' in dom, "the page's script never finished a refresh"
assert 'id="card-0"' in dom and serial in dom, "no card"
luns = set(re.findall(r'data-lun="(lun\d)"', dom))
assert luns == {"lun0", "lun1", "lun2", "lun3"}, luns
points = {m[0]: int(m[1]) for m in re.findall(r'<svg id="([a-z]+-0)" data-points="(\d+)"', dom)}
assert set(points) == {"tput-0", "iops-0", "lat-0", "temp-0"}, points
assert all(n >= 3 for n in points.values()), points
assert re.search(r'<polyline class="series"[^>]* points="[0-9.]+,[0-9.]+ ', dom), "no line drawn"
# The banner is there; on this healthy card nothing critical (the power governor may hold
# writes back during fio, and a small card written hard may predict an early end of life:
# those alerts are allowed).
banner = re.search(r'<ul id="alerts">(.*?)</ul>', dom, re.S)
assert banner and re.search(r'<li class="(none|info|warning)"', banner.group(1)), "no alert banner"
assert 'class="critical"' not in banner.group(1), banner.group(1)
assert all(f'data-range="{r}"' in dom for r in ("hour", "day", "month")), "no history range buttons"
print("page: card", serial, "LUNs", sorted(luns), "chart points", points)
PY
rm -f "$OUT"
browse --screenshot="$OUT" >/dev/null || fail "chromium screenshot"
[ -s "$OUT" ] && [ "$(head -c 8 "$OUT" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG at $OUT"
echo "screenshot: $OUT ($(stat -c %s "$OUT") bytes)"
kill -TERM "$PID"
wait "$PID" || fail "vsld exit code $? on SIGTERM"
PID=""
echo "PASS"
