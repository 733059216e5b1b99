#!/usr/bin/env node
// bench/report.mjs: turns the JSON lines of the benchmark harnesses (native mwbench,
// the TypeScript harness, the turso peer) into a Markdown report and an SVG chart.
//
//   node bench/report.mjs [--out DIR] [--title TEXT] results/*.jsonl
//   node bench/report.mjs --update-doc [DOC] [RUN_FOLDER...]
//   node bench/report.mjs --check [DOC]
//
// Writes DIR/report.md and DIR/chart.svg (DIR defaults to the folder of the first
// input) and prints the Markdown. No dependency: the SVG is written by hand.
// The chart: one row per workload, for each harness and mode two plots,
// throughput and p99.9 latency against writers, one line per variant.
// Exit: 0 rendered (failed runs are shown as FAILED and listed), 2 bad input.
// Reads only the files it is given; writes only the two outputs.
//
// The current table of docs/bench-results.md (DOC, by default) is generated: it sits between
//   <!-- bench-table:begin bench/runs/A bench/runs/B ... -->  and  <!-- bench-table:end -->
// and the begin marker names the committed run folders it comes from (paths from the
// repository root; every *.jsonl of a folder is read). --update-doc rewrites what is
// between the markers from those folders (run folders given on the command line replace
// the marker's list); --check exits 1 when the doc's table differs from what --update-doc
// would write (0 when equal, 2 bad input). Both read only committed files: no build needed.
import { readFileSync, writeFileSync, mkdirSync, readdirSync, statSync, existsSync } from "node:fs";
import { dirname, join, basename, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const VARIANT_ORDER = ["sqlite", "sqlite-wait", "bun:sqlite", "mw", "mwr", "turso"];
const WORKLOAD_ORDER = ["bulk", "samepage", "hot", "transfer", "slow", "read"];
const COLORS = { sqlite: "#4c72b0", "sqlite-wait": "#dd8452", "bun:sqlite": "#8c8c8c", mw: "#2ca02c", mwr: "#8e44ad", turso: "#c44e52" };

function fail(msg) {
  process.stderr.write(`report: ${msg}\n`);
  process.exit(2);
}

const USAGE =
  "usage: node bench/report.mjs [--out DIR] [--title TEXT] <results.jsonl...>\n" +
  "       node bench/report.mjs --update-doc [DOC.md] [RUN_FOLDER...]   (DOC default docs/bench-results.md)\n" +
  "       node bench/report.mjs --check [DOC.md]\n";

function parseArgs(argv) {
  const o = { files: [], out: null, title: "sqlite-multiwriter benchmark", doc: null, docMode: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--out") o.out = argv[++i] ?? fail("--out needs a folder");
    else if (a === "--title") o.title = argv[++i] ?? fail("--title needs a text");
    else if (a === "--update-doc" || a === "--check") {
      if (o.docMode && o.docMode !== a) fail("--update-doc and --check do not go together");
      o.docMode = a;
    } else if (a === "-h" || a === "--help") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else if (a.startsWith("--")) fail(`unknown option ${a}`);
    else if (o.docMode && a.endsWith(".md") && o.doc === null && o.files.length === 0) o.doc = a;
    else o.files.push(a);
  }
  if (o.docMode) {
    if (o.out !== null || o.title !== "sqlite-multiwriter benchmark") fail(`${o.docMode} takes no --out or --title`);
    if (o.docMode === "--check" && o.files.length) fail("--check takes the doc only: the run folders are named in its begin marker");
    return o;
  }
  if (o.files.length === 0) fail("no input: give one or more .jsonl files");
  o.out ??= dirname(o.files[0]);
  return o;
}

export function readLines(files) {
  const rows = [];
  for (const f of files) {
    let text;
    try {
      text = readFileSync(f, "utf8");
    } catch (e) {
      fail(`cannot read ${f}: ${e.message}`);
    }
    text.split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      let r;
      try {
        r = JSON.parse(line);
      } catch {
        fail(`${f}:${i + 1}: not a JSON line`);
      }
      if (typeof r !== "object" || r === null || !r.workload || !r.variant || !r.writers) {
        fail(`${f}:${i + 1}: not a benchmark result (workload, variant, writers missing)`);
      }
      r.harness ??= "native";
      r.runtime ??= "c";
      r.mode ??= "threads";
      rows.push(r);
    });
  }
  return rows;
}

