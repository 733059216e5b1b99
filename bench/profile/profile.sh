#!/usr/bin/env bash
# Profiles the measured period of one mwbench configuration and splits its CPU by owner
# (SQLite, the engine, the harness: split.py).
#   bench/profile/profile.sh OUTDIR WORKLOAD VARIANT WRITERS SYNC [SECONDS]
# perf attaches to the runner process (all its threads) after set-up and warm-up, for
# SECONDS (default 3), at 499 Hz (PERF_HZ) with DWARF call graphs (libc has no frame pointers:
# with -g, a sample in malloc or vfprintf loses its caller).
set -euo pipefail
out=$1 workload=$2 variant=$3 writers=$4 sync=$5 secs=${6:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
tag="$workload-$variant-$writers-$sync"
"$root/zig-out/bin/mwbench" --workloads "$workload" --variants "$variant" --writers "$writers" \
  --sync "$sync" --warmup 2 --duration $((secs + 3)) --dir "$out/db" --out "$out/$tag.jsonl" \
  2>"$out/$tag.log" &
top=$!
sleep 3
runner=""
for _ in $(seq 50); do
  # the runner is the forked child that holds the writer threads
  for c in $(pgrep -P "$top" || true); do
    if [ "$(ls /proc/"$c"/task | wc -l)" -gt "$writers" ]; then runner=$c; fi
  done
  [ -n "$runner" ] && break
  sleep 0.1
done
[ -n "$runner" ] || { echo "no runner found" >&2; wait "$top"; exit 1; }
perf record -F ${PERF_HZ:-499} --call-graph dwarf,65528 -p "$runner" -o "$out/$tag.perf" -- sleep "$secs" 2>"$out/$tag.perf.log"
wait "$top"
perf script -i "$out/$tag.perf" -F comm,tid,ip,sym 2>/dev/null |
  python3 "$root/bench/profile/split.py" "$root/zig-out/lib/libmwsqlite3.a" "$root/zig-out/bin/mwbench" \
  >"$out/$tag.split.txt"
cat "$out/$tag.split.txt"
