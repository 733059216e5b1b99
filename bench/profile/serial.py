#!/usr/bin/env python3
"""The inputs of the 16-core model (bench/device/model16.py) from one profile of the engine:

  perf script -F comm,tid,ip,sym | serial.py LIB.a CPU_US_PER_COMMIT [turn]

prints, in us per commit (shares of the samples times the run's CPU per commit):
  w  the committing threads' CPU (everything but the background workers' threads)
  s  the serial section: CPU (not waits) in what one commit at a time runs: under the
     stripes (validate, assign, install) and the group's log write (mw_file_pwritev on a
     writer thread); with "turn" (the hot workload: a queued lane's whole transaction
     runs alone, up to its install) every writer-thread sample outside `complete` (the
     log submit and visibility after the install, which overlap the next holder).
"""
import subprocess, sys

lib, cpu, turn = sys.argv[1], float(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "turn"
out = subprocess.run(["nm", "-A", lib], capture_output=True, text=True).stdout
en = set()
for line in out.splitlines():
    p = line.split()
    if len(p) == 3 and p[1] in "TtWw" and not p[0].split(":")[-2].endswith("sqlite3.o"):
        en.add(p[2])
SCHED = ("finish_task_switch", "__schedule", "schedule", "futex_wait", "try_to_wake_up", "futex_wake")
SERIAL = ("validate", "assign", "install", "install_version", "mw_growth_apply")
blocks = [b for b in sys.stdin.read().split("\n\n") if b.strip()]
samples = []
for b in blocks:
    ls = b.strip().split("\n")
    tid = ls[0].split()[1] if len(ls[0].split()) > 1 else ""
    fr = [l.split()[1].split("+")[0].split(".")[0] for l in ls[1:] if len(l.split()) > 1]
    samples.append((tid, fr))
workers = {tid for tid, fr in samples if "worker_main" in fr}
tot = len(samples)
bg = ser = comp = 0
for tid, fr in samples:
    if tid in workers:
        bg += 1
        continue
    sched = any(f.startswith(SCHED) for f in fr)
    eng = [f for f in fr if f in en]
    in_commit = "mw_commit" in eng
    if in_commit and not sched and any(f in SERIAL for f in eng):
        ser += 1
    elif eng and eng[-1] == "mw_file_pwritev" and not sched:  # the log write (stack cut there)
        ser += 1
    if "complete" in eng:
        comp += 1
w = cpu * (tot - bg) / tot
s = cpu * ser / tot
if turn:
    s = cpu * (tot - bg - comp) / tot
print(f"samples {tot}, background {100 * bg / tot:.1f}%, serial {100 * ser / tot:.1f}%, complete {100 * comp / tot:.1f}%")
print(f"w_us {w:.1f}  s_us {s:.1f}  c_us {cpu:.1f}")