const harnessName = (r) => (r.harness === "native" ? "native C" : `${r.harness} (${r.runtime})`);
const byOrder = (order) => (a, b) => {
  const ia = order.indexOf(a), ib = order.indexOf(b);
  return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || String(a).localeCompare(String(b));
};
const fmtInt = (x) => (x == null ? "" : Math.round(x).toLocaleString("en-US"));
function fmtMs(us) {
  if (us == null) return "";
  const ms = us / 1000;
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}
const key = (...parts) => parts.join("\u0000");
const uniq = (xs) => [...new Set(xs)];

function figures(rows) {
  return rows.filter((r) => r.error == null && r.skipped == null && typeof r.tx_per_s === "number");
}

export function renderMarkdown(rows, title) {
  const out = [];
  const figs = figures(rows);
  out.push(`# ${title}`, "");
  // Machine facts: one line per distinct machine seen.
  const machines = new Map();
  for (const r of rows) {
    if (!r.machine) continue;
    const m = r.machine;
    const k = JSON.stringify([m.cpu, m.cores, m.kernel, m.fs, r.sqlite_version, r.engine_version, r.commit]);
    if (!machines.has(k)) machines.set(k, { r, sync: [] });
    if (typeof m.fdatasync_us === "number") machines.get(k).sync.push(m.fdatasync_us);
  }
  for (const { r, sync } of machines.values()) {
    const m = r.machine;
    const s = sync.length ? ` fdatasync ${fmtMs(Math.min(...sync))}-${fmtMs(Math.max(...sync))} ms (measured);` : "";
    out.push(
      `Machine: ${m.cores} cores (${m.cpu ?? "cpu unknown"}), ${m.kernel}, run directory on ${m.fs};${s} ` +
        `SQLite ${r.sqlite_version}, engine ${r.engine_version}, commit ${r.commit}.`,
    );
  }
  const syncs = rows.map((r) => r.machine?.fdatasync_us).filter((x) => typeof x === "number" && x > 0);
  if (syncs.length && Math.max(...syncs) > 3 * Math.min(...syncs)) {
    out.push(
      "",
      `**Note:** the disk's measured fdatasync latency varied from ${fmtMs(Math.min(...syncs))} to ` +
        `${fmtMs(Math.max(...syncs))} ms during these runs (a shared or virtual disk): compare the variants of one ` +
        "harness, mode and writer count (they ran back to back), and read gaps between harnesses with care.",
    );
  }
  const mwRows = figs.filter((r) => r.variant === "mw" || r.variant === "mwr");
  if (mwRows.length && mwRows.every((r) => r.engine_active === false)) {
    out.push(
      "",
      "**Note:** every `mw` row ran with the engine inactive (MW_STAT_ENGINE = 0): the `multiwriter` VFS of this " +
        "build was a pass-through, so `mw` is stock SQLite opened through a second VFS, with `BEGIN` (deferred) " +
        "instead of `BEGIN IMMEDIATE`.",
    );
  } else if (mwRows.some((r) => r.engine_active === false)) {
    out.push("", "**Note:** some `mw` rows ran with the engine inactive (MW_STAT_ENGINE = 0): marked with \\*.");
  }
  const periods = uniq(figs.map((r) => `${r.warmup_s} s warm-up + ${r.duration_s} s measured`));
  if (periods.length) out.push("", `Runs: ${periods.join("; ")}. Every figure below passed its check (integrity_check and the workload's invariant).`);
  out.push(
    "",
    "Columns: committed transactions per second; retries per 100 committed; transactions given up after 1000 " +
      "retries; latency from the first attempt to the successful commit (retries and backoff included); " +
      "`x sqlite` = throughput against the `sqlite` variant of the same harness, mode, workload and writers.",
  );

  const base = new Map();
  for (const r of figs) if (r.variant === "sqlite") base.set(key(r.harness, r.runtime, r.mode, r.workload, r.writers), r);

  // The headline: the most writers of the run, the four write workloads of the claim.
  const maxW = Math.max(0, ...figs.map((r) => r.writers));
  const head = figs.filter(
    (r) => r.writers === maxW && ["bulk", "samepage", "hot", "transfer"].includes(r.workload) && r.variant !== "sqlite-wait",
  );
  if (head.length) {
    out.push("", `## Headline: ${maxW} writers`, "");
    out.push("| harness | mode | workload | variant | tx/s | retries/100 | p99.9 ms | x sqlite |");
    out.push("|---|---|---|---|---:|---:|---:|---:|");
    head.sort(
      (a, b) =>
        (a.harness === "native" ? 0 : 1) - (b.harness === "native" ? 0 : 1) ||
        a.runtime.localeCompare(b.runtime) ||
        (a.mode === "threads" ? 0 : 1) - (b.mode === "threads" ? 0 : 1) ||
        byOrder(WORKLOAD_ORDER)(a.workload, b.workload) ||
        byOrder(VARIANT_ORDER)(a.variant, b.variant),
    );
    for (const r of head) {
      const b = base.get(key(r.harness, r.runtime, r.mode, r.workload, r.writers)) ??
        (r.variant === "turso" ? base.get(key("native", "c", r.mode, r.workload, r.writers)) : undefined);
      const ratio = b && b.tx_per_s > 0 && r.variant !== "sqlite" ? `${(r.tx_per_s / b.tx_per_s).toFixed(2)}x` : "";
      const star = (r.variant === "mw" || r.variant === "mwr") && r.engine_active === false ? "\\*" : "";
      out.push(
        `| ${harnessName(r)} | ${r.mode} | ${r.workload} | ${r.variant}${star} | ${fmtInt(r.tx_per_s)} | ` +
          `${r.retries_per_100.toFixed(1)} | ${fmtMs(r.p999_us)} | ${ratio} |`,
      );
    }
  }

  const groups = new Map();
  for (const r of rows) {
    const k = key(harnessName(r), r.mode);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(r);
  }

  for (const [k, rs] of groups) {
    const [h, mode] = k.split("\u0000");
    out.push("", `## ${h}, ${mode}`, "");
    out.push(
      "| workload | writers | variant | tx/s | retries/100 | gave up | p50 ms | p99 ms | p99.9 ms | max ms | mean ms | " +
        "open at end ms | fewest | x sqlite |",
    );
    out.push("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    const sorted = [...rs].sort(
      (a, b) =>
        byOrder(WORKLOAD_ORDER)(a.workload, b.workload) ||
        a.writers - b.writers ||
        byOrder(VARIANT_ORDER)(a.variant, b.variant),
    );
    for (const r of sorted) {
      if (r.skipped != null) continue; // listed once below
      if (r.error != null) {
        out.push(`| ${r.workload} | ${r.writers} | ${r.variant} | **FAILED** | | | | | | | | | | |`);
        continue;
      }
      const b = base.get(key(r.harness, r.runtime, r.mode, r.workload, r.writers));
      const ratio = b && b.tx_per_s > 0 && r.variant !== "sqlite" ? `${(r.tx_per_s / b.tx_per_s).toFixed(2)}x` : "";
      const star = (r.variant === "mw" || r.variant === "mwr") && r.engine_active === false ? "\\*" : "";
      out.push(
        `| ${r.workload} | ${r.writers} | ${r.variant}${star} | ${fmtInt(r.tx_per_s)} | ${r.retries_per_100.toFixed(1)} | ` +
          `${r.gave_up} | ${fmtMs(r.p50_us)} | ${fmtMs(r.p99_us)} | ${fmtMs(r.p999_us)} | ${fmtMs(r.max_us)} | ` +
          `${r.mean_us == null ? "" : fmtMs(r.mean_us)} | ${r.open_at_end_max_us == null ? "" : fmtMs(r.open_at_end_max_us)} | ` +
          `${r.fewest_share == null ? "" : `${Math.round(100 * r.fewest_share)}%`} | ${ratio} |`,
      );
    }
  }

  // The cost of the binding: the TypeScript harness against the native one.
  const nat = new Map();
  for (const r of figs) if (r.harness === "native") nat.set(key(r.variant, r.mode, r.workload, r.writers), r);
  const gap = figs.filter((r) => r.harness === "ts" && nat.has(key(r.variant, r.mode, r.workload, r.writers)));
  if (gap.length) {
    out.push("", "## The cost of the binding (TypeScript harness against native C)", "");
    out.push("Same workload, variant, mode and writers; `ts/native` is the throughput ratio (1.00 = no cost).", "");
    out.push("| runtime | mode | workload | writers | variant | native tx/s | ts tx/s | ts/native | native p99.9 ms | ts p99.9 ms |");
    out.push("|---|---|---|---:|---|---:|---:|---:|---:|---:|");
    gap.sort(
      (a, b) =>
        a.runtime.localeCompare(b.runtime) ||
        a.mode.localeCompare(b.mode) ||
        byOrder(WORKLOAD_ORDER)(a.workload, b.workload) ||
        a.writers - b.writers ||
        byOrder(VARIANT_ORDER)(a.variant, b.variant),
    );
    for (const r of gap) {
      const n = nat.get(key(r.variant, r.mode, r.workload, r.writers));
      out.push(
        `| ${r.runtime} | ${r.mode} | ${r.workload} | ${r.writers} | ${r.variant} | ${fmtInt(n.tx_per_s)} | ` +
          `${fmtInt(r.tx_per_s)} | ${n.tx_per_s > 0 ? (r.tx_per_s / n.tx_per_s).toFixed(2) : ""} | ${fmtMs(n.p999_us)} | ${fmtMs(r.p999_us)} |`,
      );
    }
  }

  const skipped = new Map();
  for (const r of rows) {
    if (r.skipped == null) continue;
    const k = key(harnessName(r), r.variant, r.skipped);
    skipped.set(k, (skipped.get(k) ?? 0) + 1);
  }
  if (skipped.size) {
    out.push("", "## Skipped", "");
    for (const [k, n] of skipped) {
      const [h, v, why] = k.split("\u0000");
      out.push(`- ${h}, \`${v}\` (${n} run${n > 1 ? "s" : ""}): ${why}`);
    }
  }
  const errors = rows.filter((r) => r.error != null);
  if (errors.length) {
    out.push("", "## Failed runs (not figures)", "");
    for (const r of errors) out.push(`- ${harnessName(r)}, ${r.mode}, ${r.workload}, ${r.writers} writers, \`${r.variant}\`: ${r.error}`);
  }
  out.push("");
  return out.join("\n");
}

