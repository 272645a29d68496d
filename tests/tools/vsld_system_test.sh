#!/usr/bin/env bash
# System test of vsld and vslctl on a simulated duo-slc card: every vslctl subcommand in
# human and JSON form, dual/single pipe modes, LUN detach/attach/reset, sure-erase,
# malformed control requests, clean stop (SIGTERM: attach from checkpoint) and SIGKILL at
# random points (recovery by scan), one card owner at a time, documented exit codes.
#   vsld_system_test.sh VSLD VSLCTL
set -euo pipefail
VSLD="$1"
VSLCTL="$2"
T=$(mktemp -d)
SOCK="$T/vsld.sock"
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$T/vsld.log" ] && tail -20 "$T/vsld.log" >&2
  exit 1
}
ctl() { "$VSLCTL" --socket "$SOCK" "$@"; }
start() {
  "$VSLD" --card "$T/card" --socket "$SOCK" --log-level info --volume-chunk-kib 128 >>"$T/vsld.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    [ -S "$SOCK" ] && ctl --json status >/dev/null 2>&1 && return 0
    kill -0 "$PID" 2>/dev/null || fail "vsld exited at start"
    sleep 0.05
  done
  fail "vsld did not come up"
}
stop() {
  kill -TERM "$PID"
  wait "$PID" || fail "vsld exit code $? on SIGTERM"
  PID=""
}
# json_check 'python expression over j' [vslctl args...]: status --json must satisfy it.
json_check() {
  local expr="$1"
  shift
  ctl --json status "$@" | python3 -c "
import json,sys
j=json.load(sys.stdin)
luns=j['cards'][0]['luns']
st={l['name']:l['state'] for l in luns}
assert $expr, (st, j['cards'][0]['controllers'])
" || fail "status check: $expr"
}

"$VSLCTL" create-card "$T/card" --profile duo-slc-small --blocks 24 >/dev/null
"$VSLCTL" --json create-card "$T/card" --profile duo-slc-small >/dev/null 2>&1 && fail "create over a card"

# No daemon yet: exit 3 with a hint.
set +e
ctl status 2>"$T/err"
rc=$?
set -e
[ $rc -eq 3 ] || fail "no vsld: exit $rc, want 3"
grep -q "cannot reach vsld" "$T/err" || fail "no vsld: message"

start
[ "$(stat -c %a "$SOCK")" = 600 ] || fail "socket is not root-only (mode $(stat -c %a "$SOCK"))"
# A second vsld on the same socket, or on the same card, is refused.
set +e
"$VSLD" --card "$T/card" --socket "$SOCK" 2>"$T/err2"
rc=$?
"$VSLD" --card "$T/card" --socket "$T/other.sock" 2>"$T/err3"
rc3=$?
set -e
[ $rc -ne 0 ] || fail "second vsld on the socket started"
[ $rc3 -eq 2 ] && grep -q "in use by another process" "$T/err3" || fail "second vsld on the card: exit $rc3 $(cat "$T/err3")"
# A bad --sim-ecc is a usage error; the running card reports its ECC mode.
set +e
"$VSLD" --card "$T/card" --socket "$T/other.sock" --sim-ecc exactish 2>"$T/err4"
rc4=$?
set -e
[ $rc4 -eq 2 ] && grep -q "statistical' or 'bit-exact" "$T/err4" || fail "bad --sim-ecc: exit $rc4 $(cat "$T/err4")"
json_check "j['cards'][0]['ecc_mode']=='statistical' and j['cards'][0]['timing']=='model'"
# So is a bad --timing; a zero-time card is refused on a backend that is not simulated.
set +e
"$VSLD" --card "$T/card" --socket "$T/other.sock" --timing fast 2>"$T/err5"
rc5=$?
"$VSLD" --card "rtl:$T/nocard" --socket "$T/other.sock" --timing none 2>"$T/err6"
rc6=$?
set -e
[ $rc5 -eq 2 ] && grep -q "timing must be model or none" "$T/err5" || fail "bad --timing: exit $rc5 $(cat "$T/err5")"
[ $rc6 -ne 0 ] && grep -q "applies to simulated cards only" "$T/err6" || fail "--timing none on rtl: exit $rc6 $(cat "$T/err6")"

