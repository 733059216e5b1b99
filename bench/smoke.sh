#!/usr/bin/env bash
# bench/smoke.sh: a quick check of the benchmark harnesses (well under a minute on 2 cores).
#  - native mwbench: every workload with 2 writers for 0.3 s (threads; bulk and transfer also
#    as processes), every figure validated (exit 0, no "error" line, one "validated" line
#    per run that is not skipped, with a mean latency, a fairness share and the wait in flight
#    at the end that make sense);
#  - the TypeScript harness under Bun (every workload, threads; bulk also as processes) and
#    under Deno (one run), the same way;
#  - report.mjs renders the lines (Markdown with no FAILED row, an SVG);
#  - a run whose check fails is an error exit, not a figure (MWBENCH_FAULT=count makes a
#    writer claim a commit that never happened);
#  - a writer that hangs after the run is an error line, not a hung benchmark
#    (MWBENCH_FAULT=hang, with the watchdog shortened by MWBENCH_HANG_S=1);
#  - bad input (unknown workload, variant or mode, a writers list that does not parse, a run
#    directory that cannot be written, an unknown option) exits 2 before anything runs.
#  - --sync off reaches the writers and every line has the CPU figures per commit.
# Needs the native build (node scripts/zig.mjs build) and the bootstrap's runtimes.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-smoke.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { printf 'ok    %s\n' "$1"; }
bad() { printf 'FAIL  %s\n' "$1"; fails=$((fails + 1)); }

MW="$ROOT/zig-out/bin/mwbench"
if [ ! -x "$MW" ]; then node scripts/zig.mjs build >/dev/null || { echo "build failed"; exit 1; }; fi
BUN=$(node bench/runtimes.mjs bun) || { echo "no bun: run node scripts/bootstrap.mjs"; exit 1; }
DENO=$(node bench/runtimes.mjs deno || true)

# expect_runs FILE N: N result lines, none an error, every non-skipped one validated.
expect_runs() {
  node -e '
    const fs = require("fs");
    const [file, n] = [process.argv[1], Number(process.argv[2])];
    const rows = fs.readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const errors = rows.filter((r) => r.error != null);
    const figs = rows.filter((r) => r.skipped == null && r.error == null);
    // The latency and fairness figures: a mean within the latencies, the least committing
    // writer at most the average, the wait in flight at the end never negative.
    const bad = figs.filter((r) => r.validated !== true || !(r.tx_per_s > 0) || !(r.committed > 0) ||
      !(r.mean_us > 0 && r.mean_us <= r.max_us) || !(r.fewest_share >= 0 && r.fewest_share <= 1) ||
      !(r.open_at_end_max_us >= 0));
    if (rows.length !== n || errors.length || bad.length) {
      console.error(`  ${rows.length} lines (want ${n}), ${errors.length} errors, ${bad.length} unvalidated`);
      for (const r of [...errors, ...bad]) console.error("  " + JSON.stringify(r).slice(0, 300));
      process.exit(1);
    }' "$1" "$2"
}

# 1. native, every workload
if "$MW" --workloads all --variants sqlite,sqlite-wait,mw,mwr --writers 2 --modes threads \
  --warmup 0.1 --duration 0.3 --dir "$T/n" --out "$T/native.jsonl" 2>"$T/native.err" &&
  "$MW" --workloads bulk,transfer --variants sqlite,mw --writers 2 --modes processes \
    --warmup 0.1 --duration 0.3 --dir "$T/n" --out "$T/native.jsonl" 2>>"$T/native.err" &&
  expect_runs "$T/native.jsonl" 28; then
  ok "native: 6 workloads x 4 variants (threads) + 4 process runs, all validated"
else
  bad "native runs"; cat "$T/native.err"
fi

# 1b. native, --sync off: the setting reaches every writer, and the CPU, context-switch and
# log-sync figures per commit are in every line (threads: the process; processes: the sum)
if "$MW" --workloads hot --variants sqlite,mw --writers 2 --modes threads,processes --sync off \
  --warmup 0.1 --duration 0.3 --dir "$T/n" --out "$T/sync.jsonl" 2>"$T/sync.err" &&
  expect_runs "$T/sync.jsonl" 4 && node -e '
    const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const ok = rows.every((r) => r.synchronous === "off" && r.cpu_us_per_commit > 0 && r.csw_per_commit >= 0 &&
      (r.variant === "mw" ? r.log_syncs_per_commit >= 0 : r.log_syncs_per_commit === null));
    process.exit(ok ? 0 : 1);' "$T/sync.jsonl"; then
  ok "native --sync off: 4 runs with cpu_us_per_commit, csw_per_commit, log_syncs_per_commit"
else
  bad "native --sync off runs"; cat "$T/sync.err"
fi

# 2. TypeScript under Bun (and Deno)
if "$BUN" bench/ts/bench.ts --workloads all --variants sqlite,mw --writers 2 --modes threads \
  --warmup 0.1 --duration 0.3 --dir "$T/b" --out "$T/ts.jsonl" 2>"$T/ts.err" &&
  "$BUN" bench/ts/bench.ts --workloads bulk --variants mw,mwr --writers 2 --modes processes \
    --warmup 0.1 --duration 0.3 --dir "$T/b" --out "$T/ts.jsonl" 2>>"$T/ts.err" &&
  "$BUN" bench/ts/bench.ts --workloads transfer --variants bun:sqlite --writers 2 --modes threads \
    --warmup 0.1 --duration 0.3 --dir "$T/b" --out "$T/ts.jsonl" 2>>"$T/ts.err" &&
  expect_runs "$T/ts.jsonl" 15 && grep -q '"variant":"bun:sqlite".*"validated":true' "$T/ts.jsonl"; then
  ok "ts (bun): 6 workloads x 2 variants (Workers) + 2 process runs + bun:sqlite, all validated"