// ------------------------------------------------------------------ the doc's current table

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const DOC_DEFAULT = "docs/bench-results.md";
const DOC_BEGIN = "<!-- bench-table:begin";
const DOC_END = "<!-- bench-table:end -->";
const STOCK = ["sqlite", "sqlite-wait", "bun:sqlite"];
const KIND_ORDER = ["native/c/threads", "native/c/processes", "ts/bun/threads", "ts/bun/processes", "ts/deno/threads", "ts/deno/processes"];
const kindKey = (r) => `${r.harness}/${r.runtime}/${r.mode}`;
const RUNTIME_NAME = { bun: "Bun", deno: "Deno" };

function kindTitle(r) {
  if (r.harness === "native") return `Native C (\`mwbench\`), ${r.mode === "threads" ? "threads (one process, a thread and a connection per writer)" : "processes (a process and a connection per writer)"}`;
  const rt = RUNTIME_NAME[r.runtime] ?? r.runtime;
  return `Through ${rt} (the package, \`bench/ts/bench.ts\`), ${r.mode === "threads" ? "a Worker and a connection per writer" : "a process per writer"}`;
}

/** The result lines of a committed run folder (every *.jsonl in it, in name order). */
function folderRows(folder) {
  const dir = resolve(ROOT, folder);
  let names;
  try {
    if (!statSync(dir).isDirectory()) fail(`${folder}: not a folder`);
    names = readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort();
  } catch (e) {
    fail(`cannot read the run folder ${folder}: ${e.message}`);
  }
  if (names.length === 0) fail(`${folder}: no .jsonl file`);
  return readLines(names.map((n) => join(dir, n)));
}