json_check "len(luns)==4 and all(s=='unformatted' for s in st.values())"
ctl status | grep -q "lun0: unformatted" || fail "human status"
# Format asks first; 'no' declines with exit 4.
set +e
echo no | ctl format >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 4 ] || fail "declined format: exit $rc"
ctl format --yes >/dev/null
json_check "all(s=='online' for s in st.values()) and all(l['sector_bytes']==4096 for l in luns)"
ctl status | grep -q "lun3: online" || fail "human status after format"
json_check "j['cards'][0]['volume']['luns']==4 and j['cards'][0]['volume']['chunk_bytes']==131072 and j['cards'][0]['volume']['sectors']==4*(min(l['sectors'] for l in luns)//32*32)"
ctl status | grep -q "Card volume: .* over 4 LUNs in 128 KiB chunks" || fail "human status: volume"

# Single-pipe mode on controller 0: one LUN over both pipes.
ctl format --controller 0 --mode single --sector-size 512 --yes >/dev/null
json_check "'error' in j['cards'][0]['volume']"  # 512 B and 4 KiB LUNs do not stripe together
json_check "len(luns)==3 and luns[0]['pipes']==[0,1] and luns[0]['sector_bytes']==512 and j['cards'][0]['controllers'][0]['pipe_mode']=='single'"
json_check "luns[0]['sectors'] > 7*luns[1]['sectors']"  # 2 pipes, 8x smaller sectors

ctl detach --lun 2 >/dev/null
json_check "st['lun2']=='offline' and st['lun3']=='online'"
ctl attach --lun 2 >/dev/null
# --force (for a LUN whose ublk device is mounted; docs/vsld.md) is accepted where none is.
ctl detach --lun 2 --force >/dev/null || fail "detach --force"
json_check "st['lun2']=='offline'"
ctl attach --lun 2 >/dev/null
ctl --json detach --lun 2 --force --bogus >/dev/null 2>&1 && fail "an unknown flag after --force was accepted"
ctl reset --lun 3 | grep -q "lun3: online" || fail "reset"
json_check "all(s=='online' for s in st.values())"
ctl --json reset --lun 1 >/dev/null 2>&1 && fail "reset of a LUN that does not exist"
ctl beacon on >/dev/null
ctl --json status | python3 -c 'import json,sys; assert json.load(sys.stdin)["cards"][0]["beacon"] is True' || fail "beacon"
ctl status -a | grep -q "factory bad" || fail "status -a"

ctl sure-erase --controller 1 --yes | grep -q "lun2: .* erased and verified blank" || fail "sure-erase"
json_check "st['lun2']=='unformatted' and st['lun3']=='unformatted' and st['lun0']=='online'"
ctl format --controller 1 --yes >/dev/null
json_check "all(s=='online' for s in st.values())"

# Malformed requests: each gets an error reply; vsld keeps serving.
python3 - "$SOCK" <<'EOF' || fail "malformed requests"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
def ask(line):
    f.write(line + "\n"); f.flush()
    return json.loads(f.readline())
for bad in ["garbage", "[]", '{"v":1}', '{"v":1,"cmd":"nope"}', '{"v":9,"cmd":"status"}',
            '{"v":1,"cmd":"attach","lun":"x"}', '{"v":1,"cmd":"format","sector_bytes":1000}',
            '{"v":1,"cmd":"format","mode":"triple"}', '{"v":1,"cmd":"status","card":7}']:
    r = ask(bad)
    assert r["ok"] is False and r["error"]["message"], (bad, r)
