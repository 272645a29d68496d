#!/usr/bin/env bash
# vsld's monitor end to end (docs/monitoring.md), on a simulated card with real clients:
# /metrics checked by promtool and scraped by a real Prometheus server (queried through
# its HTTP API for a rate, a gauge and a latency quantile while fio writes over NBD);
# non-loopback binds refused unless allowed; nothing but GET served; alerts (a hot card,
# a dead die) seen in the metrics, vslctl status, the log and the hook; vslctl monitor;
# the history kept across a restart, a corrupt line in its file skipped. The shipped
# alerting rules and Grafana dashboard (docs/monitoring/) are loaded into / evaluated by
# that Prometheus: every rule healthy, VslDieFailed firing, every panel query valid and
# naming only metrics vsld exposes.
#   monitor_system_test.sh VSLD VSLCTL DOCS_MONITORING_DIR
set -euo pipefail
VSLD="$1"
VSLCTL="$2"
DOCS=$(cd "$3" && pwd)
for tool in prometheus promtool fio curl python3 certtool; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/setup installs it)"; exit 77; }
done
T=$(mktemp -d)
SOCK="$T/vsld.sock"
PID=""
PROM=""
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null || true
  [ -n "$PROM" ] && kill -KILL "$PROM" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$T/vsld.log" ] && tail -30 "$T/vsld.log" >&2
  exit 1
}
ctl() { "$VSLCTL" --socket "$SOCK" "$@"; }
PORT=""
start() {
  "$VSLD" --card "$T/card" --socket "$SOCK" --ublk off --monitor-interval 0.5 --alert-hook "$T/hook.sh" \
    --alert-temp-warn 45 "$@" >>"$T/vsld.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 400); do
    if ctl --json status >/dev/null 2>&1; then
      PORT=$(grep -o 'serving https\?://[^ ]*' "$T/vsld.log" | tail -1 | sed 's/.*:\([0-9]*\)\/$/\1/')
      return 0
    fi
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
SCHEME=http
url() { echo "$SCHEME://127.0.0.1:$PORT$1"; }
curl() {  # HTTPS (after the restart) trusts the test's CA
  if [ -f "$T/ca-cert.pem" ]; then command curl --cacert "$T/ca-cert.pem" "$@"; else command curl "$@"; fi
}
# wait_for 'shell condition' what: polls for up to 30 s.
wait_for() {
  for _ in $(seq 1 300); do
    if eval "$1"; then return 0; fi
    sleep 0.1
  done
  fail "timed out waiting for $2"
}
cat >"$T/hook.sh" <<HOOK
#!/bin/sh
echo "\$VSL_ALERT \$VSL_ALERT_STATE \$VSL_ALERT_SEVERITY card=\$VSL_ALERT_CARD lun=\$VSL_ALERT_LUN" >> "$T/hook.log"
HOOK
chmod +x "$T/hook.sh"

"$VSLCTL" create-card "$T/card" --profile duo-slc-small --blocks 24 >/dev/null

echo "== a non-loopback address is refused unless allowed"
set +e
"$VSLD" --card "$T/card" --socket "$T/other.sock" --http 0.0.0.0:0 >"$T/refused.log" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "--http 0.0.0.0:0 without --http-allow-remote: exit $rc, want 2"
grep -q "not a loopback address" "$T/refused.log" || fail "no reason given: $(cat "$T/refused.log")"
"$VSLD" --card "$T/card" --socket "$T/other.sock" --http 9x >"$T/refused.log" 2>&1 && fail "--http 9x accepted"

start --http 0
[ -n "$PORT" ] || fail "no HTTP port in the log"
ctl format --yes >/dev/null

echo "== GET only; the exposition is clean"
for m in POST PUT DELETE PATCH; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X "$m" "$(url /metrics)")
  [ "$code" = 405 ] || fail "$m /metrics: HTTP $code, want 405"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$(url /nothing-here)")