function fmtWhen(times) {
  if (times.length === 0) return "time unknown";
  const [a, b] = [times[0], times[times.length - 1]];
  const d = (t) => t.slice(0, 10), hm = (t) => t.slice(11, 16);
  if (d(a) !== d(b)) return `${d(a)} ${hm(a)} to ${d(b)} ${hm(b)} UTC`;
  return hm(a) === hm(b) ? `${d(a)} ${hm(a)} UTC` : `${d(a)} ${hm(a)} to ${hm(b)} UTC`;
}

/** fmtMs with a thousands separator from 1,000 ms on (the doc's tables). */
const fmtMsDoc = (us) => (us != null && us >= 1e6 ? fmtInt(us / 1000) : fmtMs(us));

function renderKind(rows, folder, docDir) {
  const out = [];
  const r0 = rows[0];
  const seen = new Set();
  for (const r of rows) {
    const k = key(r.workload, r.writers, r.variant);
    if (seen.has(k)) fail(`${folder}: two lines for ${kindKey(r)} ${r.workload}, ${r.writers} writers, ${r.variant}: a table is one run`);
    seen.add(k);
  }
  const folderRel = relative(docDir, resolve(ROOT, folder)).split("\\").join("/");
  const link = existsSync(join(ROOT, folder, "report.md")) ? `${folderRel}/report.md` : `${folderRel}/`;
  const times = rows.map((r) => r.time).filter((t) => typeof t === "string").sort();
  const commits = uniq(rows.map((r) => r.commit).filter(Boolean)).map((c) => c.replace(/^([0-9a-f]{7})[0-9a-f]*/, "$1"));
  const periods = uniq(rows.map((r) => `${r.warmup_s} s warm-up + ${r.duration_s} s measured`));
  const syncs = rows.map((r) => r.machine?.fdatasync_us).filter((x) => typeof x === "number");
  const m = r0.machine ?? {};
  const sync = syncs.length
    ? Math.min(...syncs) === Math.max(...syncs)
      ? `fdatasync ${fmtMs(syncs[0])} ms (measured at the start)`
      : `fdatasync ${fmtMs(Math.min(...syncs))} to ${fmtMs(Math.max(...syncs))} ms (measured at the starts)`
    : "fdatasync not measured";
  const versions = uniq(rows.map((r) => `SQLite ${r.sqlite_version}, engine ${r.engine_version}` +
    (r.runtime_version ? `, ${RUNTIME_NAME[r.runtime] ?? r.runtime} ${r.runtime_version}` : "")));
  out.push("", `### ${kindTitle(r0)}`, "");
  out.push(
    `From [\`${folder.replace(/\/$/, "")}/\`](${link}) (its report has every column): commit ${commits.join(", ") || "unknown"}, ` +
      `${fmtWhen(times)}, ${periods.join("; ")} per run; ${m.cores ?? "?"} cores (${m.cpu ?? "cpu unknown"}), ${m.kernel ?? "kernel unknown"}, ` +
      `${m.fs ?? "fs unknown"}, ${sync}; ${versions.join("; ")}.`,
  );
  const variants = uniq(rows.filter((r) => r.skipped == null).map((r) => r.variant)).sort(byOrder(VARIANT_ORDER));
  const stock = variants.filter((v) => STOCK.includes(v));
  const others = variants.filter((v) => !STOCK.includes(v));
  const better = stock.length === 1 ? stock[0] : "better stock";
  const hasOpen = rows.some((r) => r.open_at_end_max_us != null);
  const hasFewest = rows.some((r) => r.fewest_share != null);
  const vs = variants.join(" / ");
  const cols = ["workload", "writers", ...variants.map((v) => `${v} tx/s`)];
  const align = ["---", "---:", ...variants.map(() => "---:")];
  if (stock.length) for (const v of others) cols.push(`${v} / ${better}`), align.push("---:");
  const per = [["retries/100", (r) => r.retries_per_100.toFixed(1)], ["p99.9 ms", (r) => fmtMsDoc(r.p999_us)], ["max ms", (r) => fmtMsDoc(r.max_us)]];
  if (hasOpen) per.push(["open at end ms", (r) => (r.open_at_end_max_us == null ? "-" : fmtMsDoc(r.open_at_end_max_us))]);
  if (hasFewest) per.push(["fewest", (r) => (r.fewest_share == null ? "-" : `${Math.round(100 * r.fewest_share)}%`)]);
  for (const [name] of per) cols.push(`${name} ${vs}`), align.push("---");
  out.push("", `| ${cols.join(" | ")} |`, `|${align.join("|")}|`);
  const cells = new Map();
  for (const r of rows) if (r.skipped == null) cells.set(key(r.workload, r.writers, r.variant), r);
  const lines = uniq(rows.map((r) => key(r.workload, r.writers))).map((k) => k.split("\u0000"))
    .sort((a, b) => byOrder(WORKLOAD_ORDER)(a[0], b[0]) || Number(a[1]) - Number(b[1]));
  let inactive = false;
  for (const [wl, w] of lines) {
    const get = (v) => cells.get(key(wl, w, v));
    const ok = (r) => r && r.error == null && typeof r.tx_per_s === "number";
    const star = (v, r) => ((v === "mw" || v === "mwr") && r.engine_active === false ? ((inactive = true), "\\*") : "");
    const row = [wl, w];
    for (const v of variants) {
      const r = get(v);
      row.push(!r ? "" : ok(r) ? `${fmtInt(r.tx_per_s)}${star(v, r)}` : "**FAILED**");
    }
    if (stock.length) {
      const figs = stock.map(get).filter(ok);
      const b = figs.length ? figs.reduce((x, y) => (y.tx_per_s > x.tx_per_s ? y : x)) : null;
      for (const v of others) {
        const r = get(v);
        row.push(ok(r) && b && b.tx_per_s > 0 ? `${(r.tx_per_s / b.tx_per_s).toFixed(2)}x` : "");
      }
    }
    for (const [, f] of per) row.push(variants.map((v) => (ok(get(v)) ? f(get(v)) : "-")).join(" / "));
    out.push(`| ${row.join(" | ")} |`);
  }
  if (inactive) out.push("", "\\* the engine was inactive in this run (MW_STAT_ENGINE = 0): not a figure of the engine.");
  return out;
}

