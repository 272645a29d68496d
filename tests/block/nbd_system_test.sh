#!/usr/bin/env bash
# System test of vsld's NBD front end with clients nobody here wrote: libnbd's nbdinfo,
# nbdcopy and nbdsh, qemu-img / qemu-io, fio's nbd engine with crc32c verify over all four
# LUNs; TCP loopback; TLS with X.509 (and client certificates) and with PSK, and the mode
# that refuses plaintext; read-only exports; the card volume; FLUSH and FUA across
# connections (CAN_MULTI_CONN) surviving a SIGKILL of vsld; and malformed input
# (nbd_raw.py) that must not disturb another connection's data.
#   nbd_system_test.sh VSLD VSLCTL
VSLD="$1"
VSLCTL="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/nbd_lib.sh"
for t in nbdinfo nbdcopy nbdsh qemu-io qemu-img fio certtool psktool; do
  command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup installs it)"
done

make_card 4096
stop
start --nbd-tcp 0

echo "== nbdinfo: every LUN and the volume listed with their block sizes"
nbdinfo --json --list "$(uri '')" >"$T/list.json" || fail "nbdinfo --list"
python3 - "$T/list.json" <<'PY' || fail "export list"
import json, sys
j = json.load(open(sys.argv[1]))
ex = {e["export-name"]: e for e in j["exports"]}
assert set(ex) == {"lun0", "lun1", "lun2", "lun3"}, ex.keys()
for n, e in ex.items():
    assert e["block_size_minimum"] == 4096 and e["block_size_maximum"] == 32 << 20, e
    assert e["can_multi_conn"] and e["can_flush"] and e["can_fua"] and e["can_trim"], e
    assert e["can_zero"] and e["can_fast_zero"] and e["can_cache"] and not e["is_read_only"], e
print("exports:", {n: e["export-size"] for n, e in ex.items()})
PY
nbdinfo "$(uri nothere)" 2>"$T/err" && fail "unknown export accepted"
grep -q "nothere" "$T/err" || fail "unknown export: no clear message: $(cat "$T/err")"

echo "== ublk: absent here, said once, NBD serves"
if [ ! -e /dev/ublk-control ]; then
  [ "$(grep -c "ublk: /dev/ublk-control is absent" "$T/vsld.log")" -ge 1 ] || fail "no plain ublk message in the log"
  ctl --json status | python3 -c '
import json, sys
u = json.load(sys.stdin)["front_ends"]["ublk"]
assert "absent" in u["state"] and u["devices"] == [], u' || fail "ublk state in status"
fi

echo "== nbdcopy in and out (Unix socket and TCP loopback)"
head -c $((48 << 20)) /dev/urandom >"$T/rnd"
port=$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["front_ends"]["nbd"]["tcp_port"])')
[ "$port" -gt 0 ] || fail "no TCP port in status"
nbdcopy "$T/rnd" "$(uri lun0)" || fail "nbdcopy to lun0"
nbdcopy "$T/rnd" "nbd://127.0.0.1:$port/lun1" || fail "nbdcopy over TCP"
same_prefix "$(uri lun0)" $((48 << 20)) "$T/rnd" || fail "lun0 read back differs"
same_prefix "nbd://127.0.0.1:$port/lun1" $((48 << 20)) "$T/rnd" || fail "TCP read back differs"
if command -v nbd-client >/dev/null; then
  # The reference implementation's client lists the exports (no kernel module needed).
  nbd-client -l 127.0.0.1 "$port" >"$T/nbdc" 2>&1 || { cat "$T/nbdc"; fail "nbd-client -l"; }
  for e in lun0 lun1 lun2 lun3; do grep -q "^$e" "$T/nbdc" || fail "nbd-client -l does not list $e: $(cat "$T/nbdc")"; done
fi

echo "== base:allocation: written ranges are data, the rest holes that read as zeroes"
nbdsh -u "$(uri lun3)" -c 'h.pwrite(b"x" * (1 << 20), 300 << 20); h.pwrite(b"y" * 8192, 400 << 20)' || fail "writes for the map"
nbdinfo --map "$(uri lun3)" >"$T/map" || fail "nbdinfo --map"
python3 - "$T/map" <<'PY' || { cat "$T/map"; fail "allocation map"; }
import sys
rows = [l.split() for l in open(sys.argv[1])]
data = [(int(r[0]), int(r[1])) for r in rows if r[3] == "data"]
assert (300 << 20, 1 << 20) in data and (400 << 20, 8192) in data, data
for r in rows:
    assert r[3] in ("data", "hole,zero"), r