assert ask('{"v":1,"cmd":"version"}')["ok"] is True
s2 = socket.socket(socket.AF_UNIX); s2.connect(sys.argv[1])
s2.sendall(b"x" * 70000)  # over-long line: refused, connection closed
r = json.loads(s2.makefile().readline())
assert r["ok"] is False
EOF
ctl --json status >/dev/null || fail "vsld after malformed requests"
# Bad arguments from vslctl: refused with exit 2, nothing formatted or attached.
for args in "format --reserve custom --spare-percent -50 --yes" "format --reserve custom --spare-percent 1e9 --yes" \
            "format --reserve under-provision --spare-percent 20 --yes" "attach --lun -7" "format --mode triple --yes"; do
  set +e
  ctl $args >/dev/null 2>"$T/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "vslctl $args: exit $rc, want 2 ($(cat "$T/err"))"
done
json_check "all(s=='online' for s in st.values())"
set +e
"$VSLD" --card "$T/card" --socket "$T/x.sock" --socket-mode zz 2>"$T/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "not an octal mode" "$T/err" || fail "bad --socket-mode: exit $rc"
echo '{"cards": ["x"], "socket_mode": "99"}' >"$T/bad.json"
set +e
"$VSLD" --config "$T/bad.json" 2>"$T/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "socket_mode" "$T/err" || fail "bad config socket_mode: exit $rc"
echo '{"cards": ["x"], "sokcet": "/tmp/x"}' >"$T/bad.json"
set +e
"$VSLD" --config "$T/bad.json" 2>"$T/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "unknown key 'sokcet'" "$T/err" || fail "config typo: exit $rc"
# Firmware update: checked first; a corrupt or mismatched image changes nothing.
model=$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["cards"][0]["model"])')
head -c 5000 /dev/urandom >"$T/payload"
"$VSLCTL" make-firmware "$T/good.fw" --version 1.1.0 --model "$model" --payload "$T/payload" >/dev/null
"$VSLCTL" make-firmware "$T/other.fw" --version 9.9.9 --model OTHER-MODEL >/dev/null
cp "$T/good.fw" "$T/bad.fw"
printf 'X' | dd of="$T/bad.fw" bs=1 seek=2000 conv=notrunc 2>/dev/null
for img in bad other; do
  set +e
  ctl update "$T/$img.fw" --yes 2>"$T/err"
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "update with the $img image succeeded"
done
grep -q "is for controller model OTHER-MODEL" "$T/err" || fail "mismatch message: $(cat "$T/err")"
set +e
ctl update /nonexistent.fw --yes 2>/dev/null
rc=$?
set -e
[ $rc -ne 0 ] || fail "update of a missing file"
json_check "j['cards'][0]['firmware_version']=='1.0.0'"
ctl update "$T/good.fw" --controller 1 --yes | grep -q "controller 1: firmware 1.0.0 -> 1.1.0" || fail "update"
json_check "j['cards'][0]['controllers'][1]['firmware_version']=='1.1.0' and j['cards'][0]['controllers'][0]['firmware_version']=='1.0.0'"
[ -f "$T/card/ctrl1.fw" ] || fail "firmware image kept beside the card"


# Power override (docs/power.md): refused above the slot's declared capability (and
# logged), accepted once the slot is declared able; thermal and health in the status.
json_check "j['cards'][0]['power']['limit_w']==24.75 and not j['cards'][0]['power']['override']['on']"
json_check "j['cards'][0]['health']['state']=='healthy' and j['cards'][0]['health']['reserve_percent']==100"
json_check "j['cards'][0]['power']['static_w']==20 and j['cards'][0]['temperature_c'] > 20"
json_check "j['cards'][0]['health']['smart']['critical_warning']==0 and j['cards'][0]['health']['rated_pb_written'] > 0"
ctl power-override --watts 55 >/dev/null 2>&1 && fail "override above the declared slot accepted"
grep -q "power change refused: power override 55.00 W is above" "$T/vsld.log" || fail "refusal not logged"
json_check "not j['cards'][0]['power']['override']['on']"
ctl power-override --watts 55 --slot-capability 75 | grep -q "power override ON (55.00 W" || fail "override on"
json_check "j['cards'][0]['power']['limit_w']==55 and j['cards'][0]['power']['override']['on']"
grep -q "power limit 55.00 W (power override" "$T/vsld.log" || fail "override not logged"
ctl power-override --off >/dev/null || fail "override off"
json_check "j['cards'][0]['power']['limit_w']==24.75"
ctl power-override >/dev/null 2>&1 && fail "power-override with nothing to do"
ctl sim-environment --ambient 45 --airflow 100 >/dev/null || fail "sim-environment"
json_check "j['cards'][0]['power']['environment']['ambient_c']==45 and j['cards'][0]['temperature_c'] > 45"
ctl sim-environment --ambient 25 --airflow 300 >/dev/null
ctl status | grep -q "PCIe power: .* limit 24.75 W; power override off" || fail "human status: power"
ctl status | grep -q "SMART: critical warning 0x00" || fail "human status: SMART"

