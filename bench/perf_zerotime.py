"""docs/performance.md's zero-time section (perf_report.py part `zerotime`): the FTL's own CPU and
instructions per I/O (bench/ftl_cpu_bench, run here) and the section's rendering."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


FTL_CPU_COUNTERS = ("cpu_ns", "total_us", "card_us", "ftl_us", "ftl_per_cold_copy", "waf", "programs_per_io",
                    "reads_per_io", "copies_per_io", "ftl_allocs_per_io", "failures")


def run_ftl_cpu(build, quick):
    """The FTL's own CPU per I/O (bench/ftl_cpu_bench) beside one cold 4 KiB copy, run three
    times (once with --quick, on a quarter-size pipe): this machine's run-to-run spread is
    as large as the figure, so every run is kept."""
    exe = os.path.join(build, "bench", "ftl_cpu_bench")
    args = ["--benchmark_filter=Cold|Ftl", "--benchmark_format=json"] + (["--blocks=256", "--rounds=200"] if quick else [])
    runs = []
    for _ in range(1 if quick else 3):
        r = subprocess.run([exe] + args, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("ftl_cpu_bench failed: %s" % r.stderr[-2000:])
        run = {}
        for b in json.loads(r.stdout)["benchmarks"]:
            key = b["name"].split("/")[0] + (":" + b["label"] if b["name"].startswith("BM_CopyCrc") else "")
            run[key] = {k: b[k] for k in FTL_CPU_COUNTERS if k in b}
        runs.append(run)
        w, h, rd = run.get("BM_FtlWrite4K", {}), run.get("BM_FtlWrite4KHostPath", {}), run.get("BM_FtlRead4K", {})
        print("zerotime: FTL own CPU per 4 KiB write %.2f us (host-path relocation %.2f), read %.2f; cold copy %.0f ns" % (
            w.get("ftl_us", 0), h.get("ftl_us", 0), rd.get("ftl_us", 0),
            run.get("BM_CopyCold4K", {}).get("cpu_ns", 0)), flush=True)
    out = {"command": " ".join(["build/bench/ftl_cpu_bench"] + args), "runs": runs}
    if not quick:
        out["instructions"] = run_ftl_instructions(exe)
    return out


def run_ftl_instructions(exe):
    """The FTL's own instructions per I/O, exactly (this VM's CPU times cannot resolve a
    10 % change): callgrind counts the measured loop, then (VSL_CALLGRIND_REPLAY=1) the
    card replay of the same window; the difference over the I/Os is the FTL's own. About
    4 minutes; skipped (with a note) where valgrind is missing."""
    if shutil.which("valgrind") is None:
        print("zerotime: valgrind not found: no instruction counts", flush=True)
        return {}
    res = {}
    for name in ("BM_FtlWrite4K", "BM_FtlRead4K"):
        counts = []
        for replay in ("0", "1"):
            with tempfile.TemporaryDirectory() as tmp:
                r = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                    "--callgrind-out-file=" + os.path.join(tmp, "cg.out"), exe,
                                    "--benchmark_filter=%s/" % name, "--benchmark_format=json"],
                                   capture_output=True, text=True, env=dict(os.environ, VSL_CALLGRIND_REPLAY=replay))
            m = re.search(r"Collected : (\d+)", r.stderr)
            if r.returncode != 0 or m is None:
                sys.exit("ftl_cpu_bench under callgrind failed: %s" % r.stderr[-2000:])
            counts.append(int(m.group(1)))
            ios = json.loads(r.stdout)["benchmarks"][0]["ios"]
        res[name] = {"loop": counts[0], "replay": counts[1], "ios": ios}
        print("zerotime: %s: FTL's own instructions per I/O %.0f (loop %d, card replay %d, %d I/Os)" % (
            name, (counts[0] - counts[1]) / ios, counts[0], counts[1], ios), flush=True)
    return res


# ---------------------------------------------------------------- rendering


def render_zerotime(w, res, zt, rt, fmt_n):
    w("## Zero-time card: the host path alone, against nbdkit memory")
    w("")
    if zt.get("skipped"):
        w("Skipped: " + zt["skipped"])
        w("")
        return
    w("vsld serves the same duo-slc-small card with `--timing none` (a benchmarking mode, docs/bench.md: NAND "
      "operations complete as soon as their data has moved; the FTL, FlashBack parity, the groomer, checkpoints "
      "and the protocols run for real) beside `nbdkit memory` of the same size, same run, back to back. What is "
      "left is the host path: the front end, the engine hand-offs, the FTL and the card model's bookkeeping. "
      "Targets (issue 29): block vsld / nbdkit >= 1.0 in every row; SDK attached / NBD to the same vsld >= 2 at "
      "1x1 and 4x4. %g s per run over %d MiB written first%s. Both sides share this machine's 2 cores with the "
      "load generator (fio or vsl-bench), which is why the same generator drives both sides of every ratio.%s" % (
          zt["seconds"], zt["region_mib"],
          (", after the whole export was written twice over and trimmed on both sides (a store in use: vsld's writes "
           "then land on flash pages programmed before)" if zt.get("fill_trim") else ""),
          (" The card's image is in %s%s." % (zt["card_in"], " (RAM, as nbdkit memory's data is)"
                                              if zt["card_in"] == "/dev/shm" else ""))
          if zt.get("card_in") else ""))
    w("")
    w("| workload | jobs x QD | block: vsld IOPS | nbdkit IOPS | vsld / nbdkit | vsld avg us | nbdkit avg us | "
      "SDK attached IOPS | NBD to vsld (vsl-bench) IOPS | SDK / NBD | SDK avg us | SDK / nbdkit (libnbd) |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in zt["rows"]:
        bv, bk, sv, sk, nv = r["block_vsld"], r["block_nbdkit"], r["sdk_vsld"], r["sdk_nbdkit"], r["nbd_vsld"]
        w("| %s | %dx%d | %s | %s | %.2f | %.0f | %.0f | %s | %s | %.2f | %.0f | %.2f |" % (
            r["workload"], r["jobs"], r["qd"], fmt_n(bv["iops"]), fmt_n(bk["iops"]), bv["iops"] / max(1, bk["iops"]),
            bv["avg_us"], bk["avg_us"], fmt_n(sv["iops"]), fmt_n(nv["iops"]), sv["iops"] / max(1, nv["iops"]),
            sv["avg_us"], sv["iops"] / max(1, sk["iops"])))
    w("")
    ip = zt.get("inproc", {})
    if ip:
        w("In-process SDK on the zero-time card (vsl-bench --card --timing none --fill-trim --precondition, 1x1): CPU of the whole process "
          "(FTL, card model, SDK, the engine thread) over the measured window, per I/O; target (issue 29) <= 3 us "
          "for 4 KiB writes:")
        w("")
        w("| workload | IOPS | avg us | CPU us per I/O | heap allocations per I/O |")
        w("|---|---|---|---|---|")
        for mix, x in ip.items():
            w("| %s | %s | %.1f | %.2f | %s |" % (mix, fmt_n(x["iops"]), x["avg_us"], x["cpu_us_per_io"],
                                                 "%.3f" % x["allocs_per_io"] if "allocs_per_io" in x else "-"))
        w("")
        ft = zt.get("first_touch")
        if ft:
            w("Why the whole LUN is written twice over and trimmed first (vsl-bench --fill-trim here, fio on both sides of "
              "the block rows): the FTL appends to fresh blocks, so without it every measured write programs a slot "
              "of the card image that the serving process has never touched, and on this machine a process's first "
              "write to a page of a shared mapping, even one whose pages exist already, costs %.1f us per %d-byte "
              "slot, against %.2f us for the same copy a second time (`bench/first_touch_probe`, run with this "
              "table): the memory virtualization's cost per page a process touches, which the card model's image "
              "pays and real flash would not, and which nbdkit's rewrites of its own pages never pay. The FTL's "
              "own CPU per write is measured without it by `bench/ftl_cpu_bench` (docs/bench.md)." % (
                  ft["first_us_per_slot"], ft["slot_bytes"], ft["second_us_per_slot"]))
            w("")
    fc = zt.get("ftl_cpu")
    if fc and fc.get("runs"):
        w("The FTL's own CPU per I/O on a zero-time pipe (`%s`, %d runs, each a column; docs/bench.md): the "
          "whole loop's user CPU, the card model's (the same flash commands replayed on a fresh card without the "
          "FTL), and the difference, the FTL's own, also in units of one cold 4 KiB copy measured in the same "
          "process. `write` is the product's path (the groomer copies inside the controller and parity forms "
          "in its accumulators); `write, host path` is the fallback for a pipe without them (relocation and "
          "parity through host memory). Targets (issue 29): FTL own <= 1.5 us per write and <= 0.5 us per read." % (
              fc["command"], len(fc["runs"])))
        w("")
        w("| | " + " | ".join("run %d" % (i + 1) for i in range(len(fc["runs"]))) + " |")
        w("|---|" + "---|" * len(fc["runs"]))
        w("| cold 4 KiB copy, ns | " + " | ".join("%.0f" % r.get("BM_CopyCold4K", {}).get("cpu_ns", 0)
                                                 for r in fc["runs"]) + " |")
        for key in sorted(k for k in fc["runs"][0] if k.startswith("BM_CopyCrcCold4K:")):
            w("| the same copy with its CRC-32C, kernel %s, ns | " % key.split(":", 1)[1] + " | ".join(
                "%.0f" % r.get(key, {}).get("cpu_ns", 0) for r in fc["runs"]) + " |")
        for name, label in (("BM_FtlWrite4K", "write"), ("BM_FtlWrite4KHostPath", "write, host path"),
                            ("BM_FtlRead4K", "read")):
            if not all(name in r for r in fc["runs"]):
                continue
            w("| %s: total / card / FTL own, us | " % label + " | ".join(
                "%.2f / %.2f / **%.2f**" % (r[name]["total_us"], r[name]["card_us"], r[name]["ftl_us"])
                for r in fc["runs"]) + " |")
            w("| %s: FTL own / cold copy | " % label + " | ".join(
                "%.1f" % r[name].get("ftl_per_cold_copy", 0) for r in fc["runs"]) + " |")
            if name != "BM_FtlRead4K":
                w("| %s: WAF, programs / copies / reads per I/O | " % label + " | ".join(
                    "%.2f, %.2f / %.2f / %.2f" % (r[name].get("waf", 0), r[name].get("programs_per_io", 0),
                                                   r[name].get("copies_per_io", 0), r[name].get("reads_per_io", 0))
                    for r in fc["runs"]) + " |")
            w("| %s: heap allocations per I/O, FTL's own | " % label + " | ".join(
                "%.2f" % r[name].get("ftl_allocs_per_io", 0) for r in fc["runs"]) + " |")
        w("")
        ins = fc.get("instructions") or {}
        if ins:
            w("The FTL's own instructions per I/O, exactly (callgrind on the measured loop, then with "
              "`VSL_CALLGRIND_REPLAY=1` on the card replay of the same window; the difference per I/O): the "
              "figure to compare between builds, which this VM's CPU times above cannot resolve to 10 %.")
            w("")
            w("| | loop | card replay | I/Os | FTL's own per I/O |")
            w("|---|---|---|---|---|")
            for name, label in (("BM_FtlWrite4K", "write"), ("BM_FtlRead4K", "read")):
                if name in ins:
                    x = ins[name]
                    w("| %s | %s | %s | %d | **%s** |" % (label, "{:,}".format(x["loop"]), "{:,}".format(x["replay"]),
                                                         x["ios"], "{:,.0f}".format((x["loop"] - x["replay"]) / x["ios"])))
            w("")
    model_us = None
    for d in res.get("virtual", {}).values():
        for r in d["phases"].get("scaling", []):
            if r["workload"] == "4k-randread" and r["threads"] == 1 and r["queue"] == 1:
                model_us = r["read_lat"]["avg_us"]
        if model_us:
            break
    rd = next((r for r in rt.get("rows", []) if r["workload"] == "4k-randread" and r["jobs"] == 1 and r["qd"] == 1), None)
    if model_us and rd:
        w("QD1 4 KiB random read on the modelled card (real time, part `realtime`) beside the model's own figure "
          "(virtual time, 1T/1Q, part `virtual`: the device and the FTL with no host cost): targets (issue 29) "
          "within 15 us over NBD and 5 us through the attached SDK.")
        w("")
        w("| path | avg us | over the model's %.1f us |" % model_us)
        w("|---|---|---|")
        w("| NBD (fio nbd engine) | %.1f | %+.1f |" % (rd["block_vsld"]["avg_us"], rd["block_vsld"]["avg_us"] - model_us))
        w("| NBD (vsl-bench --nbd) | %.1f | %+.1f |" % (rd["nbd_vsld"]["avg_us"], rd["nbd_vsld"]["avg_us"] - model_us))
        w("| SDK attached | %.1f | %+.1f |" % (rd["sdk_vsld"]["avg_us"], rd["sdk_vsld"]["avg_us"] - model_us))
        w("")
