#!/usr/bin/env python3
"""Turns Google Benchmark JSON into a ratio report against the run's own baseline.

usage: report.py BENCH_JSON [--baseline NAME] [--out FILE.md] [--check] [--max COUNTER=VALUE ...]

Every figure is given as items per second of wall time and as a ratio to the baseline
measured in the same run, since absolute speeds on a shared 2-core machine are noisy.
--check exits non-zero when a benchmark errored or counted failures, or (--max) when a
benchmark reports COUNTER above VALUE: for deterministic counters (heap allocations per
I/O on a virtual clock), never for timings.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json_file")
    ap.add_argument("--baseline", default="BM_MemcpyPageBaseline")
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--max", action="append", default=[], metavar="COUNTER=VALUE")
    a = ap.parse_args()
    limits = {}
    for m in a.max:
        name, _, value = m.partition("=")
        limits[name] = float(value)
    with open(a.json_file) as f:
        data = json.load(f)
    rows = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    medians = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    if medians:  # with --benchmark_repetitions, compare medians
        rows = medians
        for b in rows:
            b["name"] = b.get("run_name", b["name"])
    base = next((b for b in rows if b["name"] == a.baseline), None)
    if base is None:
        print(f"baseline {a.baseline} not in {a.json_file}", file=sys.stderr)
        return 2
    ctx = data.get("context", {})
    lines = [
        f"host: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
        f"{ctx.get('mhz_per_cpu', '?')} MHz; build: {ctx.get('library_build_type', '?')}",
        "",
        "| benchmark | items/s (wall) | vs baseline | other counters |",
        "|---|---|---|---|",
    ]
    bad = False
    for b in rows:
        if b.get("error_occurred"):
            bad = True
            lines.append(f"| {b['name']} | error: {b.get('error_message', '')} | | |")
            continue
        ips = b.get("items_per_second", 0.0)
        ratio = ips / base["items_per_second"] if base.get("items_per_second") else 0.0
        extra = {k: v for k, v in b.items()
                 if k in ("sim_MBps", "virt_per_wall", "failures", "bytes_per_second")}
        if extra.get("failures", 0):
            bad = True
        for name, limit in limits.items():
            if name in b:
                extra[name] = b[name]
                if b[name] > limit:
                    bad = True
                    print(f"{b['name']}: {name} = {b[name]:.4g} is above {limit:g}", file=sys.stderr)
        extra_s = ", ".join(f"{k}={v:.4g}" for k, v in extra.items())
        lines.append(f"| {b['name']} | {ips:,.0f} | {ratio:.4f} | {extra_s} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 1 if (a.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