[ "$code" = 404 ] || fail "GET /nothing-here: HTTP $code, want 404"
curl -sf "$(url /metrics)" >"$T/metrics.txt" || fail "GET /metrics"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.txt" 2>&1 || fail "promtool: $(cat "$T/promtool.txt")"
[ ! -s "$T/promtool.txt" ] || fail "promtool lint: $(cat "$T/promtool.txt")"
for fam in vsl_card_temperature_celsius vsl_card_power_watts vsl_lun_write_latency_seconds_bucket \
    vsl_lun_free_lebs vsl_card_endurance_used_ratio vsl_controller_failed_dies vsl_lun_errors_total \
    vsl_card_thermal_state vsl_card_life_remaining_ratio; do
  grep -q "^$fam{" "$T/metrics.txt" || fail "no $fam in /metrics"
done

echo "== a real Prometheus scrapes vsld while fio writes"
PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$T/prom"
cat >"$T/prom/prometheus.yml" <<CFG
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vsld
    static_configs:
      - targets: ['127.0.0.1:$PORT']
rule_files: ['$DOCS/alerts.rules.yml']
CFG
prometheus --config.file="$T/prom/prometheus.yml" --storage.tsdb.path="$T/prom/data" \
  --web.listen-address="127.0.0.1:$PPORT" >"$T/prom/log" 2>&1 &
PROM=$!
fio --name=w --ioengine=nbd --uri="nbd+unix:///lun0?socket=$T/vsld-nbd.sock" --rw=randwrite --bs=4k \
  --iodepth=8 --size=64m --time_based --runtime=14 --output="$T/fio.txt" &
FIO=$!
query() {  # query PROMQL -> the first result's value, or nothing
  curl -s "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null
}
positive() { v=$(query "$1"); [ -n "$v" ] && python3 -c "import sys; sys.exit(0 if float('$v') > 0 else 1)"; }
wait_for 'positive "sum(rate(vsl_lun_writes_total[5s]))"' "Prometheus to see a write rate"
wait_for 'positive "vsl_card_temperature_celsius"' "Prometheus to see the temperature"
wait_for 'positive "histogram_quantile(0.99, sum by (le) (rate(vsl_lun_write_latency_seconds_bucket[5s])))"' \
  "Prometheus to see a write latency quantile"
echo "   write rate $(query 'sum(rate(vsl_lun_writes_total[5s]))')/s, temperature $(query vsl_card_temperature_celsius) C," \
  "p99 write $(query 'histogram_quantile(0.99, sum by (le) (rate(vsl_lun_write_latency_seconds_bucket[5s])))') s"
wait "$FIO" || fail "fio: $(cat "$T/fio.txt")"

echo "== alerts: a hot card and a dead die, everywhere they should show"
ctl sim-environment --ambient 50 >/dev/null
ctl fail-die --lun 1 --die 2 >/dev/null
for a in temperature_warning die_failed; do
  wait_for "grep -q 'vsl_alert_active{alert=\"$a\"' <<<\"\$(curl -sf '$(url /metrics)')\"" "$a in /metrics"
  wait_for "grep -q '^$a raised' '$T/hook.log' 2>/dev/null" "the hook to run for $a"
  grep -q "alert raised: $a" "$T/vsld.log" || fail "no log line for $a"
  ctl status | grep -q "ALERT [a-z]* $a:" || fail "vslctl status does not show $a"
  ctl --json status | python3 -c "
import json,sys
names=[a['name'] for a in json.load(sys.stdin)['monitor']['alerts']]
assert '$a' in names, names" || fail "status --json lacks $a"
done
ctl monitor --interval 0.3 --count 2 >"$T/monitor.txt" || fail "vslctl monitor"
grep -q "ALERT critical die_failed" "$T/monitor.txt" || fail "vslctl monitor shows no alert: $(cat "$T/monitor.txt")"
grep -Eq "lun0 +online" "$T/monitor.txt" || fail "vslctl monitor shows no LUN: $(cat "$T/monitor.txt")"
grep -q "write MB/s" "$T/monitor.txt" || fail "vslctl monitor has no rate columns"
ctl sim-environment --ambient 25 >/dev/null
wait_for "grep -q '^temperature_warning cleared' '$T/hook.log'" "temperature_warning to clear"
# Fetched whole, then matched: `curl | grep -q` under pipefail fails when grep stops
# reading before curl has written the rest (SIGPIPE).
grep -q 'vsl_alerts_raised_total{alert="die_failed"} 1' <<<"$(curl -sf "$(url /metrics)")" || fail "raises not counted"