else
  bad "ts (bun) runs"; cat "$T/ts.err"
fi
if [ -n "$DENO" ]; then
  if "$DENO" run -A bench/ts/bench.ts --workloads hot --variants mw,bun:sqlite --writers 2 --modes threads \
    --warmup 0.1 --duration 0.3 --dir "$T/d" --out "$T/deno.jsonl" 2>"$T/deno.err" &&
    expect_runs "$T/deno.jsonl" 2 && grep -q '"variant":"bun:sqlite".*"skipped"' "$T/deno.jsonl"; then
    ok "ts (deno): hot, Workers, validated; bun:sqlite skipped with a note"
  else
    bad "ts (deno) run"; cat "$T/deno.err"
  fi
fi

# 3. the report
if node bench/report.mjs --out "$T/report" "$T/native.jsonl" "$T/ts.jsonl" >/dev/null 2>"$T/report.err" &&
  grep -q '^| bulk | 2 | sqlite |' "$T/report/report.md" && ! grep -q FAILED "$T/report/report.md" &&
  grep -q 'cost of the binding' "$T/report/report.md" && grep -q '<circle' "$T/report/chart.svg"; then
  ok "report: Markdown tables, binding gap and SVG chart"
else
  bad "report"; cat "$T/report.err"
fi

# 4. a failed check is an error exit, not a figure
MWBENCH_FAULT=count "$MW" --workloads samepage --variants sqlite --writers 2 --warmup 0 --duration 0.2 \
  --dir "$T/n" --out "$T/fault.jsonl" 2>/dev/null
rc=$?
if [ "$rc" = 1 ] && grep -q '"error":"check failed' "$T/fault.jsonl" && ! grep -q '"validated"' "$T/fault.jsonl"; then
  ok "native: a failed check exits 1 with an error line"
else
  bad "native: fault not detected (exit $rc)"
fi
MWBENCH_FAULT=count "$BUN" bench/ts/bench.ts --workloads samepage --variants sqlite --writers 2 --warmup 0 \
  --duration 0.2 --dir "$T/b" --out "$T/tsfault.jsonl" 2>/dev/null
rc=$?
if [ "$rc" = 1 ] && grep -q '"error":"check failed' "$T/tsfault.jsonl" && ! grep -q '"validated"' "$T/tsfault.jsonl"; then
  ok "ts: a failed check exits 1 with an error line"
else
  bad "ts: fault not detected (exit $rc)"
fi

# 5. a writer that hangs after the run is reported by the watchdog (threads and processes)
MWBENCH_FAULT=hang MWBENCH_HANG_S=1 "$MW" --workloads hot --variants sqlite --writers 2 --modes threads,processes \
  --warmup 0 --duration 0.2 --dir "$T/n" --out "$T/hang.jsonl" 2>/dev/null
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c '"error":"1 of 2 writers still running' "$T/hang.jsonl")" = 2 ]; then
  ok "native: a hung writer is an error (threads and processes), not a hung benchmark"
else
  bad "native: hang not reported (exit $rc)"
fi
MWBENCH_FAULT=hang MWBENCH_HANG_S=1 "$BUN" bench/ts/bench.ts --workloads hot --variants sqlite --writers 2 \
  --modes threads,processes --warmup 0 --duration 0.2 --dir "$T/b" --out "$T/tshang.jsonl" 2>/dev/null
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c '"error":"1 of 2 writers still running' "$T/tshang.jsonl")" = 2 ]; then
  ok "ts: a hung writer is an error (Workers and processes)"
else
  bad "ts: hang not reported (exit $rc)"
fi

# 6. bad input: exit 2, a message, and nothing run (no output line)
touch "$T/file"
while IFS= read -r args; do
  for h in native ts; do
    rm -f "$T/bad.jsonl"
    if [ $h = native ]; then
      eval "\"$MW\" $args --out \"$T/bad.jsonl\"" >/dev/null 2>"$T/bad.err"
    else
      eval "\"$BUN\" bench/ts/bench.ts $args --out \"$T/bad.jsonl\"" >/dev/null 2>"$T/bad.err"
    fi
    rc=$?
    if [ "$rc" = 2 ] && [ -s "$T/bad.err" ] && [ ! -s "$T/bad.jsonl" ]; then
      ok "$h bad input exits 2: $args ($(head -c 70 "$T/bad.err" | tr '\n' ' '))"
    else
      bad "$h bad input: $args (exit $rc)"
    fi
  done
done <<EOF
--workloads bulk,nope --dir $T/x
--variants sqlite,postgres --dir $T/x
--modes fibers --dir $T/x
--writers 1,four --dir $T/x
--writers 0 --dir $T/x
--writers 1,,4 --dir $T/x
--duration -1 --dir $T/x
--dir $T/file/sub
--frobnicate --dir $T/x
--sync maybe --dir $T/x
EOF
if node bench/report.mjs "$T/nothing.jsonl" >/dev/null 2>&1; then bad "report: a missing input must fail"; else ok "report: a missing input fails"; fi

if [ $fails -ne 0 ]; then
  echo "bench smoke: $fails failed"
  exit 1
fi
echo "bench smoke: all passed"
