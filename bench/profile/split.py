#!/usr/bin/env python3
"""Splits a `perf record -g` profile of mwbench into who spent the CPU.

Usage: perf script -i perf.data -F comm,tid,ip,sym --no-demangle | split.py LIB.a [MWBENCH]

Each sample goes to the owner of the leaf-most frame of its stack that is code of the
project: the engine (symbols of the engine's objects in LIB.a), SQLite (symbols of
sqlite3.o in LIB.a; but SQLite's os layer, unix*, called by the engine for its own file
I/O counts for the engine) or the harness (symbols of the mwbench binary that are in neither).
Library and kernel frames below it (memcpy, malloc, a system call, the scheduler) count
for that owner. A sample whose stack holds no frame of the project is "other" (a kernel
thread, or a stack cut short). Independently, a sample whose kernel frames are the
scheduler's or futex's (waking, sleeping, switching) is also counted as "scheduling",
per owner. Prints a table and, per owner, the top leaf-most project functions.
"""
import collections, subprocess, sys

def syms(lib):
    out = subprocess.run(["nm", "-A", lib], capture_output=True, text=True).stdout
    sq, en = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in "TtWw":
            continue
        obj = parts[0].split(":")[-2] if parts[0].count(":") >= 2 else parts[0]
        (sq if obj.endswith("sqlite3.o") else en).add(parts[2])
    return sq, en

def main():
    sq, en = syms(sys.argv[1])
    harness = set()
    if len(sys.argv) > 2:
        out = subprocess.run(["nm", sys.argv[2]], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "Tt" and parts[2] not in sq and parts[2] not in en:
                harness.add(parts[2])
    SCHED = ("schedule", "__schedule", "finish_task_switch", "try_to_wake_up", "futex_wake",
             "futex_wait", "__futex_wait", "futex_wait_queue", "wake_up_q", "do_futex")
    owners = collections.Counter()
    sched = collections.Counter()
    top = collections.defaultdict(collections.Counter)
    entry = collections.Counter()
    ROOTS = ("start_thread", "clone3", "__libc_start_main", "__libc_start_call_main", "_start")
    cut, workers = [], set()
    tid = ""
    total = 0
    frames = []
    def flush():
        nonlocal total
        if not frames:
            return
        total += 1
        owner, fn = "other", ""
        bases = [s.split("+")[0].split(".")[0] for s in frames]
        for i, base in enumerate(bases):
            if base in en:
                owner, fn = "engine", base
                break
            if base in sq:
                owner, fn = "sqlite", base
                # SQLite's os layer (unixWrite, unixRead, ...) called by the engine for
                # its own file I/O (the compactor writes the database file through
                # it) is the engine's work.
                if base.startswith("unix"):
                    above = next((b for b in bases[i + 1:] if b in en or b in sq or b in harness), None)
                    if above in en:
                        owner, fn = "engine", base + " (for " + above + ")"
                break
            if base in harness:
                owner, fn = "harness", base
                break
        owners[owner] += 1
        if owner == "engine":
            # the engine's entry: its outermost frame (the commit, a VFS method SQLite
            # called, a background job)
            outer = fn
            for f in frames:
                base = f.split("+")[0].split(".")[0]
                if base in en:
                    outer = base
            if not any(f.split("+")[0].split(".")[0] in ROOTS for f in frames):
                cut.append((tid, outer))
            else:
                entry[outer] += 1
                if outer == "worker_main":
                    workers.add(tid)
        if owner == "other":
            fn = next((f for f in frames if f and not f.startswith("[unknown]")), "?")
        top[owner][fn] += 1
        if any(f.split("+")[0].split(".")[0] in SCHED for f in frames):
            sched[owner] += 1
        frames.clear()
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            continue
        if not line.startswith((" ", "\t")):
            flush()
            parts = line.split()
            tid = parts[1] if len(parts) > 1 else ""
            continue
        parts = line.split()
        if len(parts) >= 2:
            frames.append(parts[1])
    flush()
    print(f"samples {total}")
    print("| owner | share of samples | of which scheduling (wake, sleep, switch) |")
    print("|---|---|---|")
    for o in ("sqlite", "engine", "harness", "other"):
        n = owners[o]
        print(f"| {o} | {100.0 * n / max(total, 1):.1f}% | {100.0 * sched[o] / max(total, 1):.1f}% |")
    # Stacks the unwinder cut short (it stops in mw_file_pwritev): by thread, a background
    # worker's or a writer's.
    for t, outer in cut:
        entry[outer + (" (stack cut, background worker)" if t in workers else " (stack cut, writer thread)")] += 1
    print("\nthe engine's samples by its outermost frame (entry point):")
    for fn, n in entry.most_common(15):
        print(f"  {100.0 * n / max(total, 1):5.1f}%  {fn}")
    for o in ("sqlite", "engine", "harness", "other"):
        print(f"\ntop leaf-most {o} functions (inclusive of the library and kernel code they called):")
        for fn, n in top[o].most_common(15):
            print(f"  {100.0 * n / max(total, 1):5.1f}%  {fn}")

main()
