#!/usr/bin/python3
"""fio over NBD: vsld serving a LUN of the simulated card, against `nbdkit memory` of the
same size, same client, same run (docs/nbd.md).

  nbd_bench.py VSLD VSLCTL [--seconds 5] [--region-mib 512] [--quick] [--out FILE.md]

Workloads: 4 KiB random read and random write, queue depth 1 and 32, 1 and 4 connections
(fio's nbd engine, one connection per job). Both targets are preconditioned over the same
region first (written once sequentially), so reads hit mapped data. For each workload the
two targets run back to back, so host noise falls on both; the report gives IOPS, p99
latency and the ratio vsld / nbdkit. vsld's figures include the card model: its NAND
timing (the duo-slc-small profile in real time) and its CPU cost on this same machine.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import stop_all, wait_for  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vsld")
ap.add_argument("vslctl")
ap.add_argument("--seconds", type=float, default=5)
ap.add_argument("--region-mib", type=int, default=512)
ap.add_argument("--quick", action="store_true", help="1 s per run over 64 MiB (the suite's smoke run)")
ap.add_argument("--out", help="write the markdown report here too")
a = ap.parse_args()
if a.quick:
    a.seconds, a.region_mib = 1, 64
for tool in ("fio", "nbdkit"):
    if shutil.which(tool) is None:
        print("SKIP: %s is not installed (scripts/setup installs it)" % tool)
        sys.exit(77)

t = tempfile.mkdtemp()
procs = []


def cleanup():
    stop_all(procs, 30)
    shutil.rmtree(t, ignore_errors=True)




try:
    ctl = [a.vslctl, "--socket", t + "/vsld.sock"]
    subprocess.run([a.vslctl, "create-card", t + "/card", "--profile", "duo-slc-small"], check=True,
                   stdout=subprocess.DEVNULL)
    log = open(t + "/vsld.log", "w")
    vsld = subprocess.Popen([a.vsld, "--card", t + "/card", "--socket", t + "/vsld.sock"], stdout=log, stderr=log)
    procs.append(vsld)
    wait_for(t + "/vsld.sock", vsld)
    subprocess.run(ctl + ["format", "--yes"], check=True, stdout=subprocess.DEVNULL)
    wait_for(t + "/vsld-nbd.sock", vsld)
    size = int(subprocess.run(["nbdinfo", "--size", "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t],
                              check=True, capture_output=True, text=True).stdout)
    kit = subprocess.Popen(["nbdkit", "--foreground", "--unix", t + "/kit.sock", "memory", "size=%d" % size],
                           stdout=log, stderr=log)
    procs.append(kit)
    wait_for(t + "/kit.sock", kit)
    targets = {"vsld": "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t,
               "nbdkit memory": "nbd+unix:///?socket=%s/kit.sock" % t}
    region = a.region_mib << 20

    def fio(uri, rw, qd, jobs, seconds=None, bs="4k"):
        cmd = ["fio", "--name=b", "--ioengine=nbd", "--uri=" + uri, "--rw=" + rw, "--bs=" + bs,
               "--iodepth=%d" % qd, "--numjobs=%d" % jobs, "--group_reporting", "--size=%d" % region,
               "--output-format=json", "--output=" + t + "/fio.json"]
        if seconds:
            cmd += ["--time_based", "--runtime=%gs" % seconds, "--ramp_time=0.2s"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        j = json.load(open(t + "/fio.json"))["jobs"][0]
        side = j["read"] if "read" in rw else j["write"]
        p99 = side["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1000
        return side["iops"], p99

    for name, uri in targets.items():
        fio(uri, "write", 16, 1, bs="1m")  # precondition: the region written once
    rows = []
    for rw in ("randread", "randwrite"):
        for qd in (1, 32):
            for jobs in (1, 4):
                r = {"workload": "4K %s QD%d x%d conn" % (rw, qd, jobs)}
                for name, uri in targets.items():
                    r[name] = fio(uri, rw, qd, jobs, a.seconds)
                rows.append(r)
    out = ["| workload | vsld IOPS | vsld p99 (us) | nbdkit memory IOPS | nbdkit p99 (us) | vsld / nbdkit |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        (vi, vp), (ki, kp) = r["vsld"], r["nbdkit memory"]
        out.append("| %s | %.0f | %.0f | %.0f | %.0f | %.2f |" % (r["workload"], vi, vp, ki, kp, vi / ki if ki else 0))
    report = "\n".join(out)
    print("fio %gs per run over %d MiB of a %d-byte export\n" % (a.seconds, a.region_mib, size))
    print(report)
    if a.out:
        open(a.out, "w").write(report + "\n")
    bad = [r["workload"] for r in rows if r["vsld"][0] <= 0 or r["nbdkit memory"][0] <= 0]
    if bad:
        sys.exit("no I/O measured for: %s" % bad)
finally:
    cleanup()