/** The text between the doc's markers: one table per harness kind of the folders given. */
export function renderDocTables(folders, docPath) {
  const docDir = dirname(resolve(docPath));
  const parts = [];
  for (const folder of folders) {
    const rows = folderRows(folder);
    for (const k of uniq(rows.map(kindKey))) parts.push({ k, folder, rows: rows.filter((r) => kindKey(r) === k) });
  }
  parts.sort((a, b) => byOrder(KIND_ORDER)(a.k, b.k));
  for (let i = 1; i < parts.length; i++) {
    if (parts[i].k === parts[i - 1].k) fail(`${parts[i - 1].folder} and ${parts[i].folder} both hold ${parts[i].k}: name one folder per harness and mode`);
  }
  const readme = relative(docDir, join(ROOT, "bench", "README.md")).split("\\").join("/");
  const sources = uniq(parts.map((p) => p.folder)).map((f) => {
    const rs = parts.filter((p) => p.folder === f).flatMap((p) => p.rows);
    const commits = uniq(rs.map((r) => r.commit).filter(Boolean)).map((c) => c.replace(/^([0-9a-f]{7})[0-9a-f]*/, "$1"));
    const days = uniq(rs.map((r) => r.time).filter((t) => typeof t === "string").map((t) => t.slice(0, 10))).sort();
    return `\`${f.replace(/\/$/, "")}/\` (commit ${commits.join(", ") || "unknown"}, ${days.join(", ") || "undated"})`;
  });
  const out = [
    "<!-- generated by `node bench/report.mjs --update-doc` from the run folders named in the marker above; " +
      "`node bench/report.mjs --check` fails when this differs: do not edit by hand -->",
    "",
    `Generated by \`node bench/report.mjs --update-doc\` from ${sources.join(", ")}.`,
    "",
    "Each table is one run: the variants of a row ran back to back, and every run passed its check " +
      "(`integrity_check` and the workload's invariant). tx/s: transactions committed per second in the measured " +
      "period. `mw / better stock`: the engine's tx/s over that of the faster stock variant of the same row. " +
      "Cells with several figures follow the order of the variants in the column's name. Latencies run from a " +
      "transaction's first attempt to its commit (retries and backoff included) over the commits of the measured " +
      "period; `open at end` is the longest any writer's transaction had been open when the period ended, " +
      `\`fewest\` the commits of the writer that committed least as a share of the average writer's ([bench/README.md](${readme}), "JSON lines").`,
  ];
  for (const p of parts) out.push(...renderKind(p.rows, p.folder, docDir));
  return out.join("\n");
}

