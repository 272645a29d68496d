"""Sections of docs/performance.md about the host: RAM, attach times, the real-time and
zero-time tables against nbdkit, the card backends and two hosts on one card
(bench/perf_report.py's render() calls render_host)."""
import os

from perf_zerotime import render_zerotime


def part_heading(w, d, title):
    """Writes a part's heading; False (after saying why) when the part was skipped."""
    w(title)
    w("")
    if d.get("skipped"):
        w("Skipped: " + d["skipped"])
        return False
    return True


def render_host(w, res, plt, figdir, fmt_n, save_bars):
    v = res.get("virtual", {})
    fs, fo = v.get("full_stock"), v.get("full_override")
    ss, sh = v.get("steady_stock"), v.get("steady_hp")
    # ---- memory
    w("## Host RAM")
    w("")
    if fs:
        af, mem = fs["phases"]["attach_fresh"], fs["phases"]["memory"]
        user_gib = af["user_bytes"] / 2**30
        w("| card | user GiB | mapped GiB | FTL memory (MiB) | per GiB of user capacity |")
        w("|---|---|---|---|---|")
        w("| full-size duo-slc, empty | %.0f | 0 | %.1f | %.1f KiB |" % (
            user_gib, af["ftl_memory_bytes"] / 2**20, af["ftl_memory_bytes"] / 1024 / user_gib))
        w("| full-size duo-slc, after the runs | %.0f | %.2f | %.1f | %.1f KiB |" % (
            user_gib, mem["mapped_bytes"] / 2**30, mem["ftl_memory_bytes"] / 2**20,
            mem["ftl_memory_bytes"] / 1024 / user_gib))
        if ss:
            m2 = ss["phases"]["memory"]
            w("| 64 blocks/die, full (steady state) | %.2f | %.2f | %.1f | %.0f KiB |" % (
                m2["user_bytes"] / 2**30, m2["mapped_bytes"] / 2**30, m2["ftl_memory_bytes"] / 2**20,
                m2["ftl_memory_bytes"] / 1024 / (m2["user_bytes"] / 2**30)))
        full_est = af["ftl_memory_bytes"] + af["user_bytes"] / 4096 * 4
        w("")
        w("The forward map costs 4 bytes per 4 KiB sector, in 16 KiB chunks (4,096 sectors) allocated on "
          "the first write into them, so random writes spread over the whole card allocate chunks faster "
          "than they map sectors (the burst above touched most chunks of the 1.2 TB); the per-LEB and "
          "per-block tables are fixed (the empty row). The full-size card written end to end holds about "
          "%.2f GiB of FTL memory: %.2f MiB per GiB of capacity (about 0.1%% of it)." % (
              full_est / 2**30, full_est / 2**20 / user_gib))
        w("")
        w("The card model itself (not part of a real deployment) keeps per-page state for the simulated NAND: "
          "the full-size run peaks at %.1f GiB of RSS (commands below)." % (fs["max_rss_bytes"] / 2**30))
        w("")
    rt = res.get("realtime", {})
    if rt.get("memory"):
        mm = rt["memory"]
        w("vsld (real time, duo-slc-small card, %.1f GB user over 4 LUNs, %d MiB written on LUN 0, after the runs): "
          "resident %.0f MiB (peak %.0f MiB), nbdkit memory beside it %.0f MiB (its own data). Most of vsld's "
          "resident memory is the card model's and the daemon's (buffers, rings), not the FTL's." % (
              mm["card_user_bytes"] / 1e9, mm["written_bytes"] >> 20, mm["vsld_rss_bytes"] / 2**20,
              mm["vsld_hwm_bytes"] / 2**20, mm["nbdkit_rss_bytes"] / 2**20))
        w("")

    # ---- attach
    w("## Attach time after clean and unclean shutdown")
    w("")
    w("| card | clean: card ms | unclean (power cut under 16T/16Q writes): card ms | LEBs scanned / page reads |")
    w("|---|---|---|---|")
    for d, lab in ((fs, "full-size, %.2f GiB written sequentially, then the runs" % ((fs or {}).get("phases", {}).get("seq_write", {}).get("ops", 0) / 1024)),
                   (fo, "full-size, override"), (ss, "64 blocks/die, full, stock"), (sh, "64 blocks/die, full, HP")):
        if d:
            a_ = d["phases"]["attach"]
            w("| %s | %.1f | %.1f | %d / %s |" % (lab, a_["clean_attach_card_ms"], a_["unclean_attach_card_ms"],
                                                 a_["unclean_lebs_scanned"], fmt_n(a_["unclean_pages_read"])))
    w("")
    vcommit = res["meta"].get("part_commits", {}).get("virtual", res["meta"]["commit"])
    if fs and not res.get("attach"):
        w("First attach after format of the full-size card: %.1f card ms (format itself %.0f card ms). A full-size "
          "LUN's checkpoint does not fit a metadata LEB (docs/ftl.md), so every attach of it scans: row 0 of "
          "each of the card's LEBs, and the LEBs written since through their summaries; the clean and unclean "
          "figures are therefore alike, and grow with what was written (about 0.28 ms of card time per LEB "
          "written, bench/ftl_attach_bench)." % (
            fs["phases"]["attach_fresh"]["attach_card_ms"], fs["phases"]["attach_fresh"]["format_card_ms"]))
        w("")
    if res.get("attach"):
        if fs:
            w("The full-size rows above were measured at `%s` (the card benchmark, part `virtual`). First attach "
              "after format there: %.1f card ms (format %.0f card ms). Before format 1.5 a full-size LUN's "
              "checkpoint did not fit a metadata LEB, so every attach of it scanned and the clean and unclean "
              "figures were alike; since 1.5 the checkpoint spans metadata slots of several LEBs "
              "(docs/ftl.md), measured below on one pipe (`%s`, part `attach`), until the card benchmark is "
              "rerun." % (vcommit, fs["phases"]["attach_fresh"]["attach_card_ms"],
                          fs["phases"]["attach_fresh"]["format_card_ms"], res["attach"]["command"]))
            w("")
        for line in res["attach"]["markdown"].splitlines():
            w(line.replace("## ", "### ", 1) if line.startswith("## ") else line)
    if rt.get("attach"):
        a_ = rt["attach"]
        w("vsld in real time (duo-slc-small card, 4 LUNs; from process start to every LUN online, as a user "
          "waits for it): after SIGTERM %s s; after SIGKILL under fio random writes %s s." % (
              " / ".join("%.2f" % x for x in a_["clean_s"]), " / ".join("%.2f" % x for x in a_["unclean_s"])))
        w("")

    # ---- realtime
    w("## Real time on this machine: block path and SDK path against nbdkit memory")
    w("")
    if rt.get("skipped"):
        w("Skipped: " + rt["skipped"])
    elif rt.get("rows"):
        w("vsld serves a duo-slc-small card in real time (its NAND timing modelled, its CPU on this machine) "
          "beside `nbdkit memory` of the same size, in the same run, workloads back to back so host noise "
          "falls on both. Block path: fio's nbd engine to each. SDK path: vsl-bench through the SDK attached to "
          "vsld, against vsl-bench through libnbd to nbdkit (the same load generator). %g s per run over %d MiB "
          "written first. The ratio (vsld / nbdkit) is the figure to read: nbdkit memory is a RAM disk behind the "
          "same protocol, so it shows what vsld's FTL, card model and protocol cost on this machine. The last "
          "column is the SDK against NBD to the same vsld with the same load generator (vsl-bench --nbd): "
          "what skipping the block protocol gains.%s" % (
              rt["seconds"], rt["region_mib"],
              (" The card's image is in %s." % rt["card_in"]) if rt.get("card_in") else ""))
        w("")
        w("| workload | jobs x QD | block: vsld IOPS | nbdkit IOPS | ratio | vsld avg / p99 us | SDK: vsld IOPS | nbdkit (libnbd) IOPS | ratio | SDK avg / p99 us | SDK / NBD to vsld (same tool) |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rt["rows"]:
            bv, bk, sv, sk = r["block_vsld"], r["block_nbdkit"], r["sdk_vsld"], r["sdk_nbdkit"]
            nv = r.get("nbd_vsld")
            w("| %s | %dx%d | %s | %s | %.2f | %.0f / %.0f | %s | %s | %.2f | %.0f / %.0f | %s |" % (
                r["workload"], r["jobs"], r["qd"], fmt_n(bv["iops"]), fmt_n(bk["iops"]), bv["iops"] / max(1, bk["iops"]),
                bv["avg_us"], bv["p99_us"], fmt_n(sv["iops"]), fmt_n(sk["iops"]), sv["iops"] / max(1, sk["iops"]),
                sv["avg_us"], sv["p99_us"], ("%.2f" % (sv["iops"] / max(1, nv["iops"]))) if nv else "-"))
        w("")
        fig, ax = plt.subplots(figsize=(8, 3.4))
        labels = ["%s\n%dx%d" % (r["workload"], r["jobs"], r["qd"]) for r in rt["rows"]]
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], [r["block_vsld"]["iops"] / max(1, r["block_nbdkit"]["iops"]) for r in rt["rows"]],
               width=0.4, label="block (fio/NBD): vsld / nbdkit")
        ax.bar([x + 0.2 for x in xs], [r["sdk_vsld"]["iops"] / max(1, r["sdk_nbdkit"]["iops"]) for r in rt["rows"]],
               width=0.4, label="SDK attached / libnbd to nbdkit")
        ax.axhline(1, color="black", linewidth=0.7)
        save_bars(plt, fig, ax, labels, 6, "IOPS ratio to nbdkit memory", os.path.join(figdir, "realtime.png"))
        w("![IOPS ratios to nbdkit memory](performance/realtime.png)")
        w("")
        w("This VM has 2 cores shared by fio (or vsl-bench), the server and, for vsld, the card model's engine "
          "threads: ratios move by about 10% between runs; absolute figures more.")
        w("")
    zt = res.get("zerotime", {})
    if zt.get("rows") or zt.get("skipped"):
        render_zerotime(w, res, zt, rt, fmt_n)

    # ---- backends
    be = res.get("backends", {})
    if be and part_heading(w, be, "## Card backends in real time: the simulated card, the co-simulated RTL controller, the co-simulated Alveo kernel"):
        w("vsld over NBD (vsl-bench --nbd, 1 job, QD4, %g s per workload over a working set of at most 4 MiB of "
          "lun0) on each backend (docs/backends.md), back to back in one run: `sim` is the simulated card with the "
          "co-simulated card's shape (profile rtl-duo, %d blocks per die) in real time; `rtl` is the Verilated "
          "vsl_ctrl (two controllers) with pin-level ONFI die models; `kernel` is the Verilated Alveo kernel with "
          "its NAND emulators (the kernel-emu shape). Every sector on rtl and kernel passes through the RTL: the "
          "rings, the DMA, the ECC, the ONFI pin engine. The controller cycles per second are what the simulator "
          "achieved on this machine (the RTL runs at 100 MHz on rtl, 200 MHz on kernel, so the last column is the "
          "co-simulation's speed as a share of the hardware's)." % (be["seconds"], be["blocks_per_die"]))
        w("")
        w("| backend | workload | IOPS | MiB/s | p99 latency | IOPS vs sim | controller cycles/s | share of real time |")
        w("|---|---|---|---|---|---|---|---|")
        base = {}
        for b in be["backends"]:
            if b["backend"] == "sim":
                base = b["workloads"]
        for b in be["backends"]:
            for wl, r in b["workloads"].items():
                ratio = "%.4f" % (r["iops"] / base[wl]["iops"]) if wl in base and base[wl]["iops"] else "-"
                cyc = fmt_n(r["cycles_per_s"]) if r.get("realtime_share") is not None else "-"
                share = "%.3f%%" % (100 * r["realtime_share"]) if r.get("realtime_share") is not None else "-"
                p99 = r["lat_us"]["p99"]
                # vsl-bench's latency histogram ends at 2^32 ns: beyond it, a bound.
                p99s = "> 4.29 s" if p99 >= 4294967 else fmt_n(p99) + " us"
                w("| %s | %s | %s | %.3f | %s | %s | %s | %s |" % (b["backend"], wl, fmt_n(r["iops"]),
                                                                r["mib_per_s"], p99s, ratio, cyc, share))
        w("")
        w("Format of the whole card: " + ", ".join("%s %.1f s" % (b["backend"], b["format_s"]) for b in be["backends"])
          + ". The co-simulations are slower than the hardware by the factor in the last column; what they show "
          "is that the product runs unchanged on the RTL, not how fast the RTL is (its cycle counts per "
          "operation are in docs/rtl.md).")
        w("")

    # ---- two hosts
    ha = res.get("ha", {})
    if ha and part_heading(w, ha, "## Two hosts on one card (docs/ha.md)"):
        w("Isolation: fio (4 KiB random writes, QD16, over NBD) on host A's lun0 in %g s rounds, alternating "
          "(ABBA, %d pairs) an undisturbed host B with a B that is SIGKILLed, restarted (claiming its LUNs back), "
          "its lun2 reset and its controller reformatted. The card server, both hosts and fio share this "
          "machine's two cores; two servers on a dual-ported card would not, so B is also run at SCHED_IDLE "
          "(it gets only CPU nobody else wants), the nearest this machine comes to separate hosts. The spread of "
          "the undisturbed rounds is the noise floor." % (ha["seconds"], ha["pairs"]))
        w("")
        w("| disturbance | A undisturbed IOPS | A disturbed IOPS | ratio | noise floor | A's worst latency undisturbed / disturbed | sequences |")
        w("|---|---|---|---|---|---|---|")
        for r in ha["isolation"]:
            w("| %s | %s | %s | %.3f | %.1f%% | %.1f / %.1f ms | %d |" % (
                r["name"], fmt_n(r["calm"]), fmt_n(r["busy"]), r["ratio"], 100 * r["spread"], r["worst_calm"],
                r["worst_busy"], r["cycles"]))
        w("")
        fo = ha["failover"]
        w("Failover: host A with 4 MiB written on lun0 is SIGKILLed; host B (--takeover auto, lease %d ms) claims "
          "the LUN once A's lease has run out and attaches it from flash. Kill to B's first served read: %s ms "
          "(B's attach: %s ms by scan). The lease dominates: a host renews every quarter of it, so a dead one "
          "is noticed between 3/4 and 1 lease after its death, plus up to a quarter lease for the standby's "
          "look." % (ha["lease_ms"], ", ".join("%.0f" % x["ms"] for x in fo),
                     ", ".join("%.0f" % x["attach_ms"] for x in fo)))
        w("")

