#!/usr/bin/env python3
"""The 16-core model of issue 35: predicts tx/s of 16 writers from per-commit costs
measured on the development machine, and checks the prediction against a run.

  model16.py model16.json run16.jsonl WRITERS

The model (docs/bench-history/2026-12-05-cpu-per-commit-16-core-model.md, "A model for
16 cores"), per workload, N writers on P cores, k = this machine's CPU time per commit of
stock SQLite with one writer (bulk, no sync) over the development machine's (the same code: k < 1 is a faster core), F = this
disk's fdatasync time (median of machine.fdatasync_us of the runs):

  engine, no sync:   X = min(P / (k c), 1 / (k s), N / (k w))
      c  CPU per commit of the whole process (writers, compactor, grower) at 16 writers
      s  the serial section per commit: CPU that one commit at a time can run (under the
         stripe of page 1 every commit holds: validation, epoch, install; the group's log
         write; for hot, the turn: the holder's whole transaction up to its install)
      w  CPU per commit on the committing thread (c less the background workers' share)
  engine, FULL:      X = min(X(no sync), N / (k w + 1.5 F))
      a commit waits on average for the end of the sync in progress and then for its own
      group's (1.5 F); the group shares it
  stock (busy wait), no sync:  X = h / (k c1)
      c1 its CPU per commit with one writer: the write lock lets one transaction at a time;
      h  the hand-off efficiency, 16 waiting writers against one (measured: tx/s of 16
         over tx/s of 1)
  stock (busy wait), FULL:     X = 1 / (k c1 / h + y F)
      y  its syncs per commit (fsyncs_per_commit, about 1)

The `sqlite` variant (busy timeout 0, the application retries) is reported, not predicted.
A cell passes when measured / predicted is within the model's band.
"""
import json, statistics, sys

def main():
    model = json.load(open(sys.argv[1]))
    rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    n = int(sys.argv[3])
    ok = [r for r in rows if "tx_per_s" in r]
    failed = [r for r in rows if "error" in r]
    def cell(wl, variant, writers, sync):
        for r in ok:
            if r["workload"] == wl and r["variant"] == variant and r["writers"] == writers and r["synchronous"] == sync:
                return r
        return None
    ref = cell("bulk", "sqlite", 1, "off")
    if ref is None:
        print("no calibration run (bulk, sqlite, 1 writer, --sync off)")
        return 2
    k = ref["cpu_us_per_commit"] / model["calibration"]["stock1_bulk_off_cpu_us"]
    fs = [r["machine"]["fdatasync_us"] for r in ok if r.get("machine", {}).get("fdatasync_us")]
    f_us = statistics.median(fs) if fs else 0.0
    cores = ok[0]["machine"]["cores"]
    lo, hi = model["band"]
    print(f"# 16-core check (issue 35): {cores} cores, {ok[0]['machine'].get('cpu', '?')}, "
          f"fdatasync {f_us:.0f} us, k = {k:.2f} (CPU per commit here / there, stock 1 writer)\n")
    print("| workload | variant | sync | writers | predicted tx/s | measured tx/s | measured / predicted | CPU us/commit | csw/commit | fsyncs/commit | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for wl, m in model["workloads"].items():
        for sync in ("off", "full"):
            for variant in ("mw", "sqlite-wait", "sqlite"):
                r = cell(wl, variant, n, sync)
                pred = None
                if variant == "mw":
                    e = m["mw"]
                    x_off = min(cores / (k * e["c_us"]), 1.0 / (k * e["s_us"]), n / (k * e["w_us"])) * 1e6
                    pred = x_off if sync == "off" else min(x_off, n / (k * e["w_us"] + 1.5 * f_us) * 1e6)
                elif variant == "sqlite-wait":
                    s = m["stock"]
                    pred = s["h"] / (k * s["c1_us"]) * 1e6 if sync == "off" else \
                        1e6 / (k * s["c1_us"] / s["h"] + s["syncs_per_commit"] * f_us)
                if r is None:
                    print(f"| {wl} | {variant} | {sync} | {n} | {pred or 0:.0f} | (no run) | | | | | missing |")
                    bad += pred is not None
                    continue
                x = r["tx_per_s"]
                ratio = x / pred if pred else None
                verdict = "reported" if pred is None else ("ok" if lo <= ratio <= hi else "OUTSIDE")
                bad += verdict == "OUTSIDE"
                print(f"| {wl} | {variant} | {sync} | {n} | {'' if pred is None else f'{pred:.0f}'} | {x:.0f} | "
                      f"{'' if ratio is None else f'{ratio:.2f}'} | {r['cpu_us_per_commit']:.1f} | "
                      f"{r['csw_per_commit']:.2f} | {r.get('fsyncs_per_commit', 0):.2f} | {verdict} |")
    print()
    for wl in model["workloads"]:
        for sync in ("off", "full"):
            a, b = cell(wl, "mw", n, sync), cell(wl, "sqlite-wait", n, sync)
            if a and b:
                print(f"- {wl}, --sync {sync}, {n} writers: engine / stock (busy wait) = {a['tx_per_s'] / b['tx_per_s']:.2f}x")
    for r in failed:
        print(f"- failed run: {r['workload']} {r['variant']} x{r['writers']}: {r['error']}")
    print(f"\n{bad} predicted cell(s) outside the band {lo}..{hi}; {len(failed)} failed run(s)")
    return 2 if failed else (1 if bad else 0)

sys.exit(main())
