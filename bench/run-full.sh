#!/usr/bin/env bash
# bench/run-full.sh: the full comparison in one go, sized for a 16-core machine and under
# 8 minutes: native C (mwbench) and the TypeScript harness under Bun, every workload and
# variant, 1/4/16 writers, threads and processes; the turso peer (threads) when it is
# installed in bench/peer; Deno on a subset (bulk and hot, sqlite and mw, threads). Every
# run is validated; a failed check is an "error" line and makes this script exit 1.
#
#   bench/run-full.sh [OUT]      (default OUT: bench/results/full-<UTC time>)
#
# Writes to OUT: native.jsonl, ts-bun.jsonl, ts-deno.jsonl, turso.jsonl, the progress of every
# step (steps.log, run-full.log), report.md and chart.svg (node bench/report.mjs), and the databases of the
# runs under OUT/db (on the disk under test; set DBDIR to put them elsewhere).
# Environment: NATIVE_ONLY=1 (only mwbench: what a bare machine with zig-out/ runs; it is also
# what happens when no bun is found), WRITERS (default 1,4,16; 64 where the machine allows), BUDGET_S (default 450: the seconds the runs may
# take; the measured period of each run is derived from it), WARMUP/DURATION (fix them
# instead; the published figures use WARMUP=2 DURATION=8, which takes about 50 minutes).
# Needs: the bootstrap (node scripts/bootstrap.mjs); builds the native code if missing.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${1:-bench/results/full-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" || { echo "run-full: cannot create $OUT"; exit 2; }
OUT=$(cd "$OUT" && pwd)
DBDIR=${DBDIR:-$OUT/db}
WRITERS=${WRITERS:-1,4,16}
BUDGET_S=${BUDGET_S:-450}
START=$(date +%s)
log() { printf '[run-full %4ss] %s\n' $(($(date +%s) - START)) "$*" | tee -a "$OUT/run-full.log"; }

# On a bare machine (only zig-out/ carried over, no node_modules) the native harness runs
# alone: the TypeScript harness, the peer and Deno are skipped with a line in the log.
if command -v node >/dev/null 2>&1; then
  BUN=$(node bench/runtimes.mjs bun 2>/dev/null || true)
  DENO=$(node bench/runtimes.mjs deno 2>/dev/null || true)
else
  BUN=$(command -v bun || true)
  DENO=$(command -v deno || true)
fi
if [ -n "${NATIVE_ONLY:-}" ]; then BUN= DENO=; fi
[ -n "$BUN" ] || log "no bun here (node scripts/bootstrap.mjs brings it): the TypeScript harness and the turso peer are skipped"

if [ ! -x zig-out/bin/mwbench ] || { [ -n "$BUN" ] && [ ! -e zig-out/lib/libmwsqlite3.so ] && [ ! -e zig-out/lib/libmwsqlite3.dylib ]; }; then
  log "building (node scripts/zig.mjs build)"
  node scripts/zig.mjs build >"$OUT/build.log" 2>&1 || { log "build failed, see $OUT/build.log"; exit 1; }
fi

# Runs planned: native and Bun 6 workloads x 4 variants x writers x 2 modes, turso 6 x writers,
# Deno 2 x 2 x writers. Each costs its warm-up + measured period + about 0.4 s of setup.
NW=$(echo "$WRITERS" | tr ',' '\n' | grep -c .)
if [ -n "$BUN" ]; then RUNS=$((6 * 4 * NW * 2 * 2 + 6 * NW + 4 * NW)); else RUNS=$((6 * 4 * NW * 2)); fi
if [ -z "${DURATION:-}" ]; then
  PER=$(awk -v b="$BUDGET_S" -v r="$RUNS" 'BEGIN { p = b / r - 0.4; if (p < 0.5) p = 0.5; printf "%.2f", p }')
  WARMUP=${WARMUP:-$(awk -v p="$PER" 'BEGIN { w = p * 0.2; if (w < 0.1) w = 0.1; printf "%.2f", w }')}
  DURATION=$(awk -v p="$PER" -v w="$WARMUP" 'BEGIN { d = p - w; if (d < 0.4) d = 0.4; printf "%.2f", d }')
fi
WARMUP=${WARMUP:-0.25}
COMMON=(--writers "$WRITERS" --warmup "$WARMUP" --duration "$DURATION")
log "out $OUT, databases in $DBDIR, writers $WRITERS, $RUNS runs of ${WARMUP} s + ${DURATION} s"
log "bun ${BUN:-none}; deno ${DENO:-none}; $(nproc 2>/dev/null || sysctl -n hw.ncpu) cores"

status=0
step() { # name, command...
  local name=$1
  shift
  log "$name: $*"
  echo "=== $name: $*" >>"$OUT/steps.log"
  "$@" 2>>"$OUT/steps.log"
  local rc=$?
  if [ $rc -ne 0 ]; then
    log "$name: exit $rc (see $OUT/steps.log)"
    status=1
  fi
  log "$name: done"
}

# Native and Bun alternate per workload and mode, so that the two harnesses measure the same
# configuration minutes apart at most: a shared or virtual disk drifts over a run, and the gap
# between the harnesses is itself a figure (the cost of the binding).
for wl in bulk samepage hot transfer slow read; do
  for mode in threads processes; do
    step "native-$wl-$mode" zig-out/bin/mwbench --workloads "$wl" --variants all --modes "$mode" "${COMMON[@]}" \
      --dir "$DBDIR/native" --out "$OUT/native.jsonl" --label full
    [ -n "$BUN" ] && step "ts-bun-$wl-$mode" "$BUN" bench/ts/bench.ts --workloads "$wl" --variants all --modes "$mode" "${COMMON[@]}" \
      --dir "$DBDIR/ts" --out "$OUT/ts-bun.jsonl" --label full
  done
done
[ -n "$BUN" ] && step turso "$BUN" bench/peer/turso.ts --workloads all --modes threads,processes "${COMMON[@]}" \
  --dir "$DBDIR/turso" --out "$OUT/turso.jsonl" --label full
if [ -n "$DENO" ]; then
  step ts-deno "$DENO" run -A bench/ts/bench.ts --workloads bulk,hot --variants sqlite,mw --modes threads \
    "${COMMON[@]}" --dir "$DBDIR/deno" --out "$OUT/ts-deno.jsonl" --label full
fi
rm -rf "$DBDIR"

inputs=()
for f in native ts-bun turso ts-deno; do [ -s "$OUT/$f.jsonl" ] && inputs+=("$OUT/$f.jsonl"); done
if ! command -v node >/dev/null 2>&1; then
  log "no node here: run node bench/report.mjs on the JSON lines elsewhere"
elif node bench/report.mjs --out "$OUT" --title "sqlite-multiwriter: full comparison ($(hostname), $(date -u +%Y-%m-%d))" \
  "${inputs[@]}" >/dev/null 2>"$OUT/report.log"; then
  log "report: $OUT/report.md, $OUT/chart.svg"
else
  log "report failed (see $OUT/report.log)"
  status=1
fi
errors=$(cat "${inputs[@]}" 2>/dev/null | grep -c '"error":' || true)
log "finished in $(($(date +%s) - START)) s; $errors failed runs; exit $status"
exit $status
