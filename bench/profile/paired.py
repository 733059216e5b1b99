#!/usr/bin/env python3
"""Alternating paired runs of two mwbench binaries (before, after) on the same
configurations: A B A B ... N pairs, then the median of each figure per binary.

  paired.py BEFORE AFTER N OUTDIR -- MWBENCH-ARGS...

Every run writes its JSON lines into OUTDIR/{before,after}.jsonl (with the pair number
in --label); the table printed has, per workload/variant/writers/sync, the medians of
tx/s, CPU us per commit, context switches per commit and retries per 100, and the
median of the per-pair ratios after/before of tx/s and of CPU per commit.
"""
import json, os, statistics, subprocess, sys

def main():
    before, after, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    args = sys.argv[sys.argv.index("--") + 1:]
    os.makedirs(out, exist_ok=True)
    for i in range(n):
        for tag, binary in (("before", before), ("after", after)):
            f = os.path.join(out, tag + ".jsonl")
            r = subprocess.run([binary, *args, "--label", f"{tag}-{i}", "--out", f,
                                "--dir", os.path.join(out, "db")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode != 0:
                print(f"run {tag} {i}: exit {r.returncode}", file=sys.stderr)
                sys.exit(1)
    rows = {}
    for tag in ("before", "after"):
        for line in open(os.path.join(out, tag + ".jsonl")):
            d = json.loads(line)
            if "tx_per_s" not in d:
                continue
            key = (d["workload"], d["variant"], d["mode"], d["writers"], d.get("synchronous"))
            pair = int(d["label"].split("-")[1])
            rows.setdefault(key, {}).setdefault(tag, {})[pair] = d
    print("| workload | variant | mode | writers | sync | tx/s before | tx/s after | ratio (median of pairs) "
          "| CPU us/commit before | after | ratio | csw/commit before | after | retries/100 before | after |")
    print("|" + "---|" * 15)
    med = statistics.median
    for key, by in sorted(rows.items()):
        b, a = by.get("before", {}), by.get("after", {})
        pairs = sorted(set(b) & set(a))
        if not pairs:
            continue
        def m(side, f):
            return med([side[p][f] for p in pairs])
        tr = med([a[p]["tx_per_s"] / b[p]["tx_per_s"] for p in pairs])
        cr = med([a[p]["cpu_us_per_commit"] / b[p]["cpu_us_per_commit"] for p in pairs])
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {m(b,'tx_per_s'):.0f} | {m(a,'tx_per_s'):.0f} "
              f"| {tr:.2f} | {m(b,'cpu_us_per_commit'):.1f} | {m(a,'cpu_us_per_commit'):.1f} | {cr:.2f} "
              f"| {m(b,'csw_per_commit'):.2f} | {m(a,'csw_per_commit'):.2f} | {m(b,'retries_per_100'):.2f} "
              f"| {m(a,'retries_per_100'):.2f} |")

main()
