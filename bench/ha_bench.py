#!/usr/bin/python3
"""Two hosts on one card (docs/ha.md): how much one host's I/O feels the other's trouble,
and how long a failover takes.

  ha_bench.py VSLD VSLCTL VSLFLASH [--seconds 8] [--pairs 3] [--failovers 3]
              [--lease-ms 1500] [--quick] [--out FILE.md]

Isolation: fio (4 KiB random writes, QD16, over NBD) on host A's lun0, in rounds that
alternate (ABBA) an undisturbed host B with a B that is, over and over for the whole
round, SIGKILLed, restarted (claiming its LUNs back, fencing its old self), its lun2 reset
and its controller reformatted. The ratio disturbed / undisturbed is the figure; the
spread of the undisturbed rounds is the noise floor it must be read against (2 cores:
fio, both hosts and the card server share them, so B's restarts also take CPU from A).

Two servers on a dual-ported card do not share CPUs; here they share two cores with fio
and the card server (whose simulation stands in for the card's hardware). So isolation is
measured twice: with B at SCHED_IDLE (chrt --idle: B gets only CPU that A, fio and the card
do not want, the nearest this machine comes to separate hosts) and with B at normal
priority (everything on the same two cores: a stress figure that measures the CPU B's
restart and format take, not the card).

Failover: a host A with fsync'd writes on lun0 is SIGKILLed; host B (--takeover auto)
claims the LUN once A's lease has run out and attaches it from flash. Reported: the time
from the kill to B's first served read, and its parts (lease left, attach).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import stop_all  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vsld")
ap.add_argument("vslctl")
ap.add_argument("vslflash")
ap.add_argument("--seconds", type=float, default=8)
ap.add_argument("--pairs", type=int, default=3)
ap.add_argument("--failovers", type=int, default=3)
ap.add_argument("--lease-ms", type=int, default=1500)
ap.add_argument("--card-nice", type=int, default=0, help="the card server's nice value (negative: the card's "
                "simulation ahead of the hosts, as hardware would be)")
ap.add_argument("--quick", action="store_true", help="1 pair of 3 s rounds, 1 failover")
ap.add_argument("--out")
ap.add_argument("--json", help="the figures as JSON (bench/perf_report.py, part 'ha')")
a = ap.parse_args()
if a.quick:
    a.seconds, a.pairs, a.failovers = 3, 1, 1
for tool in ("fio", "nbdcopy", "nbdinfo"):
    if shutil.which(tool) is None:
        print(f"SKIP: {tool} is not installed (scripts/setup installs it)")
        sys.exit(77)

# (B at SCHED_IDLE, one sequence per round) -> name
MODES = {(False, True): "one sequence per round, B at normal priority (the issue's scenario, shared CPUs)",
         (True, True): "one sequence per round, B at SCHED_IDLE (separate hosts)",
         (True, False): "back-to-back sequences all round, B at SCHED_IDLE"}
# libnbd's Python bindings (nbdsh) are Debian's: Debian's python3 first on PATH.
os.environ["PATH"] = "/usr/bin:" + os.environ.get("PATH", "")
tmp = tempfile.mkdtemp(prefix="vsl-habench-")
card = os.path.join(tmp, "card")
procs = {}
logs = open(os.path.join(tmp, "all.log"), "w")


def ctl(host, *args, check=True):
    return subprocess.run([a.vslctl, "--socket", f"{tmp}/{host}.sock", *args], check=check, capture_output=True,
                          text=True)


def uri(host, lun):
    return f"nbd+unix:///{lun}?socket={tmp}/{host}-nbd.sock"


def start_host(name, hid, luns, *extra, idle=False):
    p = subprocess.Popen((["chrt", "--idle", "0"] if idle else []) + [a.vsld, "--card", f"shared:{card}", "--host-id", str(hid), "--luns", luns, "--lease-ms",
                          str(a.lease_ms), "--socket", f"{tmp}/{name}.sock", "--ublk", "off", "--monitor-interval",
                          "0", "--log-level", "warn", *extra], stdout=logs, stderr=subprocess.STDOUT)
    procs[name] = p
    for _ in range(600):
        if os.path.exists(f"{tmp}/{name}-nbd.sock") and ctl(name, "--json", "status", check=False).returncode == 0:
            return p
        if p.poll() is not None:
            sys.exit(f"host {name} exited at start")
        time.sleep(0.05)
    sys.exit(f"host {name} did not come up")


def kill_host(name):
    p = procs.pop(name)
    p.send_signal(signal.SIGKILL)
    p.wait()


def stop_host(name):
    p = procs.pop(name)
    stop_all([p])


def lun_state(host, index):
    r = ctl(host, "--json", "status", check=False)
    if r.returncode != 0:
        return "?"
    return next(l["state"] for l in json.loads(r.stdout)["cards"][0]["luns"] if l["index"] == index)


def wait_state(host, index, state, seconds=60):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if lun_state(host, index) == state:
            return
        time.sleep(0.05)
    sys.exit(f"{host}: lun{index} never became {state}")


try:
    subprocess.run([a.vslflash, "create", card, "--profile", "duo-slc-small", "--blocks", "64"], check=True,
                   stdout=subprocess.DEVNULL)
    procs["card"] = subprocess.Popen(["nice", "-n", str(a.card_nice), a.vslflash, "serve", card], stdout=logs, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(f"{card}/card.sock"):
            break
        time.sleep(0.05)
    start_host("f", 1, "0,1,2,3")
    ctl("f", "format", "--yes")
    stop_host("f")

    # --- isolation ---
    start_host("a", 1, "0,1")
    start_host("b", 2, "2,3")
    subprocess.run(["fio", "--name=fill", "--ioengine=nbd", f"--uri={uri('a', 'lun0')}", "--rw=write", "--bs=1m",
                    "--iodepth=4", "--size=128m", "--output=/dev/null"], check=True)

    def disturb(stop, count, idle, once):
        if once:  # the scenario: one sequence, 2 s into the round
            if stop.wait(2):
                return
        while not stop.is_set() and not (once and count[0] == 1):
            kill_host("b")
            start_host("b", 2, "2,3", idle=idle)
            wait_state("b", 2, "online")
            if stop.is_set():
                break
            ctl("b", "reset", "--lun", "2")
            ctl("b", "format", "--controller", "1", "--yes")
            wait_state("b", 3, "online")
            count[0] += 1

    def fio_round(disturbed, idle, once):
        stop, count = threading.Event(), [0]
        th = threading.Thread(target=disturb, args=(stop, count, idle, once))
        if disturbed:
            th.start()
        out = subprocess.run(["fio", "--name=w", "--ioengine=nbd", f"--uri={uri('a', 'lun0')}", "--rw=randwrite",
                              "--bs=4k", "--iodepth=16", "--size=128m", "--time_based", f"--runtime={a.seconds}",
                              "--output-format=json"], check=True, capture_output=True, text=True).stdout
        stop.set()
        if disturbed:
            th.join()
        job = json.loads(out[out.index("{"):])["jobs"][0]
        if job["error"] != 0:
            sys.exit(f"fio on A saw error {job['error']}")
        return job["write"]["iops"], job["write"]["clat_ns"]["max"] / 1e6, count[0]

    fio_round(False, False, False)  # warm-up
    iso = {}
    for mode in MODES:
        idle, once = mode
        calm, busy, worst_calm, worst_busy, cycles = [], [], 0.0, 0.0, 0
        for i in range(a.pairs):
            for disturbed in ((False, True) if i % 2 == 0 else (True, False)):
                iops, worst, n = fio_round(disturbed, idle, once)
                if disturbed:
                    busy.append(iops)
                    worst_busy = max(worst_busy, worst)
                    cycles += n
                else:
                    calm.append(iops)
                    worst_calm = max(worst_calm, worst)
        iso[mode] = dict(calm=statistics.mean(calm), busy=statistics.mean(busy),
                         ratio=statistics.mean(busy) / statistics.mean(calm),
                         spread=(max(calm) - min(calm)) / statistics.mean(calm) if len(calm) > 1 else 0.0,
                         worst_calm=worst_calm, worst_busy=worst_busy, cycles=cycles)
    stop_host("a")
    stop_host("b")

    # --- failover ---
    fo = []
    start_host("b", 2, "2,3", "--takeover", "auto")
    for k in range(a.failovers):
        start_host("a", 1, "0,1")
        wait_state("a", 0, "online")
        data = os.urandom(4 << 20)
        with open(f"{tmp}/data", "wb") as f:
            f.write(data)
        subprocess.run(["nbdcopy", f"{tmp}/data", uri("a", "lun0")], check=True)
        t0 = time.monotonic()
        kill_host("a")
        read = ["nbdsh", "-u", uri("b", "lun0"), "-c",
                f"import sys; sys.stdout.buffer.write(h.pread({len(data)}, 0))"]
        while True:
            r = subprocess.run(read, capture_output=True)
            if r.returncode == 0:
                break
            time.sleep(0.01)
        t1 = time.monotonic()
        got = r.stdout
        if got != data:
            sys.exit("B does not hold what A wrote")
        st = json.loads(ctl("b", "--json", "status").stdout)["cards"][0]["luns"][0]
        fo.append(((t1 - t0) * 1e3, st.get("attach", {}).get("ms", 0.0), st.get("attach", {}).get("lebs_scanned", 0)))
        # Give the LUNs back to A for the next round (B releases; A attaches from the checkpoint).
        ctl("b", "release", "--lun", "0")
        ctl("b", "release", "--lun", "1")
finally:
    stop_all(list(procs.values()))
    shutil.rmtree(tmp, ignore_errors=True)

rows = []
for mode, name in MODES.items():
    r = iso[mode]
    rows.append(f"| {name}: A's IOPS undisturbed / disturbed ({r['cycles']} kill-restart-reset-reformat cycles) "
                f"| {r['calm']:,.0f} / {r['busy']:,.0f} |")
    rows.append(f"| {name}: ratio disturbed / undisturbed | {r['ratio']:.3f} |")
    rows.append(f"| {name}: noise floor, spread of undisturbed rounds | {r['spread']:.1%} |")
    rows.append(f"| {name}: A's worst write latency undisturbed / disturbed | {r['worst_calm']:.1f} / "
                f"{r['worst_busy']:.1f} ms |")
report = "| measure | value |\n|---|---|\n" + "\n".join(rows) + "\n" + (
    f"| failover, A killed -> B's first served read (lease {a.lease_ms} ms; {len(fo)} runs) | "
    f"{', '.join(f'{x[0]:.0f}' for x in fo)} ms |\n"
    f"| of which B's attach from flash (scan; LEBs scanned) | "
    f"{', '.join(f'{x[1]:.0f} ms ({x[2]})' for x in fo)} |\n")
print(f"duo-slc-small, 64 blocks/die, model timing; card server + two vsld hosts + fio on 2 cores\n")
print(report)
if a.out:
    with open(a.out, "w") as f:
        f.write(report)
if a.json:
    with open(a.json, "w") as f:
        json.dump({"seconds": a.seconds, "pairs": a.pairs, "lease_ms": a.lease_ms,
                   "isolation": [dict(name=MODES[m], b_idle=m[0], once=m[1], **iso[m]) for m in MODES],
                   "failover": [{"ms": x[0], "attach_ms": x[1], "lebs_scanned": x[2]} for x in fo]}, f, indent=1)
