// bench/ts/bench.ts: the TypeScript harness (design: bench.md). The same workloads,
// variants, checks and JSON lines as the native mwbench, through the package: what a
// user of the package gets. Writers are Workers (threads mode) or processes (one per
// writer), started together behind a gate. Runs under Bun, and under Deno with -A:
//
//   bun bench/ts/bench.ts --workloads bulk,hot --variants sqlite,mw --writers 1,4 \
//       --modes threads,processes --warmup 1 --duration 4 --dir /tmp/b --out ts.jsonl
//
// Exit: 0 every run passed, 1 a run failed (an "error" line, not a figure), 2 bad input.
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, readdirSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { Database } from "../../lib/mod.ts";
import {
  beginMode,
  bunSqliteAvailable,
  busyTimeoutMs,
  collectFacts,
  createSchema,
  type Facts,
  MODES,
  type Mode,
  openOptions,
  mergeLatencies,
  runFigures,
  type RunConfig,
  runtimeName,
  validate,
  VARIANTS,
  type Variant,
  wall,
  WORKLOADS,
  type Workload,
  type WriterResult,
} from "./common.ts";

const here = dirname(fileURLToPath(import.meta.url));

interface Opts {
  workloads: Workload[];
  variants: Variant[];
  modes: Mode[];
  writers: number[];
  warmup: number;
  duration: number;
  dir: string;
  out: string | null;
  label: string | null;
}

class BadInput extends Error {}

function names<T extends string>(s: string, known: readonly T[], what: string): T[] {
  if (s === "all") return [...known];
  const out: T[] = [];
  for (const t of s.split(",")) {
    if (!known.includes(t as T)) throw new BadInput(`unknown ${what} '${t}' (known: ${known.join(" ")})`);
    if (out.includes(t as T)) throw new BadInput(`${t} listed twice`);
    out.push(t as T);
  }
  return out;
}

function parseWriters(s: string): number[] {
  if (!/^[0-9]+(,[0-9]+)*$/.test(s)) throw new BadInput(`writers list '${s}' does not parse (expected e.g. 1,4,16)`);
  const v = s.split(",").map(Number);
  if (v.some((n) => n < 1 || n > 1024)) throw new BadInput(`writers list '${s}': each count must be 1..1024`);
  return v;
}

function parseSeconds(s: string, allowZero: boolean, what: string): number {
  const v = Number(s);
  if (s.trim() === "" || !Number.isFinite(v) || v < 0 || v > 3600 || (!allowZero && v === 0)) throw new BadInput(`bad ${what}`);
  return v;
}

function parseArgs(argv: string[]): Opts {
  const o: Opts = {
    workloads: [...WORKLOADS],
    variants: [...VARIANTS],
    modes: ["threads"],
    writers: [1, 4],
    warmup: 1,
    duration: 4,
    dir: "bench/results/db-ts",
    out: null,
    label: null,
  };
  for (let i = 0; i < argv.length; i++) {
    let [k, v] = argv[i].includes("=") && argv[i].startsWith("--") ? argv[i].split(/=(.*)/s, 2) : [argv[i], undefined];
    if (k === "-h" || k === "--help") {
      console.log(
        "usage: bench.ts [--workloads LIST|all] [--variants LIST|all] [--writers 1,4,16] [--modes threads,processes]\n" +
          "                [--warmup S] [--duration S] [--dir DIR] [--out FILE] [--label TEXT]",
      );
      process.exit(0);
    }
    const known = ["--workloads", "--variants", "--writers", "--modes", "--warmup", "--duration", "--dir", "--out", "--label"];
    if (!known.includes(k)) throw new BadInput(`unknown option '${argv[i]}'`);
    if (v === undefined) {
      if (i + 1 >= argv.length) throw new BadInput(`${k} needs a value`);
      v = argv[++i];
    }
    if (k === "--workloads") o.workloads = names(v, WORKLOADS, "workload");
    else if (k === "--variants") o.variants = names(v, VARIANTS, "variant");
    else if (k === "--modes") o.modes = names(v, MODES, "mode");
    else if (k === "--writers") o.writers = parseWriters(v);
    else if (k === "--warmup") o.warmup = parseSeconds(v, true, "--warmup (seconds, 0..3600)");
    else if (k === "--duration") o.duration = parseSeconds(v, false, "--duration (seconds, >0, <=3600)");
    else if (k === "--dir") o.dir = v;
    else if (k === "--out") o.out = v;
    else if (k === "--label") o.label = v;
  }
  if (!o.dir) throw new BadInput("bad --dir");
  try {
    mkdirSync(o.dir, { recursive: true });
    const probe = join(o.dir, `write-probe.${process.pid}`);
    writeFileSync(probe, "probe\n");
    unlinkSync(probe);
  } catch (e) {
    throw new BadInput(`cannot write in the run directory ${o.dir}: ${(e as Error).message}`);
  }
  if (o.out) {
    try {
      appendFileSync(o.out, "");
    } catch (e) {
      throw new BadInput(`cannot open --out ${o.out}: ${(e as Error).message}`);
    }
  }
  return o;
}