# Clean stop and restart: every LUN from its checkpoint.
serial=$(ctl --json status 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["cards"][0]["serial"])' || true)
stop
# The per-serial override in the config file; one above the slot declared is refused at
# start (the card stays at the slot limit) and said in the log.
cat > "$T/power.json" <<CFG
{"cards": ["$T/card"], "socket": "$SOCK",
 "power": {"slot_capability_w": 75, "cards": {"$serial": {"override_w": 55}}}}
CFG
"$VSLD" --config "$T/power.json" --log-level info >>"$T/vsld.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do [ -S "$SOCK" ] && ctl --json status >/dev/null 2>&1 && break; sleep 0.05; done
json_check "j['cards'][0]['power']['limit_w']==55 and j['cards'][0]['power']['override']['on']"
stop
cat > "$T/power.json" <<CFG
{"cards": ["$T/card"], "socket": "$SOCK", "sim_ecc": "bit-exact", "sim_timing": "none", "power": {"cards": {"$serial": {"override_w": 55}}}}
CFG
"$VSLD" --config "$T/power.json" --log-level info >>"$T/vsld.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do [ -S "$SOCK" ] && ctl --json status >/dev/null 2>&1 && break; sleep 0.05; done
json_check "j['cards'][0]['power']['limit_w']==24.75"
# Served bit-exact (the BCH codec on every read) from the config, LUNs attached from
# pages written in statistical mode.
json_check "j['cards'][0]['ecc_mode']=='bit-exact' and all(s=='online' for s in st.values())"
# ... and zero-time (a benchmarking mode), said in the status and the log.
json_check "j['cards'][0]['timing']=='none'"
grep -q "zero-time card (--timing none)" "$T/vsld.log" || fail "zero-time logged"
grep -q "power configuration refused, staying at the 24.75 W slot limit" "$T/vsld.log" || fail "config refusal logged"
stop
grep -q "stopped cleanly" "$T/vsld.log" || fail "clean stop log"
[ -e "$SOCK" ] && fail "socket left behind"
start
json_check "all(s=='online' for s in st.values()) and all(l['attach']['from_checkpoint'] for l in luns)"
json_check "j['cards'][0]['controllers'][1]['firmware_version']=='1.1.0'"  # kept across restarts

# SIGKILL at random points (attach, serving, a format in progress), then recovery.
for i in 1 2 3 4 5; do
  if [ $i -eq 3 ]; then (ctl format --controller 1 --yes >/dev/null 2>&1 &) ; fi
  sleep "0.0$((RANDOM % 10))"
  kill -KILL "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
  start
done
ctl format --controller 1 --yes >/dev/null  # in case the kill cut a format short
json_check "all(s=='online' for s in st.values())"
ctl --json status | python3 -c '
import json,sys
j=json.load(sys.stdin)
assert j["cards"][0]["controllers"][0]["unsafe_power_offs"] >= 5, j["cards"][0]["controllers"][0]
' || fail "unsafe stops counted"
stop
echo "vsld system test: OK"
