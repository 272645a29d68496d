#!/usr/bin/python3
"""The native SDK against the block path, same card, same run (docs/sdk.md).

  sdk_bench.py VSLD VSLCTL VSL_BENCH SQLITE_BENCH [--seconds 3] [--quick] [--out FILE.md]

1. vsl-bench jobs over a 256 MiB working set written once first (models.md's workloads: 4 KiB random read and write, 8 KiB 70/30, file
   server, web server; and atomic batches of 4 vectors) through the SDK in-process, then
   with vsld up through the SDK attached and through NBD (libnbd), back to back per
   workload so host noise falls on all three. The card is the duo-slc-small profile in
   real time (NAND timing modelled), on this machine's CPU.
2. The key-value store's put and get rates (4 KiB values), in-process and attached.
3. SQLite transactions (10 rows each, one index, synchronous=FULL) on LUN 1: on ext4 over
   NBD (nbdfuse -> losetup -> mkfs.ext4 -> mount) with a rollback journal and with WAL,
   then on the same LUN through the SDK's VFS (each commit one atomic write, journal in
   memory), attached and in-process. Needs root and /dev/fuse for the ext4 runs (else
   those rows say why they are missing).
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
ap.add_argument("vsl_bench")
ap.add_argument("sqlite_bench")
ap.add_argument("--seconds", type=float, default=3)
ap.add_argument("--quick", action="store_true", help="short runs, few workloads (the suite's smoke run)")
ap.add_argument("--out", help="write the markdown report here too")
a = ap.parse_args()
workloads = ["4k-randread", "4k-randwrite", "8k-randrw-70", "fileserver", "webserver", "atomic4"]
txns = 2000
if a.quick:
    a.seconds, workloads, txns = 1, ["4k-randread", "4k-randwrite", "atomic4"], 200

t = tempfile.mkdtemp()
procs = []
mounts = []
report = []


def out(line=""):
    print(line, flush=True)
    report.append(line)


def cleanup():
    for m in reversed(mounts):
        subprocess.run(m, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    stop_all(procs, 60)
    shutil.rmtree(t, ignore_errors=True)




vsld = None


def start_vsld():
    global vsld
    log = open(t + "/vsld.log", "a")
    vsld = subprocess.Popen([a.vsld, "--card", t + "/card", "--socket", t + "/vsld.sock", "--ublk", "off"],
                            stdout=log, stderr=log)
    procs.append(vsld)
    wait_for(t + "/vsld.sock", vsld)
    wait_for(t + "/vsld-sdk.sock", vsld)


def stop_vsld():
    vsld.send_signal(signal.SIGTERM)
    vsld.wait(120)


def die(msg):
    try:
        with open(t + "/vsld.log") as f:
            tail = f.readlines()[-15:]
    except OSError:
        tail = []
    sys.exit(msg + "\n--- vsld.log (tail) ---\n" + "".join(tail))


def bench(args):
    r = subprocess.run([a.vsl_bench, "--json"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("vsl-bench %s failed: %s %s" % (" ".join(args), r.stdout, r.stderr))
    return json.loads(r.stdout)


SPAN = "65536"  # 256 MiB working set (a quarter of a duo-slc-small LUN), written once first


def job(w):
    args = ["--runtime", str(a.seconds), "--ramp", "0.5", "--jobs", "2", "--iodepth", "16", "--span", SPAN]
    if w == "atomic4":
        return args + ["--rw", "randwrite", "--bs", "16k", "--atomic", "4"]
    return args + ["--workload", w]


try:
    subprocess.run([a.vslctl, "create-card", t + "/card", "--profile", "duo-slc-small"], check=True,
                   stdout=subprocess.DEVNULL)
    start_vsld()
    subprocess.run([a.vslctl, "--socket", t + "/vsld.sock", "format", "--yes"], check=True, stdout=subprocess.DEVNULL)
    stop_vsld()
    sdk_sock = t + "/vsld-sdk.sock"
    nbd_uri = "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t
    results = {}
    bench(["--card", t + "/card", "--lun", "0", "--precondition", "--span", SPAN, "--rw", "read", "--runtime", "0.1",
           "--ramp", "0"])
    for w in workloads:
        results[(w, "in-process")] = bench(["--card", t + "/card", "--lun", "0"] + job(w))["result"]
        start_vsld()
        results[(w, "attached")] = bench(["--attach", sdk_sock, "--lun", "lun0"] + job(w))["result"]
        if w != "atomic4":
            results[(w, "nbd")] = bench(["--nbd", nbd_uri] + job(w))["result"]
        stop_vsld()
    # The SDK's own paths allocate nothing per I/O (issue 29): in-process, the whole stack
    # (SDK, FTL, card); attached, the application's side. Atomic batches build their
    # vectors per request and are not held to it.
    for (w, p), r in results.items():
        if p != "nbd" and w != "atomic4" and r.get("allocs_per_io", 0) > 0.5:
            die("%s %s: %.2f heap allocations per I/O" % (w, p, r["allocs_per_io"]))
    out("### I/O through the SDK and through NBD (duo-slc-small, 2 jobs x QD16, %g s each)" % a.seconds)
    out()
    out("| workload | path | IOPS | MiB/s | avg us | p99 us | p99.9 us | max us | vs NBD |")
    out("|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        base = results.get((w, "nbd"))
        for p in ("in-process", "attached", "nbd"):
            r = results.get((w, p))
            if r is None:
                continue
            l = r["lat_us"]
            ratio = "%.2f" % (r["iops"] / base["iops"]) if base else "-"
            out("| %s | %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %s |" % (
                w if w != "atomic4" else "16 KiB atomic, 4 vectors", p, r["iops"], r["mib_per_s"], l["avg"],
                l["p99"], l["p999"], l["max"], ratio))
    out()
    # Key-value rates.
    kv_keys = "2000" if a.quick else "20000"
    kv_in = bench(["--card", t + "/card", "--lun", "2", "--kv", "--kv-keys", kv_keys, "--kv-value", "4096"])["kv"]
    start_vsld()
    kv_at = bench(["--attach", sdk_sock, "--lun", "lun3", "--kv", "--kv-keys", kv_keys, "--kv-value", "4096"])["kv"]
    out("### Key-value store (4 KiB values, %s keys, one thread)" % kv_keys)
    out()
    out("| path | puts/s | gets/s |")
    out("|---|---|---|")
    out("| in-process | %.0f | %.0f |" % (kv_in["puts_per_s"], kv_in["gets_per_s"]))
    out("| attached | %.0f | %.0f |" % (kv_at["puts_per_s"], kv_at["gets_per_s"]))
    out()
    # SQLite on LUN 1: ext4 over NBD, then the VFS on the same LUN.
    sq = {}
    why = None
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or shutil.which("nbdfuse") is None:
        why = "needs root, /dev/fuse and nbdfuse"
    else:
        os.makedirs(t + "/fuse")
        os.makedirs(t + "/mnt")
        fuse = subprocess.Popen(["nbdfuse", t + "/fuse", "nbd+unix:///lun1?socket=%s/vsld-nbd.sock" % t])
        procs.append(fuse)
        mounts.append(["fusermount3", "-u", t + "/fuse"])
        wait_for(t + "/fuse/nbd", fuse)
        loop = subprocess.run(["losetup", "--find", "--show", "--sector-size", "4096", "--direct-io=on",
                               t + "/fuse/nbd"], capture_output=True, text=True)
        if loop.returncode != 0:
            why = "losetup: " + loop.stderr.strip()
        else:
            dev = loop.stdout.strip()
            mounts.append(["losetup", "-d", dev])
            subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
            subprocess.run(["mount", dev, t + "/mnt"], check=True)
            mounts.append(["umount", t + "/mnt"])
            for j in ("delete", "wal"):
                r = subprocess.run([a.sqlite_bench, "--json", "--file", t + "/mnt/%s.db" % j, "--journal", j,
                                    "--txns", str(txns)], capture_output=True, text=True)
                if r.returncode != 0:
                    die("sqlite_bench %s failed: %s%s" % (j, r.stdout, r.stderr))
                sq["ext4 over NBD, journal " + j] = json.loads(r.stdout)
            subprocess.run(["umount", t + "/mnt"], check=True)
            subprocess.run(["losetup", "-d", dev], check=True)
            # The loop device lets go of the file asynchronously; only then can FUSE go.
            for _ in range(100):
                if not subprocess.run(["losetup", "-j", t + "/fuse/nbd"], capture_output=True,
                                      text=True).stdout.strip():
                    break
                time.sleep(0.1)
            subprocess.run(["fusermount3", "-u", t + "/fuse"], check=True)
            mounts.clear()
            fuse.wait(30)
    r = subprocess.run([a.sqlite_bench, "--json", "--attach", sdk_sock, "--lun", "lun1", "--trim-first",
                        "--txns", str(txns)], capture_output=True, text=True)
    if r.returncode != 0:
        die("sqlite_bench (VFS attached) failed: " + r.stdout + r.stderr)
    sq["SDK VFS attached (atomic commit, no journal on flash)"] = json.loads(r.stdout)
    stop_vsld()
    r = subprocess.run([a.sqlite_bench, "--json", "--card", t + "/card", "--lun", "1", "--txns", str(txns)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die("sqlite_bench (VFS in-process) failed: " + r.stdout + r.stderr)
    sq["SDK VFS in-process (atomic commit, no journal on flash)"] = json.loads(r.stdout)
    out("### SQLite transactions on LUN 1 (%d transactions of 10 rows, synchronous=FULL)" % txns)
    out()
    if why:
        out("(ext4 runs skipped: %s)" % why)
        out()
    out("| path | txn/s | commit p50 us | commit p99 us | integrity |")
    out("|---|---|---|---|---|")
    base = sq.get("ext4 over NBD, journal delete")
    for k, v in sq.items():
        ratio = " (%.1fx the rollback journal)" % (v["txn_per_s"] / base["txn_per_s"]) if base and "SDK" in k else ""
        out("| %s | %.0f%s | %.0f | %.0f | %s |" % (k, v["txn_per_s"], ratio, v["p50_us"], v["p99_us"], v["integrity"]))
        if v["errors"] != 0 or v["integrity"] != "ok":
            sys.exit("SQLite run failed: %s" % v)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(report) + "\n")
finally:
    cleanup()
