#!/usr/bin/env bash
# Where the threads of one mwbench configuration sleep: perf records every context
# switch (sched:sched_switch, DWARF call graphs) of the runner for SECONDS after
# set-up and warm-up, and prints the share of switches by the project's frames that
# led to them ("wait": the thread blocked; "preempt": the kernel took the CPU away).
#   bench/profile/switches.sh MWBENCH OUTDIR WORKLOAD VARIANT WRITERS SYNC [SECONDS]
set -euo pipefail
bin=$1 out=$2 workload=$3 variant=$4 writers=$5 sync=$6 secs=${7:-2}
mkdir -p "$out"
tag="sw-$workload-$variant-$writers-$sync"
"$bin" --workloads "$workload" --variants "$variant" --writers "$writers" --sync "$sync" \
  --warmup 2 --duration $((secs + 3)) --dir "$out/db" --out "$out/$tag.jsonl" 2>/dev/null &
top=$!
sleep 3
runner=""
for _ in $(seq 50); do
  for c in $(pgrep -P "$top" || true); do
    if [ "$(ls /proc/"$c"/task | wc -l)" -gt "$writers" ]; then runner=$c; fi
  done
  [ -n "$runner" ] && break
  sleep 0.1
done
[ -n "$runner" ] || { echo "no runner found" >&2; wait "$top"; exit 1; }
perf record -e sched:sched_switch --call-graph dwarf,16384 -p "$runner" -o "$out/$tag.perf" \
  -- sleep "$secs" 2>"$out/$tag.perf.log"
wait "$top"
perf script -i "$out/$tag.perf" -F comm,tid,ip,sym 2>/dev/null | python3 -c '
import sys, collections
c = collections.Counter(); tot = 0
skip = ("__x64", "do_syscall", "entry_SYSCALL", "futex", "__futex", "schedule", "__schedule",
        "finish_task", "try_to_wake", "_raw_spin", "x64_sys", "do_futex", "syscall_exit",
        "irqentry", "asm_", "sysvec", "__sysvec", "exit_to_user", "__lll", "lll_", "___pthread",
        "__pthread", "pthread", "__GI", "[unknown]", "mw_mutex", "mw_cond", "__sched", "preempt",
        "__cond_resched")
for b in sys.stdin.read().split("\n\n"):
    ls = b.strip().split("\n")
    if len(ls) < 2:
        continue
    tot += 1
    fr = [l.split()[1].split("+")[0] for l in ls[1:] if len(l.split()) > 1]
    kind = "preempt" if any(f.startswith(("irqentry_exit", "preempt_schedule", "exit_to_user_mode_loop")) for f in fr[:6]) else "wait"
    user = [f for f in fr if not f.startswith(skip)]
    c[kind + ": " + " < ".join(user[:3])] += 1
print("switches", tot)
for k, n in c.most_common(20):
    print(f"{100 * n / tot:5.1f}% {k}")
'
python3 -c "import json,sys; [print(\"tx/s\", d[\"tx_per_s\"], \"cpu us/commit\", d[\"cpu_us_per_commit\"], \"csw/commit\", d[\"csw_per_commit\"]) for d in map(json.loads, open(sys.argv[1]))]" "$out/$tag.jsonl"
