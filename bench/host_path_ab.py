#!/usr/bin/env python3
"""Side-by-side A/B of the host path: two builds of vsld/vslctl/vsl-bench, run alternately.

    python3 bench/host_path_ab.py BUILD_A BUILD_B [--rounds 2] [--seconds 3] [--timing none|model]
                                  [--a-vsld-args ARGS] [--b-vsld-args ARGS]

Each round, for each build in turn: a fresh duo-slc-small card in /dev/shm, vsld (--ublk off,
the given timing), lun0 written once over 256 MiB, then fio's nbd engine (4 KiB random read and
write, 1x1 and 4x4), vsl-bench attached and over NBD (the same rows), and, with vsld stopped,
vsl-bench in process (QD1 4 KiB write and read: IOPS and the whole process's CPU per I/O).
Builds alternate so this VM's drift falls on both; read the spread between rounds, not one
figure. Build a base with `git worktree add /work/base <commit>` and `scripts/build` there.
One build against itself with an option on one side compares the option, e.g. polled NBD
connections against threaded ones: `host_path_ab.py build build --b-vsld-args=--nbd-threaded`.
"""
import argparse
import json
import os
import signal
import subprocess
import tempfile
import time


def wait_for(path, proc, seconds=30):
    for _ in range(int(seconds * 100)):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise SystemExit("vsld exited before %s appeared" % path)
        time.sleep(0.01)
    raise SystemExit("no %s after %d s" % (path, seconds))


def one_run(build, seconds, timing, vsld_args=()):
    tools = os.path.join(build, "tools")
    vsld, vslctl, vb = (os.path.join(tools, t) for t in ("vsld", "vslctl", "vsl-bench"))
    t = tempfile.mkdtemp(dir="/dev/shm")
    out = {}
    p = None
    try:
        subprocess.run([vslctl, "create-card", t + "/card", "--profile", "duo-slc-small"], check=True,
                       stdout=subprocess.DEVNULL)
        log = open(t + "/vsld.log", "w")
        p = subprocess.Popen([vsld, "--card", t + "/card", "--socket", t + "/s", "--ublk", "off", "--timing", timing]
                             + list(vsld_args),
                             stdout=log, stderr=log)
        wait_for(t + "/s", p)
        subprocess.run([vslctl, "--socket", t + "/s", "format", "--yes"], check=True, stdout=subprocess.DEVNULL)
        wait_for(t + "/s-nbd.sock", p)
        uri = "nbd+unix:///lun0?socket=%s/s-nbd.sock" % t
        for _ in range(300):  # lun0 online after the format
            if subprocess.run(["nbdinfo", "--size", uri], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run(["fio", "--name=p", "--ioengine=nbd", "--uri=" + uri, "--rw=write", "--bs=1m", "--iodepth=8",
                        "--size=256M"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def fio(rw, j, q):
            subprocess.run(["fio", "--name=b", "--ioengine=nbd", "--uri=" + uri, "--rw=" + rw, "--bs=4k",
                            "--iodepth=%d" % q, "--numjobs=%d" % j, "--group_reporting", "--size=256M",
                            "--time_based", "--runtime=%gs" % seconds, "--ramp_time=0.5s", "--output-format=json",
                            "--output=" + t + "/f.json"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            x = json.load(open(t + "/f.json"))["jobs"][0]
            return x["read"]["iops"] + x["write"]["iops"]

        def bench(args):
            r = subprocess.run([vb, "--json"] + args + ["--runtime", str(seconds), "--ramp", "0.5", "--span",
                                                        str(256 * 256)], capture_output=True, text=True, check=True)
            return json.loads(r.stdout)["result"]

        for rw in ("randread", "randwrite"):
            for j, q in ((1, 1), (4, 4)):
                out["fio nbd %s %dx%d IOPS" % (rw, j, q)] = fio(rw, j, q)
        for w in ("4k-randread", "4k-randwrite"):
            for j, q in ((1, 1), (4, 4)):
                jq = ["--workload", w, "--jobs", str(j), "--iodepth", str(q)]
                x = bench(["--attach", t + "/s-sdk.sock", "--lun", "lun0"] + jq)
                out["sdk attached %s %dx%d IOPS" % (w, j, q)] = x["iops"]
                out["sdk attached %s %dx%d avg us" % (w, j, q)] = x["lat_us"]["avg"]
                x = bench(["--nbd", uri] + jq)
                out["vsl-bench nbd %s %dx%d IOPS" % (w, j, q)] = x["iops"]
        p.send_signal(signal.SIGTERM)
        p.wait(120)
        p = None
        for w in ("4k-randwrite", "4k-randread"):
            x = bench(["--card", t + "/card", "--lun", "0", "--timing", timing, "--workload", w, "--jobs", "1",
                       "--iodepth", "1"])
            out["in-process %s 1x1 IOPS" % w] = x["iops"]
            out["in-process %s 1x1 CPU us/IO" % w] = x["cpu_us_per_io"]
    finally:
        if p is not None:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", t])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--timing", choices=("none", "model"), default="none")
    ap.add_argument("--a-vsld-args", default="", help="extra vsld arguments for A (space-separated)")
    ap.add_argument("--b-vsld-args", default="", help="extra vsld arguments for B")
    a = ap.parse_args()
    runs = ([], [])  # by position: the same build may be given twice (a noise check)
    extra = (a.a_vsld_args.split(), a.b_vsld_args.split())
    for r in range(a.rounds):
        for i, b in enumerate((a.a, a.b)):
            runs[i].append(one_run(b, a.seconds, a.timing, extra[i]))
            print("round %d of %s done" % (r + 1, b), flush=True)
    names = ["%s %s" % (b, x) if x else b for b, x in ((a.a, a.a_vsld_args), (a.b, a.b_vsld_args))]
    print("\n| row (timing %s) | %s | %s |" % (a.timing, names[0], names[1]))
    print("|---|---|---|")
    for k in runs[0][0]:
        fmt = (lambda v: "%.1f" % v) if ("us" in k) else (lambda v: "%.0f" % v)
        print("| %s | %s | %s |" % (k, " / ".join(fmt(x[k]) for x in runs[0]),
                                    " / ".join(fmt(x[k]) for x in runs[1])))


if __name__ == "__main__":
    main()
