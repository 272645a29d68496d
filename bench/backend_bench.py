#!/usr/bin/python3
"""vsld over NBD on each card backend, same workload, same run (docs/backends.md).

  backend_bench.py VSLD VSLCTL VSL_BENCH [--seconds 8] [--quick] [--out FILE.json] [--md FILE.md]

Backends: the simulated card (sim:, in real time) with the co-simulated card's shape
(profile rtl-duo, the same blocks per die), the co-simulated RTL controller (rtl:) and the
co-simulated Alveo kernel (kernel:, its emulators' shape). For each: a fresh card,
formatted, then vsl-bench over NBD on lun0: 4 KiB random write, 4 KiB random read
(working set written first) and 64 KiB sequential write, queue depth 4. Reported: IOPS,
MB/s, and for the co-simulations the controller clock cycles simulated per wall second
(from `vslctl status --json`, device_cycles) and the share of real time that is (the
controller clock is 100 MHz on rtl:, 200 MHz on kernel:). The three run back to back on
the same machine, so host noise falls on all of them; the ratio to the simulated card is
the figure to read.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import stop_all, wait_for  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vsld")
ap.add_argument("vslctl")
ap.add_argument("vsl_bench")
ap.add_argument("--seconds", type=float, default=8)
ap.add_argument("--quick", action="store_true", help="2 s per workload (the suite's smoke run)")
ap.add_argument("--out", help="write the results (JSON) here")
ap.add_argument("--md", help="write the markdown table here")
ap.add_argument("--backends", default="sim,rtl,kernel")
a = ap.parse_args()
if a.quick:
    a.seconds = 2

BLOCKS = 40
CLOCK_MHZ = {"rtl": 100.0, "kernel": 200.0}


def status(ctl):
    return json.loads(subprocess.run(ctl + ["--json", "status"], check=True, capture_output=True, text=True).stdout)


def run_backend(kind):
    t = tempfile.mkdtemp()
    procs = []
    try:
        spec = "%s:%s/card" % (kind, t)
        create = [a.vslctl, "create-card", spec]
        if kind == "sim":
            create += ["--profile", "rtl-duo", "--blocks", str(BLOCKS)]
        elif kind == "rtl":
            create += ["--blocks", str(BLOCKS)]
        subprocess.run(create, check=True, stdout=subprocess.DEVNULL)
        ctl = [a.vslctl, "--socket", t + "/vsld.sock"]
        log = open(t + "/vsld.log", "w")
        vsld = subprocess.Popen([a.vsld, "--card", spec, "--socket", t + "/vsld.sock"], stdout=log, stderr=log)
        procs.append(vsld)
        wait_for(t + "/vsld.sock", vsld)
        t0 = time.time()
        subprocess.run(ctl + ["format", "--yes"], check=True, stdout=subprocess.DEVNULL)
        format_s = time.time() - t0
        st = status(ctl)
        lun = [l for l in st["cards"][0]["luns"] if l["name"] == "lun0"][0]
        sectors = lun["sectors"]
        span = min(sectors // 2, 1024)  # 4 MiB at most: the co-simulations move data slowly
        uri = "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t
        out = {"backend": kind, "format_s": format_s, "lun_sectors": sectors, "span_sectors": span,
               "hardware": st["cards"][0].get("hardware", ""), "workloads": {}}
        jobs = [("4k-randwrite", ["--rw", "randwrite", "--bs", "4k"]),
                ("4k-randread", ["--rw", "randread", "--bs", "4k", "--precondition"]),
                ("64k-seqwrite", ["--rw", "write", "--bs", "64k"])]
        for name, args in jobs:
            c0 = status(ctl)["cards"][0].get("device_cycles", 0)
            w0 = time.time()
            r = subprocess.run([a.vsl_bench, "--nbd", uri, "--jobs", "1", "--iodepth", "4", "--runtime",
                                str(a.seconds), "--span", str(span), "--json"] + args,
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("vsl-bench on %s failed: %s %s" % (kind, r.stdout, r.stderr))
            wall = time.time() - w0
            time.sleep(0.2)  # a sensor poll (50 ms) brings device_cycles up to date
            c1 = status(ctl)["cards"][0].get("device_cycles", 0)
            j = json.loads(r.stdout)["result"]
            cps = (c1 - c0) / wall if wall > 0 else 0
            j["cycles_per_s"] = cps
            j["realtime_share"] = cps / (CLOCK_MHZ[kind] * 1e6) if kind in CLOCK_MHZ else None
            out["workloads"][name] = j
            print("%-6s %-13s %9.1f IOPS %8.3f MiB/s  p99 %9.0f us  %s" % (
                kind, name, j["iops"], j["mib_per_s"], j["lat_us"]["p99"],
                ("%.0f cycles/s (%.4f%% of real time)" % (cps, 100 * j["realtime_share"])) if kind in CLOCK_MHZ
                else ""), flush=True)
        subprocess.run(ctl + ["status"], stdout=subprocess.DEVNULL)
        return out
    finally:
        stop_all(procs, 60)
        shutil.rmtree(t, ignore_errors=True)


results = {"seconds": a.seconds, "blocks_per_die": BLOCKS, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "backends": []}
for kind in a.backends.split(","):
    results["backends"].append(run_backend(kind))

md = ["| backend | workload | IOPS | MiB/s | p99 latency | vs sim | controller cycles/s | share of real time |",
      "|---|---|---|---|---|---|---|---|"]
base = {w: r for w, r in results["backends"][0]["workloads"].items()} if results["backends"][0]["backend"] == "sim" else {}
for b in results["backends"]:
    for w, r in b["workloads"].items():
        ratio = "%.4f" % (r["iops"] / base[w]["iops"]) if w in base and base[w]["iops"] > 0 else "-"
        cyc = "%.0f" % r["cycles_per_s"] if b["backend"] in CLOCK_MHZ else "-"
        share = "%.3f%%" % (100 * r["realtime_share"]) if r.get("realtime_share") is not None else "-"
        p99 = "> 4.29 s" if r["lat_us"]["p99"] >= 4294967 else "%.0f us" % r["lat_us"]["p99"]  # histogram's end
        md.append("| %s | %s | %.1f | %.3f | %s | %s | %s | %s |" % (
            b["backend"], w, r["iops"], r["mib_per_s"], p99, ratio, cyc, share))
md.append("")
md.append("Format time (whole card): " + ", ".join("%s %.1f s" % (b["backend"], b["format_s"]) for b in results["backends"]))
text = "\n".join(md) + "\n"
print(text)
if a.out:
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
if a.md:
    with open(a.md, "w") as f:
        f.write(text)