echo "== the shipped rules and dashboard against this Prometheus"
wait_for "curl -s 'http://127.0.0.1:$PPORT/api/v1/alerts' | grep -q '\"alertname\":\"VslDieFailed\"'" \
  "Prometheus's VslDieFailed rule to fire"
curl -sf "$(url /metrics)" >"$T/metrics2.txt"
python3 - "$PPORT" "$DOCS" "$T/metrics.txt" "$T/metrics2.txt" <<'PY' || fail "rules or dashboard"
import json, re, sys, urllib.parse, urllib.request
port, docs = sys.argv[1], sys.argv[2]
exposed = set()
for f in sys.argv[3:]:
    for line in open(f):
        if line.startswith("# TYPE "):
            exposed.add(line.split()[2])
def api(path, **q):
    url = f"http://127.0.0.1:{port}/api/v1/{path}?" + urllib.parse.urlencode(q)
    return json.load(urllib.request.urlopen(url))
rules = [r for g in api("rules")["data"]["groups"] for r in g["rules"]]
assert len(rules) == 15, len(rules)
bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
assert not bad, bad
dash = json.load(open(f"{docs}/grafana-dashboard.json"))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
exprs += [r["query"] for r in rules]
for e in exprs:
    q = e.replace("$card", ".*").replace("$__rate_interval", "5s")
    r = api("query", query=q)
    assert r["status"] == "success", (e, r)
    for name in re.findall(r"\bvsl_[a-z_]+", q):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in exposed or base in exposed, (name, e)
print(f"   {len(rules)} rules healthy, {len(exprs)} queries valid against vsld's metrics")
PY
kill -TERM "$PROM"
wait "$PROM" || true
PROM=""

echo "== history survives a restart (now over HTTPS on any address); a corrupt line is skipped"
cat >"$T/ca.info" <<I
cn = vsl test ca
ca
cert_signing_key
expiration_days = 2
I
cat >"$T/server.info" <<I
cn = 127.0.0.1
ip_address = 127.0.0.1
tls_www_server
encryption_key
signing_key
expiration_days = 2
I
certtool --generate-privkey --outfile "$T/ca-key.pem" 2>/dev/null
certtool --generate-self-signed --load-privkey "$T/ca-key.pem" --template "$T/ca.info" --outfile "$T/ca-cert.pem" 2>/dev/null
certtool --generate-privkey --outfile "$T/server-key.pem" 2>/dev/null
certtool --generate-certificate --load-privkey "$T/server-key.pem" --load-ca-certificate "$T/ca-cert.pem" \
  --load-ca-privkey "$T/ca-key.pem" --template "$T/server.info" --outfile "$T/server-cert.pem" 2>/dev/null
curl -sf "$(url '/api/history?card=0&max=100000')" >"$T/h1.json"
n1=$(python3 -c "import json; print(len(json.load(open('$T/h1.json'))['samples']))")
[ "$n1" -ge 10 ] || fail "only $n1 history samples"
stop
echo '{"tier": "fine", "t": "torn' >>"$T/card/monitor-history.jsonl"
start --http 0.0.0.0:0 --http-allow-remote --http-tls --tls-cert "$T/server-cert.pem" --tls-key "$T/server-key.pem"
SCHEME=https
grep -q "serving https://0.0.0.0:$PORT/" "$T/vsld.log" || fail "not serving HTTPS on every address"
command curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null 2>&1 && fail "plain HTTP answered on the HTTPS port"
grep -q '^vsl_up 1' <<<"$(curl -sf "$(url /metrics)")" || fail "GET /metrics over HTTPS"
grep -q "could not be read and were skipped" "$T/vsld.log" || fail "the corrupt line went unremarked"
curl -sf "$(url '/api/history?card=0&max=100000')" >"$T/h2.json" || fail "GET /api/history after the restart"
python3 - "$T/h1.json" "$T/h2.json" <<'PY' || fail "history lost across the restart"
import json, sys
a = json.load(open(sys.argv[1]))["samples"]
b = json.load(open(sys.argv[2]))["samples"]
tb = {s["t"] for s in b}
assert all(s["t"] in tb for s in a), (len(a), len(b))
PY
curl -s -o /dev/null -w '%{http_code}' "$(url '/api/history?card=7')" | grep -q 400 || fail "a bad card is not refused"
stop
echo "PASS"
