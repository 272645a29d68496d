"""The real-time and zero-time parts of the performance report (bench/perf_report.py):
vsld serving a duo-slc-small card, on the modelled card or with NAND time taken out
(--timing none), against `nbdkit memory` of the same size in the same run: fio over NBD
(the block path), vsl-bench through the SDK attached and over libnbd, vsld's memory and
attach times, and the FTL's own CPU per I/O (perf_zerotime.run_ftl_cpu)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from procs import stop_all, wait_for
from perf_zerotime import run_ftl_cpu

FIO_MIX = {  # models.md's workloads; sizes under the 4 KiB sector go as 4 KiB
    "4k-randread": ["--rw=randread", "--bs=4k"],
    "4k-randwrite": ["--rw=randwrite", "--bs=4k"],
    "8k-randrw-70": ["--rw=randrw", "--rwmixread=70", "--bs=8k"],
    "fileserver": ["--rw=randrw", "--rwmixread=80", "--bssplit=4k/80:8k/2:16k/4:32k/4:64k/10"],
    "webserver": ["--rw=randread", "--bssplit=4k/68:8k/15:16k/2:32k/6:64k/7:128k/1:512k/1"],
}


ZERO_TIME_ROWS = (("4k-randread", 1, 1), ("4k-randread", 4, 4), ("4k-randwrite", 1, 1), ("4k-randwrite", 4, 4),
                  ("8k-randrw-70", 1, 1), ("8k-randrw-70", 4, 4))


def run_zerotime(build, quick):
    """The host path alone: vsld on a zero-time card (--timing none) against nbdkit memory."""
    return run_realtime(build, quick, timing="none")


def run_realtime(build, quick, timing="model"):
    for tool in ("fio", "nbdkit", "nbdinfo"):
        if shutil.which(tool) is None:
            return {"skipped": "%s is not installed (scripts/setup installs it)" % tool}
    vsld_exe = os.path.join(build, "tools", "vsld")
    vslctl = os.path.join(build, "tools", "vslctl")
    vsl_bench = os.path.join(build, "tools", "vsl-bench")
    seconds = 1 if quick else 5
    region_mib = 64 if quick else 256
    # The card's image in RAM where the machine has a tmpfs, as nbdkit memory's data is:
    # on a disk file system its mapped pages are written back and faulted in again, which
    # would be the page cache's cost, not the host path's.
    shm = os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
    t = tempfile.mkdtemp(dir="/dev/shm" if shm else None)
    procs = []
    res = {"seconds": seconds, "region_mib": region_mib, "rows": [], "timing": timing,
           "card_in": "/dev/shm" if shm else tempfile.gettempdir()}
    state = {}

    def start():
        log = open(t + "/vsld.log", "a")
        for s in ("vsld.sock", "vsld-nbd.sock", "vsld-sdk.sock"):
            try:
                os.unlink(os.path.join(t, s))
            except OSError:
                pass
        t0 = time.time()
        p = subprocess.Popen([vsld_exe, "--card", t + "/card", "--socket", t + "/vsld.sock", "--ublk", "off",
                              "--timing", timing], stdout=log, stderr=log)
        procs.append(p)
        state["vsld"] = p
        wait_for(t + "/vsld.sock", p)
        wait_for(t + "/vsld-nbd.sock", p)
        return t0

    def ready():
        # Every LUN online: the NBD export of the last LUN answers and status says online.
        r = subprocess.run([vslctl, "--socket", t + "/vsld.sock", "--json", "status"], capture_output=True, text=True)
        if r.returncode != 0:
            return False
        states = re.findall(r'"state":\s*"([a-z_-]+)"', r.stdout)
        lun_states = [s for s in states if s in ("online", "offline", "attaching", "detaching", "failed",
                                                  "unformatted")]
        return bool(lun_states) and all(s == "online" for s in lun_states)

    def wait_ready(t0):
        for _ in range(6000):
            if ready():
                return time.time() - t0
            time.sleep(0.01)
        sys.exit("vsld's LUNs never came online; log in " + t)

    def fio(uri, mix, jobs, qd, extra=()):
        cmd = ["fio", "--name=b", "--ioengine=nbd", "--uri=" + uri, "--iodepth=%d" % qd, "--numjobs=%d" % jobs,
               "--group_reporting", "--size=%dM" % region_mib, "--time_based", "--runtime=%gs" % seconds,
               "--ramp_time=0.5s", "--output-format=json", "--output=" + t + "/fio.json"] + FIO_MIX[mix] + list(extra)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        j = json.load(open(t + "/fio.json"))["jobs"][0]
        iops = j["read"]["iops"] + j["write"]["iops"]
        sides = [j[s] for s in ("read", "write") if j[s]["total_ios"] > 0]
        n = sum(s["total_ios"] for s in sides)
        avg = sum(s["clat_ns"]["mean"] * s["total_ios"] for s in sides) / n / 1000 if n else 0
        p99 = max(s["clat_ns"].get("percentile", {}).get("99.000000", 0) for s in sides) / 1000
        mx = max(s["clat_ns"]["max"] for s in sides) / 1000
        return {"iops": iops, "avg_us": avg, "p99_us": p99, "max_us": mx,
                "errors": j.get("error", 0)}

    def vb(target, mix, jobs, qd):
        span = str(region_mib * 256)  # 4 KiB sectors
        r = subprocess.run([vsl_bench, "--json"] + target + ["--workload", mix, "--jobs", str(jobs), "--iodepth",
                                                              str(qd), "--runtime", str(seconds), "--ramp", "0.5",
                                                              "--span", span], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("vsl-bench %s failed: %s %s" % (" ".join(target), r.stdout, r.stderr))
        x = json.loads(r.stdout)["result"]
        return {"iops": x["iops"], "avg_us": x["lat_us"]["avg"], "p99_us": x["lat_us"].get("p99", 0),
                "max_us": x["lat_us"].get("max", 0), "errors": x.get("errors", 0)}

    try:
        subprocess.run([vslctl, "create-card", t + "/card", "--profile", "duo-slc-small"], check=True,
                       stdout=subprocess.DEVNULL)
        t0 = start()
        subprocess.run([vslctl, "--socket", t + "/vsld.sock", "format", "--yes"], check=True,
                       stdout=subprocess.DEVNULL)
        wait_ready(t0)
        size = int(subprocess.run(["nbdinfo", "--size", "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t], check=True,
                                  capture_output=True, text=True).stdout)
        log = open(t + "/kit.log", "w")
        kit = subprocess.Popen(["nbdkit", "--foreground", "--unix", t + "/kit.sock", "memory", "size=%d" % size],
                               stdout=log, stderr=log)
        procs.append(kit)
        wait_for(t + "/kit.sock", kit)
        vsld_uri = "nbd+unix:///lun0?socket=%s/vsld-nbd.sock" % t
        kit_uri = "nbd+unix:///?socket=%s/kit.sock" % t
        sdk = ["--attach", t + "/vsld-sdk.sock", "--lun", "lun0"]
        for uri in (vsld_uri, kit_uri):
            if timing == "none":
                # Zero time: first the whole export written twice over and trimmed, both
                # sides alike, so the measured writes land where the store has written
                # before, as on a card in use. For vsld that means flash pages programmed
                # before, whose image pages this process has touched: without it every
                # write would carry this machine's first-touch cost
                # (bench/first_touch_probe), which nbdkit's rewrites of its own pages do
                # not. Twice, so the log runs through the over-provisioned blocks too
                # (vsl-bench --fill-trim says why).
                for rw, bs in (("write", "1m"), ("write", "1m"), ("trim", "64m")):
                    subprocess.run(["fio", "--name=f", "--ioengine=nbd", "--uri=" + uri, "--rw=" + rw, "--bs=" + bs,
                                    "--iodepth=8", "--size=%d" % size], check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            # Both written once over the region.
            subprocess.run(["fio", "--name=p", "--ioengine=nbd", "--uri=" + uri, "--rw=write", "--bs=1m",
                            "--iodepth=8", "--size=%dM" % region_mib], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        res["lun_bytes"] = size
        res["fill_trim"] = timing == "none"
        plan = ZERO_TIME_ROWS if timing == "none" else [(m, j, q) for m in FIO_MIX for j, q in ((1, 1), (4, 4))]
        for mix, jobs, qd in plan:
            if True:
                row = {"workload": mix, "jobs": jobs, "qd": qd}
                # Back to back, so host noise falls on both sides of each ratio.
                row["block_vsld"] = fio(vsld_uri, mix, jobs, qd)
                row["block_nbdkit"] = fio(kit_uri, mix, jobs, qd)
                row["sdk_vsld"] = vb(sdk, mix, jobs, qd)
                row["sdk_nbdkit"] = vb(["--nbd", kit_uri], mix, jobs, qd)
                row["nbd_vsld"] = vb(["--nbd", vsld_uri], mix, jobs, qd)
                print("%s: %s %dx%d: block %.2f, sdk %.2f of nbdkit" % (
                    "zerotime" if timing == "none" else "realtime", mix, jobs, qd, row["block_vsld"]["iops"] / max(1, row["block_nbdkit"]["iops"]),
                    row["sdk_vsld"]["iops"] / max(1, row["sdk_nbdkit"]["iops"])), flush=True)
                res["rows"].append(row)
        if timing == "none":
            # In-process SDK on a zero-time card: CPU per I/O of the whole process (FTL,
            # card model, SDK), QD1 4 KiB writes and reads; vsld is stopped first (the card
            # has one owner).
            state["vsld"].send_signal(signal.SIGTERM)
            state["vsld"].wait(120)
            res["inproc"] = {}
            for mix in ("4k-randwrite", "4k-randread"):
                r = subprocess.run([vsl_bench, "--json", "--card", t + "/card", "--lun", "0", "--timing", "none",
                                    "--workload", mix, "--jobs", "1", "--iodepth", "1", "--runtime", str(seconds),
                                    "--ramp", "0.5", "--span", str(region_mib * 256), "--fill-trim",
                                    "--precondition"], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit("vsl-bench in-process failed: %s %s" % (r.stdout, r.stderr))
                x = json.loads(r.stdout)["result"]
                res["inproc"][mix] = {"iops": x["iops"], "avg_us": x["lat_us"]["avg"], "cpu_s": x["cpu_s"],
                                      "cpu_us_per_io": x["cpu_us_per_io"], "allocs_per_io": x["allocs_per_io"],
                                      "errors": x.get("errors", 0)}
                print("zerotime: in-process %s 1x1: %.0f IOPS, %.2f us of CPU and %.3f heap allocations per I/O (the whole "
                      "process)" % (mix, x["iops"], x["cpu_us_per_io"], x["allocs_per_io"]), flush=True)
                if x["allocs_per_io"] > 0.5:  # the SDK, card and FTL allocate nothing per I/O (issue 29)
                    sys.exit("in-process %s: %.2f heap allocations per I/O" % (mix, x["allocs_per_io"]))
            # What a process's first write to an existing page of a shared mapping costs
            # here: the in-process rows program into image pages new to their process.
            r = subprocess.run([os.path.join(build, "bench", "first_touch_probe")], capture_output=True, text=True)
            if r.returncode == 0:
                res["first_touch"] = json.loads(r.stdout)
                print("zerotime: first write to a page by a process: %.1f us per 8,640-byte slot (%.2f after)" % (
                    res["first_touch"]["first_us_per_slot"], res["first_touch"]["second_us_per_slot"]), flush=True)
            res["ftl_cpu"] = run_ftl_cpu(build, quick)
            return res
        pid = state["vsld"].pid
        status = open("/proc/%d/status" % pid).read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
        hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) * 1024
        kit_rss = int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%d/status" % kit.pid).read()).group(1)) * 1024
        res["memory"] = {"vsld_rss_bytes": rss, "vsld_hwm_bytes": hwm, "nbdkit_rss_bytes": kit_rss,
                         "card_user_bytes": size * 4, "written_bytes": (region_mib << 20)}
        # Attach after a clean stop (SIGTERM: checkpoints) and after SIGKILL under writes.
        att = {}
        for trial in range(3):
            state["vsld"].send_signal(signal.SIGTERM)
            state["vsld"].wait(120)
            att.setdefault("clean_s", []).append(wait_ready(start()))
            w = subprocess.Popen(["fio", "--name=k", "--ioengine=nbd", "--uri=" + vsld_uri, "--rw=randwrite",
                                  "--bs=4k", "--iodepth=16", "--size=%dM" % region_mib, "--time_based",
                                  "--runtime=30s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.5)
            state["vsld"].send_signal(signal.SIGKILL)
            state["vsld"].wait(30)
            w.wait(60)
            att.setdefault("unclean_s", []).append(wait_ready(start()))
        res["attach"] = att
    finally:
        stop_all(procs, 60)
        shutil.rmtree(t, ignore_errors=True)
    return res