function cleanDir(dir: string): void {
  for (const f of readdirSync(dir)) {
    if (f.startsWith("bench.db") || f.startsWith("lat.")) {
      try {
        unlinkSync(join(dir, f));
      } catch { /* gone */ }
    }
  }
}

interface Started {
  ready: Promise<void>;
  go(measureAt: number, stopAt: number): Promise<{ res: WriterResult; lat: Float64Array }>;
  kill(): void;
}

function startWorker(cfg: RunConfig, w: number): Started {
  const worker = new Worker(new URL("./worker.ts", import.meta.url).href, { type: "module" });
  let onMsg: (m: { type: string; error?: string; res?: WriterResult; lat?: Float64Array }) => void = () => {};
  let onErr: (e: Error) => void = () => {};
  worker.onmessage = (e: MessageEvent) => onMsg(e.data);
  worker.onerror = (e: Event) => {
    (e as ErrorEvent).preventDefault?.();
    onErr(new Error(`worker ${w}: ${(e as ErrorEvent).message ?? "failed"}`));
  };
  const ready = new Promise<void>((res, rej) => {
    onErr = rej;
    onMsg = (m) => (m.type === "ready" ? res() : rej(new Error(`writer ${w}: ${m.error ?? m.type}`)));
  });
  worker.postMessage({ type: "init", cfg, w });
  return {
    ready,
    go(measureAt, stopAt) {
      const done = new Promise<{ res: WriterResult; lat: Float64Array }>((res, rej) => {
        onErr = rej;
        onMsg = (m) => {
          if (m.type === "done") res({ res: m.res as WriterResult, lat: m.lat as Float64Array });
          else rej(new Error(`writer ${w}: ${m.error ?? m.type}`));
        };
      });
      worker.postMessage({ type: "go", measureAt, stopAt });
      return done.finally(() => worker.terminate());
    },
    kill: () => worker.terminate(),
  };
}

function runtimeCommand(script: string): [string, string[]] {
  const g = globalThis as { Deno?: { execPath(): string } };
  if (runtimeName() === "deno" && g.Deno) return [g.Deno.execPath(), ["run", "-A", script]];
  return [process.execPath, [script]];
}

