#!/usr/bin/env python3
"""Per-thread CPU and context switches of running processes over a window.

    python3 bench/thread_stats.py SECONDS PID... [--also NAME...]

For each thread of the given processes (and of every process named by --also, e.g. fio),
grouped by thread name: CPU used over the window (% of one core), voluntary switches per
second (the thread slept: a wait, a blocking read) and involuntary ones (preempted, or a
sched_yield), and the whole machine's busy share from /proc/stat. Run it while a
benchmark runs (docs/bench.md, "Where the block 4x4 write gap lies"): a server whose
threads sleep often per I/O, or a machine left idle under load, shows here.
"""
import argparse
import os
import subprocess
import time


def threads(pids):
    out = {}
    for p in pids:
        try:
            tids = os.listdir("/proc/%s/task" % p)
        except FileNotFoundError:
            continue
        for t in tids:
            base = "/proc/%s/task/%s/" % (p, t)
            try:
                comm = open(base + "comm").read().strip()
                fields = open(base + "stat").read().rsplit(")", 1)[1].split()
                status = open(base + "status").read()
            except (FileNotFoundError, ProcessLookupError):
                continue
            cpu = int(fields[11]) + int(fields[12])  # utime + stime, clock ticks
            vol = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
            inv = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
            out[(p, t)] = (comm, cpu, vol, inv)
    return out


def machine():
    f = list(map(int, open("/proc/stat").readline().split()[1:]))
    return sum(f), f[3] + f[4]  # all, idle + iowait


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seconds", type=float)
    ap.add_argument("pids", nargs="*")
    ap.add_argument("--also", nargs="*", default=[], help="process names whose threads count under that name")
    a = ap.parse_args()
    named = {}
    for name in a.also:
        for p in subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout.split():
            named[p] = name
    pids = list(a.pids) + list(named)
    before, m0 = threads(pids), machine()
    time.sleep(a.seconds)
    after, m1 = threads(pids), machine()
    hz = os.sysconf("SC_CLK_TCK")
    groups = {}
    for k, (comm, cpu, vol, inv) in after.items():
        if k not in before:
            continue
        _, cpu0, vol0, inv0 = before[k]
        g = groups.setdefault(named.get(k[0], comm), [0, 0, 0, 0])
        g[0] += cpu - cpu0
        g[1] += vol - vol0
        g[2] += inv - inv0
        g[3] += 1
    total, idle = m1[0] - m0[0], m1[1] - m0[1]
    print("machine busy %.0f%%" % (100.0 * (total - idle) / max(1, total)))
    for name, (cpu, vol, inv, n) in sorted(groups.items()):
        print("%-14s x%-3d cpu %6.1f%%  voluntary/s %8.0f  involuntary/s %8.0f" % (
            name, n, 100.0 * cpu / hz / a.seconds, vol / a.seconds, inv / a.seconds))


if __name__ == "__main__":
    main()