PY
qemu-img map --output=json -f raw "$(uri lun3)" | grep -q '"start": 314572800, "length": 1048576, "depth": 0, "present": true, "zero": false, "data": true' \
  || fail "qemu-img map"

echo "== qemu-img and qemu-io"
qemu-img info --output=json -f raw "$(uri lun2)" | grep -q '"virtual-size"' || fail "qemu-img info"
qemu-io -f raw -c "write -P 0x5a 1M 2M" -c "write -z 3M 1M" -c "discard 4M 1M" -c "flush" "$(uri lun2)" >/dev/null \
  || fail "qemu-io writes"
qemu-io -f raw -c "read -P 0x5a 1M 2M" -c "read -P 0 3M 2M" "$(uri lun2)" | grep -q "Pattern verification failed" \
  && fail "qemu-io pattern check"
qemu-io -f raw -c "read -P 0x5a 1M 2M" -c "read -P 0 3M 2M" "$(uri lun2)" >/dev/null || fail "qemu-io reads"

echo "== nbdsh: protocol corners, structured and simple replies, multi-conn flush and FUA"
nbdsh -c - >"$T/nbdsh.out" 2>&1 <<PY || { cat "$T/nbdsh.out"; fail "nbdsh checks"; }
import nbd
def conn(structured=True):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    h.set_export_name("lun3")
    h.connect_uri("$(uri lun3)")
    return h
for structured in (True, False):
    h = conn(structured)
    assert h.get_structured_replies_negotiated() == structured
    h.set_strict_mode(0)   # let bad requests reach the server
    for what, call in [("misaligned", lambda: h.pread(4096, 100)),
                       ("past the end", lambda: h.pread(8192, h.get_size() - 4096)),
                       ("misaligned write", lambda: h.pwrite(b"x" * 100, 0))]:
        try:
            call()
            raise AssertionError(what + " accepted")
        except nbd.Error as e:
            assert e.errnum == 22, (what, e)
    h.pwrite(b"A" * 65536, 65536)
    assert h.pread(65536, 65536) == b"A" * 65536
    h.zero(16384, 65536)                       # a hole: trimmed, reads zeroes
    assert h.pread(16384, 65536) == bytes(16384)
    h.pwrite(b"B" * 8192, 65536)
    h.zero(8192, 65536, nbd.CMD_FLAG_NO_HOLE)  # written zeroes
    assert h.pread(8192, 65536) == bytes(8192)
    try:
        h.zero(4096, 65536, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FAST_ZERO)
        raise AssertionError("fast zero without a hole accepted")
    except nbd.Error as e:
        assert e.errnum == 95, e
    h.pwrite(b"C" * 4096, 0)
    h.trim(4096, 0)
    assert h.pread(4096, 0) == bytes(4096)
    h.cache(1 << 20, 0)
    if structured:
        assert h.pread(4096, 0, nbd.CMD_FLAG_DF) == bytes(4096)
    h.shutdown()