function startProcess(cfg: RunConfig, w: number): Started {
  const lat = join(cfg.dir, `lat.${process.pid}.${w}`);
  const [cmd, args] = runtimeCommand(join(here, "child.ts"));
  const child = spawn(cmd, [...args, JSON.stringify({ cfg, w, lat })], { stdio: ["pipe", "pipe", "inherit"] });
  const lines: string[] = [];
  let buf = "";
  const waiters: (() => void)[] = [];
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (d: string) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
    waiters.splice(0).forEach((f) => f());
  });
  const exited = new Promise<number>((res) => child.on("exit", (code, sig) => res(code ?? (sig ? 128 : 1))));
  exited.then(() => waiters.splice(0).forEach((f) => f()));
  let exitCode: number | null = null;
  exited.then((c) => (exitCode = c));
  const nextLine = async (): Promise<string> => {
    for (;;) {
      if (lines.length) return lines.shift() as string;
      if (exitCode !== null) throw new Error(`writer process ${w} exited (status ${exitCode}) without a result`);
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  const ready = nextLine().then((l) => {
    if (l !== "ready") throw new Error(`writer ${w}: ${l.replace(/^error /, "")}`);
  });
  return {
    ready,
    async go(measureAt, stopAt) {
      child.stdin!.write(`go ${measureAt} ${stopAt}\n`);
      const l = await nextLine();
      if (!l.startsWith("done ")) throw new Error(`writer ${w}: ${l.replace(/^error /, "")}`);
      const code = await exited;
      if (code !== 0) throw new Error(`writer process ${w} exited with status ${code}`);
      const bytes = readFileSync(lat);
      unlinkSync(lat);
      const copy = new Uint8Array(bytes.byteLength);
      copy.set(bytes);
      return { res: JSON.parse(l.slice(5)) as WriterResult, lat: new Float64Array(copy.buffer) };
    },
    kill: () => {
      child.kill("SIGKILL");
    },
  };
}

function head(cfg: RunConfig, o: Opts): Record<string, unknown> {
  return {
    harness: "ts",
    runtime: runtimeName(),
    workload: cfg.workload,
    variant: cfg.variant,
    mode: cfg.mode,
    writers: cfg.writers,
    warmup_s: o.warmup,
    duration_s: o.duration,
    ...(o.label ? { label: o.label } : {}),
    time: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
  };
}

function emit(o: Opts, line: Record<string, unknown>, facts: Facts): void {
  const text = JSON.stringify({ ...line, ...facts }) + "\n";
  if (o.out) appendFileSync(o.out, text);
  else process.stdout.write(text);
}

function probe(cfg: RunConfig): string | null {
  if (cfg.variant === "bun:sqlite") {
    return bunSqliteAvailable() ? null : `bun:sqlite is Bun's own binding: not available under ${runtimeName()}`;
  }
  if (cfg.variant !== "mw" && cfg.variant !== "mwr") return null;
  let db: Database;
  try {
    db = new Database(cfg.db, { ...openOptions(cfg.variant, cfg.mode), create: false });
  } catch (e) {
    return `the engine refused the option: ${(e as Error).message}`;
  }
  try {
    if (cfg.variant === "mwr" && !db.stats().engine) {
      return "mw_rebase needs the engine, and the multiwriter VFS of this build is a pass-through (MW_STAT_ENGINE = 0)";
    }
    return null;
  } finally {
    db.close();
  }
}

async function runOne(cfg: RunConfig, o: Opts, facts: Facts): Promise<boolean> {
  const h = head(cfg, o);
  const tag = `${cfg.workload} ${cfg.variant} ${cfg.mode} x${cfg.writers}`;
  cleanDir(cfg.dir);
  createSchema(cfg.db, cfg.writers);
  const skip = probe(cfg);
  if (skip) {
    emit(o, { ...h, skipped: skip }, facts);
    console.error(`  ${tag}: skipped: ${skip}`);
    cleanDir(cfg.dir);
    return true;
  }
  const ws: Started[] = [];
  try {
    for (let w = 0; w < cfg.writers; w++) ws.push(cfg.mode === "threads" ? startWorker(cfg, w) : startProcess(cfg, w));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(ws.map((s) => s.ready)),
      new Promise((_, rej) => (timer = setTimeout(() => rej(new Error("writers did not get ready within 60 s")), 60000))),
    ]).finally(() => clearTimeout(timer));
    const measureAt = wall() + o.warmup * 1000;
    const stopAt = measureAt + o.duration * 1000;
    // Watchdog: a writer still running long after the end is hung (in SQLite or the engine).
    const hangS = Number(process.env.MWBENCH_HANG_S) > 0 ? Number(process.env.MWBENCH_HANG_S) : 60;
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const finished = new Array<boolean>(ws.length).fill(false);
    const results = await Promise.race([
      Promise.all(ws.map((s, i) => s.go(measureAt, stopAt).then((r) => ((finished[i] = true), r)))),
      new Promise<never>((_, rej) => {
        watchdog = setTimeout(() => {
          const n = finished.filter((f) => !f).length;
          rej(new Error(`${n} of ${ws.length} writers still running ${hangS} s after the end of the run: a hang`));
        }, stopAt - wall() + hangS * 1000);
      }),
    ]).finally(() => clearTimeout(watchdog));
    let committed = 0, retries = 0, gaveUp = 0, abandoned = 0, total = 0, n = 0, engine = true;
    let openMax = 0, fewest = Infinity;
    for (const r of results) {
      openMax = Math.max(openMax, r.res.openAtStopUs);
      fewest = Math.min(fewest, r.res.committed);
      committed += r.res.committed;
      retries += r.res.retries;
      gaveUp += r.res.gaveUp;
      abandoned += r.res.abandoned;
      total += r.res.total;
      n += r.lat.length;
      if (!r.res.engine) engine = false;
    }
    if (n !== committed) throw new Error(`${n} latencies for ${committed} commits`);
    const all = mergeLatencies(results.map((r) => r.lat));
    const check = validate(cfg.db, cfg.workload, total, cfg.variant);
    const figures = runFigures(o.duration, committed, retries, all);
    // Fairness: the writer that committed least, as a share of the average writer.
    const share = committed ? (fewest * results.length) / committed : 0;
    emit(o, {
      ...h,
      ...figures,
      gave_up: gaveUp,
      abandoned,
      open_at_end_max_us: openMax,
      fewest_share: Math.round(1000 * share) / 1000,
      total_committed: total,
      validated: true,
      check,
      engine_active: engine,
      begin: beginMode(cfg.variant) === "immediate" ? "BEGIN IMMEDIATE" : "BEGIN",
      busy_timeout_ms: busyTimeoutMs(cfg.variant),
      synchronous: "FULL",
    }, facts);
    console.error(
      `  ${cfg.workload.padEnd(8)} ${cfg.variant.padEnd(11)} ${cfg.mode.padEnd(9)} x${String(cfg.writers).padEnd(3)} ` +
        `${figures.tx_per_s.toFixed(0).padStart(9)} tx/s  retries/100 ${figures.retries_per_100.toFixed(1).padStart(7)}  ` +
        `p99.9 ${figures.p999_us.toFixed(1).padStart(9)} us  mean ${figures.mean_us.toFixed(1).padStart(9)} us  ` +
        `fewest ${(100 * share).toFixed(0).padStart(3)}%  ` +
        `gave up ${gaveUp}  [${check}]`,
    );
    return true;
  } catch (e) {
    for (const s of ws) s.kill();
    const msg = e instanceof Error ? e.message : String(e);
    emit(o, { ...h, error: msg }, facts);
    console.error(`  ${tag}: error: ${msg}`);
    return false;
  } finally {
    cleanDir(cfg.dir);
  }
}

