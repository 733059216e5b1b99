#!/usr/bin/env bash
# Checks the 16-core prediction of issue 35 (bench/device/model16.json,
# docs/bench-history/2026-12-05-cpu-per-commit-16-core-model.md, "A model for 16 cores") on the machine it runs on, in one command and under 10 minutes:
#
#   bench/device/run16.sh [OUTDIR]          (default bench/results/run16)
#
# 1. builds zig-out/bin/mwbench if it is missing (node scripts/zig.mjs build);
# 2. runs mwbench: bulk, hot, transfer x sqlite, sqlite-wait, mw x 1 and 16 writers, threads,
#    with --sync off and with --sync full (0.5 s warm-up + 2.5 s measured each: 72 runs, about
#    4 to 5 minutes with set-up and checks; RUN16_DURATION and RUN16_WARMUP override; the
#    harness's progress goes to OUTDIR/run16.log);
# 3. predicts every 16-writer cell from the per-commit costs measured on the development
#    machine (model16.json), scaled by this machine's core speed (calibrated by stock SQLite
#    with one writer, bulk, --sync off: the same code on both machines) and with this disk's
#    fdatasync time (machine.fdatasync_us of the runs), and prints prediction against
#    measurement. Exit 0 when every predicted cell is within the model's stated band
#    (model16.json "band"), 1 when one is not (the model is wrong there: the table says
#    where), 2 when a run failed.
# RUN16_DRY=1 runs the same with 2 writers instead of 16 and 0.3 + 1 s (a local dry run
# of the script's mechanics; its predictions are for 2 writers on the cores there are).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bench/results/run16}
mkdir -p "$out"
start=$(date +%s)
if [ ! -x "$root/zig-out/bin/mwbench" ]; then
  (cd "$root" && node scripts/zig.mjs build) || { echo "run16: build failed" >&2; exit 2; }
fi
writers=16 warm=${RUN16_WARMUP:-0.5} dur=${RUN16_DURATION:-2.5}
if [ "${RUN16_DRY:-0}" = 1 ]; then writers=2 warm=0.3 dur=1; fi
echo "run16: $(nproc) cores, $(uname -r), writers 1,$writers, ${warm}+${dur} s a run" >&2
rm -f "$out/run16.jsonl" "$out/run16.log"
status=0
for sync in off full; do
  "$root/zig-out/bin/mwbench" --workloads bulk,hot,transfer --variants sqlite,sqlite-wait,mw \
    --writers "1,$writers" --modes threads --sync "$sync" --warmup "$warm" --duration "$dur" \
    --dir "$out/db" --out "$out/run16.jsonl" --label "run16-$sync" 2>>"$out/run16.log" || status=2
  echo "run16: --sync $sync done ($(( $(date +%s) - start )) s)" >&2
done
python3 "$root/bench/device/model16.py" "$root/bench/device/model16.json" "$out/run16.jsonl" "$writers" \
  | tee "$out/run16.md"
check=${PIPESTATUS[0]}
echo "run16: $(( $(date +%s) - start )) s" >&2
[ "$status" -ne 0 ] && exit 2
exit "$check"
