"""Sections of docs/performance.md about the card in virtual time: preconditioning to
steady state, the workloads, scaling, the latency plot and write amplification
(bench/perf_report.py's render() calls render_card after the ceilings and the headline
comparison)."""
import os


def render_card(w, res, quick, plt, figdir, fmt_n, save_bars, ceiling_iops, waf_formula, REF):
    v = res.get("virtual", {})
    fs = v.get("full_stock")
    ss, sh = v.get("steady_stock"), v.get("steady_hp")
    sso, sho = v.get("steady_stock_override"), v.get("steady_hp_override")
    # ---- burst vs steady plot + rounds table
    if ss and sh:
        w("## Preconditioning: burst, then rounds to SNIA steady state (4K random writes, 16T/16Q)")
        w("")
        w("After a sequential fill of the whole volume, rounds of 4 KiB random writes, each half the user "
          "capacity, until the SNIA criterion holds over the last five rounds (range within 20% of the mean, "
          "fitted slope's excursion within 10%). Burst is the fresh card before the fill.")
        w("")
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for d, lab, ref in ((ss, "stock", REF["review_steady_stock"]), (sh, "high-performance", REF["review_steady_hp"]),
                            (sso, "stock, 55 W override", None), (sho, "high-performance, 55 W override", None)):
            if d is None:
                continue
            rounds = d["phases"]["rounds"]
            ax.plot([r["round"] for r in rounds], [r["iops"] / 1e3 for r in rounds], marker="o" if ref else "x",
                    linestyle="-" if ref else ":", label="OpenVSL " + lab)
            if ref:
                ax.axhline(ref / 1e3, linestyle="--", linewidth=0.8, color=ax.lines[-1].get_color(),
                           label="reference %s (review)" % lab)
        ax.set_xlabel("round (half the user capacity each)")
        ax.set_ylabel("kIOPS")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(figdir, "precondition.png"), dpi=110)
        plt.close(fig)
        w("![IOPS per preconditioning round](performance/precondition.png)")
        w("")
        for d, lab in ((ss, "stock"), (sh, "high-performance"), (sso, "stock, 55 W override"),
                       (sho, "high-performance, 55 W override")):
            if d is None:
                continue
            sst = d["phases"]["steady_state"]
            w("**%s format** (%.2f GB user): burst %s IOPS; steady state %s at round %s: mean %s IOPS, range %.1f%%, slope excursion %.1f%%." % (
                lab, d["phases"]["attach_fresh"]["user_bytes"] / 1e9, fmt_n(d["phases"]["burst"]["iops"]),
                "reached" if sst.get("reached") else "NOT reached", len(d["phases"]["rounds"]),
                fmt_n(sst.get("mean_iops", 0)), sst.get("range_pct", 0), sst.get("slope_excursion_pct", 0)))
            w("")
            w("| round | IOPS | WAF | avg us | stddev us | p99 us | p99.9 us | max us |")
            w("|---|---|---|---|---|---|---|---|")
            for r in d["phases"]["rounds"]:
                l = r["lat"]
                w("| %d | %s | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                    r["round"], fmt_n(r["iops"]), r.get("waf", 0), l["avg_us"], l["stddev_us"], l["p99_us"],
                    l["p999_us"], l["max_us"]))
            w("")

    # ---- workloads tables
    def wl_table(rows, title, d):
        w(title)
        w("")
        w("| workload | T/Q | IOPS | MB/s | avg us | stddev us | p99 us | p99.9 us | max us | model ceiling IOPS (bound) |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            l = r["lat"]
            cap, bound = ceiling_iops(d, r)
            w("| %s | %d/%d | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %s (%s) |" % (
                r["workload"], r["threads"], r["queue"], fmt_n(r["iops"]), fmt_n(r["mb_s"]), l["avg_us"],
                l["stddev_us"], l["p99_us"], l["p999_us"], l["max_us"], fmt_n(cap), bound))
        w("")

    if ss or fs:
        w("## Workloads (models.md), 16T/16Q, virtual time")
        w("")
        w("Each window is %s ms of card time after a quarter of that unmeasured. File and web server sizes under "
          "4 KiB go as one 4 KiB sector (4 KiB-sector formats)." % (
              "200" if not quick else "20"))
        w("")
    if ss:
        wl_table(ss["phases"]["workloads"], "### Steady state, stock format (64 blocks/die)", ss)
        raw_ = ss["phases"].get("read_after_writes")
        if raw_:
            w("Right after the preconditioning rounds, before the card idles, 4K random reads at 16T/16Q "
              "give %s IOPS (average %.0f us, max %.0f us): the groomer is still working off the backlog the "
              "writes left, and reads wait behind its programs and erases. The workloads above start after "
              "the card has idled %s s of card time." % (fmt_n(raw_["iops"]), raw_["lat"]["avg_us"], raw_["lat"]["max_us"],
                                                      "2" if not quick else "0.2"))
            w("")
    if sh:
        wl_table(sh["phases"]["workloads"], "### Steady state, high-performance format (64 blocks/die)", sh)
    if fs:
        burst = dict(fs["phases"]["burst"], workload="4k-randwrite, burst (fresh)")
        wl_table([burst] + fs["phases"]["workloads"],
                 "### Full-size card (1.2 TB), fresh: burst writes, then the workloads over the %.2f GiB written sequentially" % (
                     fs["phases"]["seq_write"]["ops"] / 1024), fs)
        w("On the fresh card writes land in empty space (nothing to groom): these are burst figures. Random "
          "reads over the written span touch every die as a full card would.")
        w("")

    # ---- scaling
    if ss and fs:
        w("## Scaling 1T/1Q ... 16T/16Q")
        w("")
        fig, axs = plt.subplots(1, 2, figsize=(9, 3.6))
        for ax, metric, lab in ((axs[0], "iops", "kIOPS"), (axs[1], "avg", "average latency (us)")):
            for d, wl, name in ((fs, "4k-randread", "4K read (full card)"), (ss, "4k-randread", "4K read (steady, stock)"),
                                (ss, "4k-randwrite", "4K write (steady, stock)"), (sh, "4k-randwrite", "4K write (steady, HP)"),
                                (ss, "8k-randrw-70", "8K 70/30 (steady, stock)")):
                if d is None:
                    continue
                pts = [r for r in d["phases"]["scaling"] if r["workload"] == wl]
                xs = [r["threads"] * r["queue"] for r in pts]
                ys = [r["iops"] / 1e3 if metric == "iops" else r["lat"]["avg_us"] for r in pts]
                ax.plot(xs, ys, marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("requests outstanding (T x Q)")
            ax.set_ylabel(lab)
            if metric == "avg":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
        axs[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(figdir, "scaling.png"), dpi=110)
        plt.close(fig)
        w("![IOPS and latency against requests outstanding](performance/scaling.png)")
        w("")
        for d, title in ((ss, "steady state, stock"), (sh, "steady state, high-performance"), (fs, "full-size card, fresh")):
            if d:
                wl_table(d["phases"]["scaling"], "### %s" % title, d)

    # ---- latency plot
    if ss and fs:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        rows = [("burst write\n(full)", fs["phases"]["burst"])] + [
            (r["workload"].replace("-", "\n", 1) + "\n(steady)", r) for r in ss["phases"]["workloads"]]
        xs = range(len(rows))
        for k, key in enumerate(("avg_us", "p99_us", "p999_us", "max_us")):
            ax.bar([x + (k - 1.5) * 0.2 for x in xs], [r["lat"][key] for _, r in rows], width=0.2, label=key[:-3])
        ax.set_yscale("log")
        save_bars(plt, fig, ax, [n for n, _ in rows], 7, "us (16T/16Q)", os.path.join(figdir, "latency.png"))
        w("## Latency at 16T/16Q (stock format)")
        w("")
        w("![average, p99, p99.9 and maximum latency per workload](performance/latency.png)")
        w("")

    # ---- WAF
    waf = res.get("waf")
    if waf or ss:
        w("## Write amplification against the formula")
        w("")
        w("Formula (models.md): WAF = a / (a + W0(-a e^-a)), a = 1 + rho; greedy cleaning, uniform random writes.")
        w("")
        if waf:
            w("`%s`: one pipe of 2x2 dies, 510 data LEBs of 256 4 KiB sectors, no faults, data sectors only:" % waf["command"])
            w("")
            w("| rho (format) | rho (effective) | measured WAF | formula WAF | measured / formula |")
            w("|---|---|---|---|---|")
            for r in waf["uniform"]:
                w("| %.2f | %.3f | %.3f | %.3f | %.3f |" % (r["rho"], r["rho_effective"], r["measured"], r["formula"],
                                                         r["measured"] / r["formula"]))
            w("")
            if waf["skewed"]:
                w("80% of writes to 20% of the space, rho 0.28: " + "; ".join(
                    "%s %.3f" % (s["policy"], s["waf"]) for s in waf["skewed"]) + ".")
                w("")
        if ss and sh:
            w("On the duo-slc card at steady state (the last round; data sectors only, parity adds 1/23 on top):")
            w("")
            w("| format | user GB | rho (format) | measured WAF (last 5 rounds) | formula WAF | measured / formula |")
            w("|---|---|---|---|---|---|")
            # The formats' nominal spare (ftl.h ReserveMode): stock 28% over user capacity,
            # high-performance 20% less user capacity than stock.
            for d, lab, rho in ((ss, "stock", 0.28), (sh, "high-performance", 1.28 / 0.8 - 1)):
                user = d["phases"]["attach_fresh"]["user_bytes"]
                win = d["phases"]["rounds"][-5:]
                waf_m = sum(r.get("waf", 0) for r in win) / len(win)
                w("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (lab, user / 1e9, rho, waf_m, waf_formula(rho),
                                                               waf_m / waf_formula(rho)))
            w("")
            w("The format sets the user capacity from what the flash holds after its fixed costs (metadata LEBs, "
              "parity, summaries, the groomer's free LEBs, bad blocks), so rho is the format's nominal spare. "
              "Data sectors only: FlashBack's parity adds 1/23 of programs on top.")
            w("")