async function main(): Promise<number> {
  let o: Opts;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof BadInput) {
      console.error(`bench.ts: ${e.message}`);
      return 2;
    }
    throw e;
  }
  const dir = resolve(o.dir);
  const facts = collectFacts(dir);
  console.error(
    `bench.ts (${runtimeName()} ${facts.runtime_version}): SQLite ${facts.sqlite_version}, engine ${facts.engine_version}, ` +
      `${facts.machine.cores} cores, ${dir} on ${facts.machine.fs}, fdatasync ${facts.machine.fdatasync_us.toFixed(0)} us, commit ${facts.commit}`,
  );
  const total = o.workloads.length * o.modes.length * o.writers.length * o.variants.length;
  let k = 0, failures = 0;
  for (const workload of o.workloads) {
    for (const mode of o.modes) {
      for (const writers of o.writers) {
        for (const variant of o.variants) {
          process.stderr.write(`[${++k}/${total}]`);
          const cfg: RunConfig = { workload, variant, mode, writers, dir, db: join(dir, "bench.db") };
          if (!(await runOne(cfg, o, facts))) failures++;
        }
      }
    }
  }
  if (failures) console.error(`bench.ts: ${failures} of ${total} runs failed`);
  return failures ? 1 : 0;
}

process.exit(await main());