/** Splits the doc at its markers: { before, folders, after }. */
function splitDoc(text, docPath) {
  const lines = text.split("\n");
  const b = lines.map((l, i) => (l.startsWith(DOC_BEGIN) ? i : -1)).filter((i) => i >= 0);
  const e = lines.map((l, i) => (l.trim() === DOC_END ? i : -1)).filter((i) => i >= 0);
  if (b.length !== 1 || e.length !== 1 || e[0] < b[0]) {
    fail(`${docPath}: wants one "${DOC_BEGIN} FOLDER... -->" line and one "${DOC_END}" line after it`);
  }
  const m = /^<!-- bench-table:begin\s+(.*?)\s*-->\s*$/.exec(lines[b[0]]);
  if (!m) fail(`${docPath}:${b[0] + 1}: the begin marker ends with -->`);
  return {
    before: lines.slice(0, b[0]),
    folders: m[1].split(/\s+/).filter(Boolean),
    inside: lines.slice(b[0] + 1, e[0]).join("\n"),
    after: lines.slice(e[0]),
  };
}

function docMain(o) {
  const docPath = o.doc ?? join(ROOT, DOC_DEFAULT);
  let text;
  try {
    text = readFileSync(docPath, "utf8");
  } catch (e) {
    fail(`cannot read ${docPath}: ${e.message}`);
  }
  const d = splitDoc(text, docPath);
  const folders = o.files.length
    ? o.files.map((f) => relative(ROOT, resolve(f)).split("\\").join("/").replace(/\/$/, ""))
    : d.folders;
  if (folders.length === 0) fail(`${docPath}: the begin marker names no run folder`);
  const table = renderDocTables(folders, docPath);
  if (o.docMode === "--check") {
    if (d.inside === table) {
      process.stdout.write(`report: ${relative(process.cwd(), docPath) || docPath}: the table is current (${folders.join(", ")})\n`);
      process.exit(0);
    }
    const a = d.inside.split("\n"), b = table.split("\n");
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    process.stderr.write(
      `report: ${docPath}: the table between the bench-table markers differs from what its run folders give ` +
        `(first at line ${i + 1} after the begin marker):\n  doc:       ${a[i] ?? "(end)"}\n  generated: ${b[i] ?? "(end)"}\n` +
        "Run node bench/report.mjs --update-doc (never edit the table by hand).\n",
    );
    process.exit(1);
  }
  const updated = [...d.before, `${DOC_BEGIN} ${folders.join(" ")} -->`, table, ...d.after].join("\n");
  if (updated !== text) writeFileSync(docPath, updated);
  process.stderr.write(`report: ${docPath}: table ${updated === text ? "already current" : "written"} from ${folders.join(", ")}\n`);
}

