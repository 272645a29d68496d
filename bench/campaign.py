#!/usr/bin/python3
"""The fault campaign: docs/campaign.md (scripts/campaign runs this).

  campaign.py BUILD_DIR [--out docs/campaign.md] [--seeds 3000] [--kills 200]
              [--exhaustion-seeds 10] [--quick]

Runs, each test appending its counts to one JSON-lines file (VSL_CAMPAIGN_OUT):
  1. power cuts at random instants, virtual time: tests/ftl_model_test with VSL_SEEDS
     seeds (random workloads, power cuts and clean restarts, die failures in ~30% of the
     seeds: sequential and double ones among them), every sector checked against a
     reference model after every cut and restart;
  2. SIGKILLs of vsld under fio verify and an exact checker, real time:
     tests/block/nbd_crash_test.sh with --kills rounds;
  3. reserve exhaustion: tests/power_health_test (bad blocks eat the reserve until the LUN is
     read-only, every acknowledged sector checked at each step) over --exhaustion-seeds
     seeds.
Then it writes the report: exposures (cuts, kills, die failures, ...) and the failure
classes of the power-fault literature (tests/testutil/campaign.h): bit corruption,
shorn writes, flying writes, unserializable writes, metadata corruption, dead device,
plus read errors of acknowledged data. All must be zero; exit 1 otherwise (or if a part
failed).
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_report import git, machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ["bit_corruption", "shorn_writes", "flying_writes", "unserializable_writes", "metadata_corruption",
           "dead_device", "read_errors"]
CLASS_NAMES = {"bit_corruption": "bit corruption", "shorn_writes": "shorn writes", "flying_writes": "flying writes",
               "unserializable_writes": "unserializable writes", "metadata_corruption": "metadata corruption",
               "dead_device": "dead device", "read_errors": "read errors (acknowledged data)"}


def run(cmd, env, log, timeout):
    t0 = time.time()
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        r = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    return r.returncode, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "campaign.md"))
    ap.add_argument("--seeds", type=int, default=3000, help="power-cut campaign seeds (about 2.2 cuts each)")
    ap.add_argument("--kills", type=int, default=200, help="SIGKILL rounds of vsld under fio verify")
    ap.add_argument("--exhaustion-seeds", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="a few of each (smoke test)")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.kills, a.exhaustion_seeds = 40, 2, 2
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    t0 = time.time()
    tmp = tempfile.mkdtemp()
    jsonl = os.path.join(tmp, "campaign.jsonl")
    log = os.path.join(os.path.dirname(a.out), "campaign.log") if not a.quick else os.path.join(tmp, "campaign.log")
    open(log, "w").close()
    env = dict(os.environ, VSL_CAMPAIGN_OUT=jsonl, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    parts = []

    # 1. Power cuts: the model test's four shards, two at a time.
    model = os.path.join(a.build, "tests", "ftl_model_test")

    def shard(k):
        e = dict(env, VSL_SEEDS=str(a.seeds))
        return run([model, "--gtest_filter=Seeds/FtlModelShard.*/%d" % k], e, log + ".shard%d" % k, 7200)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        res = list(ex.map(shard, range(4)))
    for k in range(4):
        with open(log, "a") as f, open(log + ".shard%d" % k) as g:
            f.write(g.read())
        os.unlink(log + ".shard%d" % k)
    parts.append({"part": "power cuts (ftl_model_test, VSL_SEEDS=%d)" % a.seeds,
                  "ok": all(rc == 0 for rc, _ in res), "seconds": max(s for _, s in res)})
    print("power cuts: %s in %.0f s" % ("ok" if parts[-1]["ok"] else "FAILED", parts[-1]["seconds"]), flush=True)

    # 2. SIGKILLs of vsld under fio verify.
    rc, secs = run([os.path.join(ROOT, "tests", "block", "nbd_crash_test.sh"), os.path.join(a.build, "tools", "vsld"),
                    os.path.join(a.build, "tools", "vslctl"), str(a.kills), "4242"], env, log, 4 * 3600)
    parts.append({"part": "SIGKILL of vsld under fio verify (nbd_crash_test.sh, %d rounds, seed 4242)" % a.kills,
                  "ok": rc == 0, "skipped": rc == 77, "seconds": secs})
    print("kills: %s in %.0f s" % ("ok" if rc == 0 else "skipped" if rc == 77 else "FAILED", secs), flush=True)

    # 3. Reserve exhaustion, one run per seed.
    health = os.path.join(a.build, "tests", "power_health_test")
    ok, secs = True, 0
    for s in range(1, a.exhaustion_seeds + 1):
        rc, dt = run([health, "--gtest_filter=HealthTest.ReserveExhaustion*"], dict(env, VSL_SEED=str(s)), log, 1800)
        ok = ok and rc == 0
        secs += dt
    parts.append({"part": "reserve exhaustion (power_health_test, VSL_SEED=1..%d)" % a.exhaustion_seeds, "ok": ok,
                  "seconds": secs})
    print("exhaustion: %s in %.0f s" % ("ok" if ok else "FAILED", secs), flush=True)

    rows = [json.loads(l) for l in open(jsonl)] if os.path.exists(jsonl) else []
    comps = {}
    for r in rows:
        c = comps.setdefault(r["component"], {})
        for k, v in r.items():
            if k != "component":
                c[k] = c.get(k, 0) + v
    total = {k: sum(c.get(k, 0) for c in comps.values()) for k in CLASSES}
    bad = sum(total.values()) > 0 or not all(p["ok"] or p.get("skipped") for p in parts)

    L = []
    w = L.append
    meta_commit = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    m = machine()
    w("# Fault campaign report")
    w("")
    w("Generated by `scripts/campaign` (`bench/campaign.py`) at commit `%s`%s on %s, in %.0f min." % (
        meta_commit, " (with uncommitted changes)" if dirty else "",
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), (time.time() - t0) / 60))
    w("Machine: %s, %s cores, %s GiB RAM, %s, kernel %s." % (m["cpu"], m["cores"], m["memory_gib"], m["os"], m["kernel"]))
    if a.quick:
        w("")
        w("**Quick run: a few of each; a smoke test, not the campaign.**")
    w("")
    w("Verdict: **%s**" % ("every failure class zero" if not bad else "FAILURES FOUND (see below and the log)"))
    w("")
    w("The classes are those of the power-fault literature (Zheng et al., FAST '13), as "
      "`tests/testutil/campaign.h` defines them: a wrong sector is *unserializable* if it holds an older "
      "version (or zeroes) after a newer one was acknowledged, *shorn* if it holds 512-byte pieces of "
      "different versions, *flying* if it holds another address's data, *bit corruption* otherwise; "
      "*metadata corruption* is an attach that refuses the metadata (or a LUN that fails to attach), a "
      "*dead device* one that does not come back. Read errors of acknowledged data are counted beside them "
      "(after a double die failure the model test allows IOError for sectors the FTL lists as lost: those are "
      "counted as exposures, not failures).")
    w("")
    w("| part | what it did | %s |" % " | ".join(CLASS_NAMES[k] for k in CLASSES))
    w("|---|---|%s" % ("---|" * len(CLASSES)))
    for name, c in comps.items():
        exp = ", ".join("%s %s" % (k.replace("_", " "), "{:,}".format(v)) for k, v in c.items() if k not in CLASSES)
        w("| %s | %s | %s |" % (name, exp, " | ".join(str(c.get(k, 0)) for k in CLASSES)))
    w("| **total** | | %s |" % " | ".join("**%d**" % total[k] for k in CLASSES))
    w("")
    w("| part | passed | wall s |")
    w("|---|---|---|")
    for p in parts:
        w("| %s | %s | %.0f |" % (p["part"], "skipped" if p.get("skipped") else "yes" if p["ok"] else "**no**", p["seconds"]))
    w("")
    w("What each part checks:")
    w("")
    w("- `ftl_model`: the FTL on a test-small card in virtual time against a reference model: random writes, "
      "trims, reads and flushes (1-3 sectors, FUA at random), grooming at high fill; each round ends in a "
      "power cut at a random instant, a clean restart or a live check, then every sector touched is read: it "
      "must hold its last acknowledged contents or those of a write still in flight at the cut. 30% of the "
      "seeds kill a die at a random instant (FlashBack rebuilds online); some of those kill a second die after "
      "the rebuild (sequential) or before it ends (double). 512 B and 4 KiB sectors, greedy and cost-benefit "
      "grooming.")
    w("- `nbd_sigkill`: vsld serving a duo-slc-small card in real time; fio writes 4 KiB blocks with crc32c "
      "verify headers to two LUNs while an exact checker (libnbd) writes versioned blocks to a third; vsld is "
      "SIGKILLed at a random instant, restarted (recovery by scan, the controller's protected buffer kept as a "
      "real card keeps it powered), every LUN must come back online, and fio's saved verify state and the "
      "checker replay every acknowledged write.")
    w("- `health_exhaustion`: blocks fail their erases one at a time until the reserve is gone: the LUN walks "
      "healthy, reduced-write, read-only, and every acknowledged sector is read back after each step.")
    w("")
    w("Replay: `scripts/campaign --seeds N --kills N`; a failing power-cut seed replays with "
      "`VSL_SEED=<seed> build/tests/ftl_model_test`; the kill rounds with "
      "`tests/block/nbd_crash_test.sh build/tools/vsld build/tools/vslctl <rounds> 4242`. The raw counts are in "
      "[campaign.json](campaign.json) and the full output in campaign.log beside this file (not committed).")
    w("")
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    with open(os.path.join(os.path.dirname(a.out), "campaign.json"), "w") as f:
        json.dump({"components": comps, "total": total, "parts": parts, "commit": meta_commit}, f, indent=1)
    print("wrote %s: %s" % (a.out, "all zero" if not bad else "FAILURES"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