# Deep queues, replies out of order: 512 reads and writes in flight on one connection.
h = conn()
bufs = []
for i in range(256):
    h.aio_pwrite(bytes([i]) * 4096, (1 << 20) + i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(256):
    b = nbd.Buffer(4096)
    bufs.append(b)
    h.aio_pread(b, (1 << 20) + i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i, b in enumerate(bufs):
    assert b.to_bytearray() == bytes([i]) * 4096, i
# Multi-conn: writes on one connection, FLUSH on another; a FUA write on a third.
h1, h2, h3 = conn(), conn(), conn()
h1.pwrite(b"M" * (1 << 20), 8 << 20)
h2.flush()
h3.pwrite(b"F" * 4096, 16 << 20, nbd.CMD_FLAG_FUA)
print("nbdsh ok")
PY
echo "== SIGKILL: what was flushed on another connection, and the FUA write, survive"
crash
start
nbdsh -u "$(uri lun3)" -c 'assert h.pread(1 << 20, 8 << 20) == b"M" * (1 << 20), "flushed data lost"
assert h.pread(4096, 16 << 20) == b"F" * 4096, "FUA write lost"' || fail "flush/FUA across connections after SIGKILL"

echo "== fio: crc32c verify over all four LUNs at once"
cat >"$T/verify.fio" <<FIO
[global]
ioengine=nbd
rw=randwrite
bsrange=4k-64k
size=64m
iodepth=32
verify=crc32c
verify_fatal=1
do_verify=1
FIO
for i in 0 1 2 3; do printf '[lun%s]\nuri=%s\n' "$i" "$(uri lun$i)" >>"$T/verify.fio"; done
(cd "$T" && fio --output-format=json --output="$T/fio.json" "$T/verify.fio" >"$T/fio.err" 2>&1) || { cat "$T/fio.err"; fail "fio verify"; }
python3 - "$T/fio.json" <<'PY' || fail "fio results"
import json, sys
j = json.load(open(sys.argv[1]))
for job in j["jobs"]:
    assert job["error"] == 0, job["jobname"]
    assert job["write"]["io_bytes"] >= 32 << 20 and job["read"]["io_bytes"] == job["write"]["io_bytes"], (job["jobname"], job["write"]["io_bytes"], job["read"]["io_bytes"])
print("fio verify: %d jobs, %.0f write IOPS total" % (len(j["jobs"]), sum(x["write"]["iops"] for x in j["jobs"])))
PY

echo "== malformed input (raw protocol) while another connection works"
nbdcopy "$T/rnd" "$(uri lun0)" &
copy=$!
python3 "$HERE/nbd_raw.py" "$NSOCK" lun1 || fail "raw protocol cases"
wait $copy || fail "nbdcopy beside the bad input"
same_prefix "$(uri lun0)" $((48 << 20)) "$T/rnd" || fail "lun0 changed beside the bad input"
ctl --json status | python3 -c 'import json,sys; print("connections now:", json.load(sys.stdin)["front_ends"]["nbd"]["connections"])'

echo "== the card volume: the only export while configured"
stop
start --volume-chunk-kib 128
nbdinfo --json --list "$(uri '')" | python3 -c '
import json, sys
ex = {e["export-name"]: e for e in json.load(sys.stdin)["exports"]}
assert set(ex) == {"volume"}, ex.keys()
assert ex["volume"]["export-size"] > 3 * 1000 * 1000 * 1000, ex' || fail "volume listing"
nbdinfo "$(uri lun0)" 2>"$T/err" && fail "a LUN of the volume exported"
grep -q "lun0 is striped into the card volume: export 'volume' instead" "$T/vsld.log" || fail "LUN of the volume: no clear message"
head -c $((8 << 20)) /dev/urandom >"$T/rnd8"
nbdcopy "$T/rnd8" "$(uri volume)" || fail "nbdcopy to the volume"
same_prefix "$(uri '')" $((8 << 20)) "$T/rnd8" || fail "volume (default export) read back differs"

echo "== read-only exports"
stop
start --nbd-read-only
nbdinfo --json "$(uri lun0)" | grep -q '"is_read_only": true' || fail "read-only not advertised"
nbdsh -u "$(uri lun0)" -c 'h.set_strict_mode(0)
try:
    h.pwrite(b"x" * 4096, 0); raise AssertionError("write accepted")
except nbd.Error as e:
    assert e.errnum == 1, e
assert h.pread(4096, 0) == open("'"$T/rnd8"'", "rb").read(4096)' || fail "read-only export"

echo "== TLS: X.509 required"
mkdir -p "$T/pki" "$T/client" "$T/client-auth"
cat >"$T/pki/ca.info" <<I
cn = OpenVSL test CA
ca
cert_signing_key
expiration_days = 2
I
cat >"$T/pki/server.info" <<I
organization = OpenVSL test
cn = localhost
dns_name = localhost
ip_address = 127.0.0.1
tls_www_server
encryption_key
signing_key
expiration_days = 2
I
cat >"$T/pki/client.info" <<I
cn = client
tls_www_client
encryption_key
signing_key
expiration_days = 2
I
certtool --generate-privkey --outfile "$T/pki/ca-key.pem" 2>/dev/null
certtool --generate-self-signed --load-privkey "$T/pki/ca-key.pem" --template "$T/pki/ca.info" --outfile "$T/pki/ca-cert.pem" 2>/dev/null
certtool --generate-privkey --outfile "$T/pki/server-key.pem" 2>/dev/null
certtool --generate-certificate --load-privkey "$T/pki/server-key.pem" --load-ca-certificate "$T/pki/ca-cert.pem" \
  --load-ca-privkey "$T/pki/ca-key.pem" --template "$T/pki/server.info" --outfile "$T/pki/server-cert.pem" 2>/dev/null
certtool --generate-privkey --outfile "$T/client-auth/client-key.pem" 2>/dev/null
certtool --generate-certificate --load-privkey "$T/client-auth/client-key.pem" --load-ca-certificate "$T/pki/ca-cert.pem" \
  --load-ca-privkey "$T/pki/ca-key.pem" --template "$T/pki/client.info" --outfile "$T/client-auth/client-cert.pem" 2>/dev/null
cp "$T/pki/ca-cert.pem" "$T/client/"
cp "$T/pki/ca-cert.pem" "$T/client-auth/"
stop
start --tls require --tls-cert "$T/pki/server-cert.pem" --tls-key "$T/pki/server-key.pem" --nbd-tcp 0
port=$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["front_ends"]["nbd"]["tcp_port"])')
nbdinfo "$(uri lun0)" 2>"$T/err" && fail "plaintext accepted when TLS is required"
grep -q "refused: this server requires TLS" "$T/vsld.log" || fail "plaintext refusal not logged"
nbdinfo "nbds://localhost:$port/lun0?tls-certificates=$T/client" >"$T/info" 2>"$T/err" || { cat "$T/err"; fail "TLS X.509 over TCP"; }
grep -q "TLS" "$T/info" || fail "nbdinfo does not report TLS"
# The volume's first 128 KiB chunk is the start of lun0.
same_prefix "nbds+unix:///lun0?socket=$NSOCK&tls-certificates=$T/client&tls-hostname=localhost" $((128 << 10)) \
  "$T/rnd8" || fail "TLS read over the Unix socket differs"
echo "== TLS: client certificates required (--tls-ca)"
stop
start --tls require --tls-cert "$T/pki/server-cert.pem" --tls-key "$T/pki/server-key.pem" --tls-ca "$T/pki/ca-cert.pem" --nbd-tcp 0
port=$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["front_ends"]["nbd"]["tcp_port"])')
nbdinfo "nbds://localhost:$port/lun0?tls-certificates=$T/client" >/dev/null 2>&1 && fail "client without a certificate accepted"
nbdinfo "nbds://localhost:$port/lun0?tls-certificates=$T/client-auth" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "client certificate refused"; }

