#!/usr/bin/python3
"""The monitor's cost to the I/O it watches (docs/monitoring.md, "Cost"): fio writing over
NBD to vsld, in rounds alternating no scraper and a scraper fetching /metrics every
`--scrape-interval` seconds (default 1 s: fifteen times Prometheus's usual 15 s), same run,
same card; plus the CPU vsld spends per scrape, measured over a burst of scrapes with no
load (its utime+stime from /proc).

  monitor_bench.py VSLD VSLCTL [--seconds 6] [--pairs 3] [--timing none|model] [--quick]
                   [--out FILE.md]

The card runs zero-time by default (--timing none), so the host CPU is the bottleneck and
any cost of scraping shows in IOPS instead of hiding behind NAND time; both cores are
shared by fio, vsld and the scraper, as in production on a small host.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import stop_all, wait_for  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vsld")
ap.add_argument("vslctl")
ap.add_argument("--seconds", type=float, default=6)
ap.add_argument("--pairs", type=int, default=4)
ap.add_argument("--scrape-interval", type=float, default=1.0)
ap.add_argument("--timing", default="none", choices=["none", "model"])
ap.add_argument("--quick", action="store_true", help="1 pair of 2 s rounds")
ap.add_argument("--out")
a = ap.parse_args()
if a.quick:
    a.seconds, a.pairs = 2, 1
if shutil.which("fio") is None:
    print("SKIP: fio is not installed (scripts/setup installs it)")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="vsl-monbench-")
sock = os.path.join(tmp, "vsld.sock")
subprocess.run([a.vslctl, "create-card", os.path.join(tmp, "card"), "--profile", "duo-slc-small", "--blocks", "32"],
               check=True, stdout=subprocess.DEVNULL)
log = open(os.path.join(tmp, "vsld.log"), "w")
vsld = subprocess.Popen([a.vsld, "--card", os.path.join(tmp, "card"), "--socket", sock, "--ublk", "off",
                         "--timing", a.timing, "--http", "0", "--monitor-interval", "10", "--log-level", "warn"],
                        stdout=log, stderr=subprocess.STDOUT)
procs = [vsld]
try:
    wait_for(sock, vsld)
    for _ in range(200):
        if subprocess.run([a.vslctl, "--socket", sock, "--json", "status"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            break
        time.sleep(0.05)
    subprocess.run([a.vslctl, "--socket", sock, "format", "--yes"], check=True, stdout=subprocess.DEVNULL)
    # The port: from the HTTP server's listening socket in /proc (the log is at warn level).
    port = None
    inodes = {os.readlink(f"/proc/{vsld.pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{vsld.pid}/fd")
              if os.readlink(f"/proc/{vsld.pid}/fd/{fd}").startswith("socket:")}
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:
            port = int(f[1].split(":")[1], 16)
    if port is None:
        sys.exit("vsld has no HTTP listener")
    url = f"http://127.0.0.1:{port}/metrics"

    def cpu_s():
        st = open(f"/proc/{vsld.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")

    # Cost of one scrape, idle: CPU in vsld and wall time at the client.
    urllib.request.urlopen(url).read()
    n = 200
    c0, t0 = cpu_s(), time.monotonic()
    size = 0
    for _ in range(n):
        size = len(urllib.request.urlopen(url).read())
    scrape_cpu_ms = (cpu_s() - c0) / n * 1e3
    scrape_wall_ms = (time.monotonic() - t0) / n * 1e3

    def fio_round(scrape):
        stop = threading.Event()
        scrapes = [0]

        def scraper():
            while not stop.wait(a.scrape_interval):
                urllib.request.urlopen(url).read()
                scrapes[0] += 1
        th = threading.Thread(target=scraper)
        if scrape:
            th.start()
        out = subprocess.run(["fio", "--name=w", "--ioengine=nbd", f"--uri=nbd+unix:///lun0?socket={tmp}/vsld-nbd.sock",
                              "--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=256m", "--time_based",
                              f"--runtime={a.seconds}", "--output-format=json"],
                             check=True, capture_output=True, text=True).stdout
        stop.set()
        if scrape:
            th.join()
        return json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"], scrapes[0]

    # Warm-up: the region written once in full, so every round overwrites mapped data.
    subprocess.run(["fio", "--name=fill", "--ioengine=nbd", f"--uri=nbd+unix:///lun0?socket={tmp}/vsld-nbd.sock",
                    "--rw=write", "--bs=1m", "--iodepth=4", "--size=256m", "--output=/dev/null"], check=True)
    fio_round(False)
    off, on, scrapes = [], [], 0
    for i in range(a.pairs):  # ABBA order, so a drift over the run falls on both sides
        for scrape in ((False, True) if i % 2 == 0 else (True, False)):
            iops, k = fio_round(scrape)
            (on if scrape else off).append(iops)
            scrapes += k
    ratio = statistics.mean(on) / statistics.mean(off)
    spread = (max(off) - min(off)) / statistics.mean(off)
finally:
    stop_all(procs)
    shutil.rmtree(tmp, ignore_errors=True)

report = f"""| measure | value |
|---|---|
| 4 KiB random write IOPS, no scraper (mean of {a.pairs} x {a.seconds:g} s) | {statistics.mean(off):,.0f} |
| same, scraped every {a.scrape_interval:g} s ({scrapes} scrapes) | {statistics.mean(on):,.0f} |
| ratio scraped / not | {ratio:.3f} |
| spread of the unscraped rounds (max-min)/mean: the noise floor | {spread:.1%} |
| vsld CPU per scrape (idle, {n} scrapes) | {scrape_cpu_ms:.2f} ms |
| wall time per scrape at the client | {scrape_wall_ms:.2f} ms |
| exposition size | {size:,} bytes |
| CPU share at Prometheus's 15 s interval | {scrape_cpu_ms / 1e3 / 15:.4%} of one core |
"""
print(f"card timing {a.timing}; fio randwrite 4 KiB QD16 over NBD, {a.pairs} pairs of {a.seconds:g} s rounds\n")
print(report)
if a.out:
    with open(a.out, "w") as f:
        f.write(report)
