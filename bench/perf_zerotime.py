"""docs/performance.md's zero-time section (perf_report.py part `zerotime`)."""


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
        w("| workload | IOPS | avg us | CPU us per I/O |")
        w("|---|---|---|---|")
        for mix, x in ip.items():
            w("| %s | %s | %.1f | %.2f |" % (mix, fmt_n(x["iops"]), x["avg_us"], x["cpu_us_per_io"]))
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