echo "== TLS: PSK"
psktool -u alice -p "$T/keys.psk" >/dev/null 2>&1
psktool -u alice -p "$T/wrong.psk" >/dev/null 2>&1
stop
start --tls require --tls-psk "$T/keys.psk"
nbdinfo "nbds+unix://alice@/lun0?socket=$NSOCK&tls-psk-file=$T/keys.psk" >/dev/null 2>"$T/err" \
  || { cat "$T/err"; fail "PSK"; }
nbdinfo "nbds+unix://alice@/lun0?socket=$NSOCK&tls-psk-file=$T/wrong.psk" >/dev/null 2>&1 && fail "a wrong PSK accepted"
echo "== TLS: bad credentials are refused at start"
stop
"$VSLD" --card "$T/card" --socket "$SOCK" --tls require --tls-cert "$T/nothere.pem" --tls-key "$T/pki/server-key.pem" \
  >"$T/out" 2>&1 && fail "vsld started with a missing certificate"
grep -q "nothere.pem" "$T/out" || fail "missing certificate: no clear message: $(cat "$T/out")"
"$VSLD" --card "$T/card" --socket "$SOCK" --tls require >"$T/out" 2>&1 && fail "vsld started with TLS required and no credentials"

echo "== the example config (scripts/systemd/vsld.json.example) with this test's paths"
python3 - "$HERE/../../scripts/systemd/vsld.json.example" "$T" <<'PY' >"$T/vsld.json"
import json, sys
c = json.load(open(sys.argv[1]))
t = sys.argv[2]
c["cards"] = [t + "/card"]
c["socket"] = t + "/vsld.sock"
c["nbd"]["socket"] = t + "/vsld-nbd.sock"
print(json.dumps(c))
PY
"$VSLD" --config "$T/vsld.json" >>"$T/vsld.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do [ -S "$NSOCK" ] && break; sleep 0.05; done
nbdinfo --size "$(uri lun0)" >/dev/null || fail "vsld from the example config serves no NBD"
stop
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["nbd"]["tls_mdoe"]="on"; json.dump(c, open(sys.argv[1],"w"))' "$T/vsld.json"
"$VSLD" --config "$T/vsld.json" >"$T/out" 2>&1 && fail "a misspelt nbd key accepted"
grep -q "tls_mdoe" "$T/out" || fail "misspelt nbd key: no clear message: $(cat "$T/out")"
echo "PASS"