// ------------------------------------------------------------------ SVG chart

const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmtAxis(v) {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
}

/** One plot: x = writers (evenly spaced), lines per variant. */
function plot(x0, y0, w, h, title, series, writers, opts) {
  const g = [];
  const L = 46, R = 8, T = 20, B = 24;
  const pw = w - L - R, ph = h - T - B;
  g.push(`<text x="${x0 + L}" y="${y0 + 13}" font-size="11" font-weight="bold">${esc(title)}</text>`);
  const vals = series.flatMap((s) => s.points.map((p) => p.y)).filter((v) => v > 0);
  let ymin, ymax, ypos;
  if (opts.log) {
    ymin = vals.length ? 10 ** Math.floor(Math.log10(Math.min(...vals))) : 1;
    ymax = vals.length ? 10 ** Math.ceil(Math.log10(Math.max(...vals))) : 10;
    if (ymax <= ymin) ymax = ymin * 10;
    ypos = (v) => y0 + T + ph - ((Math.log10(Math.max(v, ymin)) - Math.log10(ymin)) / (Math.log10(ymax) - Math.log10(ymin))) * ph;
  } else {
    ymin = 0;
    ymax = niceMax(vals.length ? Math.max(...vals) : 1);
    ypos = (v) => y0 + T + ph - (v / ymax) * ph;
  }
  if (series.length === 0) {
    g.push(`<text x="${x0 + L + pw / 2}" y="${y0 + T + ph / 2}" font-size="10" fill="#999" text-anchor="middle">not run</text>`);
    return g.join("\n");
  }
  const xpos = (i) => x0 + L + (writers.length === 1 ? pw / 2 : (i / (writers.length - 1)) * pw);
  g.push(`<rect x="${x0 + L}" y="${y0 + T}" width="${pw}" height="${ph}" fill="none" stroke="#999" stroke-width="0.5"/>`);
  const ticks = [];
  if (opts.log) for (let v = ymin; v <= ymax * 1.0001; v *= 10) ticks.push(v);
  else for (let i = 0; i <= 4; i++) ticks.push((ymax * i) / 4);
  for (const v of ticks) {
    const y = ypos(v);
    g.push(`<line x1="${x0 + L}" y1="${y}" x2="${x0 + L + pw}" y2="${y}" stroke="#ddd" stroke-width="0.5"/>`);
    g.push(`<text x="${x0 + L - 3}" y="${y + 3}" font-size="9" text-anchor="end">${opts.fmt(v)}</text>`);
  }
  writers.forEach((n, i) => g.push(`<text x="${xpos(i)}" y="${y0 + T + ph + 11}" font-size="9" text-anchor="middle">${n}</text>`));
  g.push(`<text x="${x0 + L + pw / 2}" y="${y0 + h - 2}" font-size="9" text-anchor="middle" fill="#555">writers</text>`);
  for (const s of series) {
    const pts = s.points
      .filter((p) => p.y > 0 || !opts.log)
      .map((p) => [xpos(writers.indexOf(p.x)), ypos(p.y)]);
    if (pts.length > 1) g.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.6" points="${pts.map((p) => p.map((v) => v.toFixed(1)).join(",")).join(" ")}"/>`);
    for (const [x, y] of pts) g.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="2.2" fill="${s.color}"/>`);
  }
  return g.join("\n");
}

export function renderSvg(rows, title) {
  const figs = figures(rows);
  const modeRank = (m) => (m === "threads" ? 0 : 1);
  const panels = uniq(figs.map((r) => key(harnessName(r), r.mode))).sort((a, b) => {
    const [ha, ma] = a.split("\u0000"), [hb, mb] = b.split("\u0000");
    return (ha === "native C" ? 0 : 1) - (hb === "native C" ? 0 : 1) || ha.localeCompare(hb) || modeRank(ma) - modeRank(mb);
  });
  const workloads = uniq(figs.map((r) => r.workload)).sort(byOrder(WORKLOAD_ORDER));
  const variants = uniq(figs.map((r) => r.variant)).sort(byOrder(VARIANT_ORDER));
  const PW = 230, PH = 150, top = 62, left = 70;
  const width = left + panels.length * 2 * PW + 10;
  const height = top + workloads.length * PH + 30;
  const g = [];
  g.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`);
  g.push(`<rect width="100%" height="100%" fill="white"/>`);
  g.push(`<text x="10" y="18" font-size="14" font-weight="bold">${esc(title)}</text>`);
  variants.forEach((v, i) => {
    const x = 10 + i * 110;
    g.push(`<line x1="${x}" y1="34" x2="${x + 18}" y2="34" stroke="${COLORS[v] ?? "#333"}" stroke-width="3"/>`);
    g.push(`<text x="${x + 22}" y="38" font-size="11">${esc(v)}</text>`);
  });
  panels.forEach((p, pi) => {
    const [h, mode] = p.split("\u0000");
    g.push(`<text x="${left + pi * 2 * PW + PW}" y="${top - 2}" font-size="12" text-anchor="middle" font-weight="bold">${esc(`${h}, ${mode}`)}</text>`);
  });
  workloads.forEach((wl, wi) => {
    const y = top + wi * PH;
    g.push(`<text x="10" y="${y + PH / 2}" font-size="12" font-weight="bold">${esc(wl)}</text>`);
    panels.forEach((p, pi) => {
      const [h, mode] = p.split("\u0000");
      const rs = figs.filter((r) => harnessName(r) === h && r.mode === mode && r.workload === wl);
      const writers = uniq(rs.map((r) => r.writers)).sort((a, b) => a - b);
      const mk = (field) =>
        variants
          .map((v) => ({
            color: COLORS[v] ?? "#333",
            points: rs.filter((r) => r.variant === v).sort((a, b) => a.writers - b.writers).map((r) => ({ x: r.writers, y: r[field] })),
          }))
          .filter((s) => s.points.length);
      const x = left + pi * 2 * PW;
      g.push(plot(x, y, PW, PH, "tx/s", mk("tx_per_s"), writers, { log: false, fmt: fmtAxis }));
      g.push(plot(x + PW, y, PW, PH, "p99.9 latency (ms, log)", mk("p999_us").map((s) => ({ ...s, points: s.points.map((q) => ({ x: q.x, y: q.y / 1000 })) })), writers, { log: true, fmt: fmtAxis }));
    });
  });
  g.push("</svg>");
  return g.join("\n") + "\n";
}

if (import.meta.url === `file://${process.argv[1]}` || basename(process.argv[1] ?? "") === "report.mjs") {
  const o = parseArgs(process.argv.slice(2));
  if (o.docMode) {
    docMain(o);
    process.exit(0);
  }
  const rows = readLines(o.files);
  if (rows.length === 0) fail("the inputs hold no result lines");
  const md = renderMarkdown(rows, o.title) + `\nChart: [chart.svg](chart.svg)\n`;
  const svg = renderSvg(rows, o.title);
  mkdirSync(o.out, { recursive: true });
  writeFileSync(join(o.out, "report.md"), md);
  writeFileSync(join(o.out, "chart.svg"), svg);
  process.stdout.write(md);
  process.stderr.write(`report: wrote ${join(o.out, "report.md")} and ${join(o.out, "chart.svg")} (${rows.length} lines)\n`);
}
