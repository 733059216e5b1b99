// bench/peer/turso.ts: the `turso` peer of the benchmark (design: bench.md), under Bun.
// The same workloads, checks and JSON lines as bench/ts/bench.ts, on
// @tursodatabase/database in its MVCC mode with BEGIN CONCURRENT: a peer, not a
// SQLite-compatible file. Installed apart so that the package never depends on it:
//   npm install --prefix bench/peer
//   bun bench/peer/turso.ts --workloads bulk,hot --writers 1,4 --modes threads,processes \
//       --warmup 1 --duration 4 --dir /tmp/t --out turso.jsonl
// Processes mode is skipped with a note (turso's MVCC state lives in one process). When the
// package is not installed, every run is a "skipped" line and the exit status is 0.
// Exit: 0 every run passed or was skipped, 1 a run failed, 2 bad input.
import { appendFileSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { collectFacts, ctRows, INIT_BALANCE, MODES, mergeLatencies, NACCT, runFigures, wall, WORKLOADS } from "../ts/common.ts";

const here = dirname(fileURLToPath(import.meta.url));
const VERSION_FILE = join(here, "node_modules", "@tursodatabase", "database", "package.json");

function bad(msg: string): never {
  console.error(`turso.ts: ${msg}`);
  process.exit(2);
}

function parse(argv: string[]) {
  const o = {
    workloads: [...WORKLOADS] as string[],
    writers: [1, 4],
    modes: ["threads"] as string[],
    warmup: 1,
    duration: 4,
    dir: "bench/results/db-turso",
    out: null as string | null,
    label: null as string | null,
  };
  const list = (s: string, known: readonly string[], what: string) => {
    if (s === "all") return [...known];
    const v = s.split(",");
    for (const x of v) if (!known.includes(x)) bad(`unknown ${what} '${x}' (known: ${known.join(" ")})`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    let [k, v] = argv[i].startsWith("--") && argv[i].includes("=") ? argv[i].split(/=(.*)/s, 2) : [argv[i], undefined];
    const known = ["--workloads", "--variants", "--writers", "--modes", "--warmup", "--duration", "--dir", "--out", "--label"];
    if (!known.includes(k)) bad(`unknown option '${argv[i]}'`);
    if (v === undefined) v = argv[++i] ?? bad(`${k} needs a value`);
    const secs = (allowZero: boolean) => {
      const x = Number(v);
      if (v.trim() === "" || !Number.isFinite(x) || x < 0 || x > 3600 || (!allowZero && x === 0)) bad(`bad ${k}`);
      return x;
    };
    if (k === "--workloads") o.workloads = list(v, WORKLOADS, "workload");
    else if (k === "--variants") list(v, ["turso"], "variant");
    else if (k === "--modes") o.modes = list(v, MODES, "mode");
    else if (k === "--writers") {
      if (!/^[0-9]+(,[0-9]+)*$/.test(v)) bad(`writers list '${v}' does not parse (expected e.g. 1,4,16)`);
      o.writers = v.split(",").map(Number);
      if (o.writers.some((n) => n < 1 || n > 1024)) bad(`writers list '${v}': each count must be 1..1024`);
    } else if (k === "--warmup") o.warmup = secs(true);
    else if (k === "--duration") o.duration = secs(false);
    else if (k === "--dir") o.dir = v;
    else if (k === "--out") o.out = v;
    else if (k === "--label") o.label = v;
  }
  try {
    mkdirSync(o.dir, { recursive: true });
    writeFileSync(join(o.dir, `write-probe.${process.pid}`), "probe\n");
    unlinkSync(join(o.dir, `write-probe.${process.pid}`));
  } catch (e) {
    bad(`cannot write in the run directory ${o.dir}: ${(e as Error).message}`);
  }
  return o;
}

type TursoDb = {
  exec(sql: string): void;
  prepare(sql: string): { run(...a: unknown[]): unknown; get(...a: unknown[]): Record<string, unknown> | undefined; all(): Record<string, unknown>[] };
  close(): void;
};

async function loadTurso(): Promise<{ Database: new (path: string) => TursoDb; version: string } | string> {
  try {
    const mod = (await import("@tursodatabase/database/compat")) as { Database: new (path: string) => TursoDb };
    const version = JSON.parse(readFileSync(VERSION_FILE, "utf8")).version as string;
    return { Database: mod.Database, version };
  } catch (e) {
    return `@tursodatabase/database is not installed here (npm install --prefix bench/peer): ${(e as Error).message.split("\n")[0]}`;
  }
}

function clean(dir: string): void {
  for (const f of readdirSync(dir)) if (f.startsWith("turso.db")) unlinkSync(join(dir, f));
}

function schema(T: new (path: string) => TursoDb, path: string, writers: number): void {
  const db = new T(path);
  try {
    db.exec("PRAGMA journal_mode = mvcc");
    db.exec("PRAGMA synchronous = FULL");
    db.exec("CREATE TABLE bk(id INTEGER PRIMARY KEY, v TEXT)");
    db.exec("CREATE TABLE ct(id TEXT PRIMARY KEY, a INT, b INT, c INT, d INT, pad BLOB)");
    db.exec("CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INT)");
    db.exec("BEGIN");
    const ct = db.prepare("INSERT INTO ct VALUES(?, 0, 0, 0, 0, zeroblob(16))");
    for (let i = 0; i < ctRows(writers); i++) ct.run(`r${i}`);
    const ac = db.prepare("INSERT INTO acct VALUES(?, ?)");
    for (let i = 1; i <= NACCT; i++) ac.run(i, INIT_BALANCE);
    db.exec("COMMIT");
  } finally {
    db.close();
  }
}

function validate(T: new (path: string) => TursoDb, path: string, wl: string, total: number): string {
  const db = new T(path);
  try {
    const one = (sql: string) => Number(Object.values(db.prepare(sql).get() ?? {})[0] ?? 0);
    let ic: string;
    try {
      ic = String(Object.values(db.prepare("PRAGMA integrity_check").get() ?? {})[0]);
      if (ic !== "ok") throw new Error(`integrity_check failed: ${ic}`);
      ic = "integrity_check ok";
    } catch (e) {
      if ((e as Error).message.startsWith("integrity_check failed")) throw e;
      ic = `integrity_check not supported (${(e as Error).message})`;
    }
    const [sql, want] = wl === "bulk"
      ? ["SELECT count(*) FROM bk", total * 100]
      : wl === "transfer"
      ? ["SELECT sum(balance) FROM acct", NACCT * INIT_BALANCE]
      : wl === "read"
      ? ["SELECT sum(a) FROM ct", 0]
      : ["SELECT sum(a) FROM ct", total];
    const got = one(sql);
    if (got !== want) throw new Error(`check failed: ${sql} = ${got}, expected ${want}`);
    return `${ic}; ${sql.slice(7)} = ${got}`;
  } finally {
    db.close();
  }
}

interface Res {
  committed: number;
  retries: number;
  gaveUp: number;
  abandoned: number;
  total: number;
}

async function runOne(T: new (path: string) => TursoDb, workload: string, writers: number, o: ReturnType<typeof parse>) {
  const dir = resolve(o.dir);
  const path = join(dir, "turso.db");
  clean(dir);
  schema(T, path, writers);
  const cfg = { workload, writers, db: path };
  const workers = Array.from({ length: writers }, () => new Worker(new URL("./turso-worker.ts", import.meta.url).href, { type: "module" }));
  const call = (wk: Worker, msg: unknown, want: string) =>
    new Promise<{ res: Res; lat: Float64Array }>((res, rej) => {
      wk.onmessage = (e: MessageEvent) => (e.data.type === want ? res(e.data) : rej(new Error(e.data.error ?? e.data.type)));
      wk.onerror = (e: Event) => rej(new Error((e as ErrorEvent).message));
      wk.postMessage(msg);
    });
  try {
    await Promise.all(workers.map((wk, w) => call(wk, { type: "init", cfg, w }, "ready")));
    const measureAt = wall() + o.warmup * 1000, stopAt = measureAt + o.duration * 1000;
    const out = await Promise.all(workers.map((wk) => call(wk, { type: "go", measureAt, stopAt }, "done")));
    const sum = (f: (r: Res) => number) => out.reduce((a, r) => a + f(r.res), 0);
    const committed = sum((r) => r.committed), retries = sum((r) => r.retries), total = sum((r) => r.total);
    const all = mergeLatencies(out.map((r) => r.lat));
    if (all.length !== committed) throw new Error(`${all.length} latencies for ${committed} commits`);
    const check = validate(T, path, workload, total);
    return {
      ...runFigures(o.duration, committed, retries, all),
      gave_up: sum((r) => r.gaveUp),
      abandoned: sum((r) => r.abandoned),
      total_committed: total,
      validated: true,
      check,
      begin: "BEGIN CONCURRENT",
      journal_mode: "mvcc",
      synchronous: "FULL",
    };
  } finally {
    for (const wk of workers) wk.terminate();
    clean(dir);
  }
}

const o = parse(process.argv.slice(2));
const facts = collectFacts(resolve(o.dir));
const turso = await loadTurso();
const emit = (line: Record<string, unknown>) => {
  const text = JSON.stringify({ ...line, ...facts, ...(typeof turso === "string" ? {} : { peer_version: `@tursodatabase/database ${turso.version}` }) }) + "\n";
  if (o.out) appendFileSync(o.out, text);
  else process.stdout.write(text);
};
let failures = 0;
for (const workload of o.workloads) {
  for (const mode of o.modes) {
    for (const writers of o.writers) {
      const head = {
        harness: "ts",
        runtime: "bun",
        workload,
        variant: "turso",
        mode,
        writers,
        warmup_s: o.warmup,
        duration_s: o.duration,
        ...(o.label ? { label: o.label } : {}),
        time: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      };
      const tag = `${workload} turso ${mode} x${writers}`;
      if (typeof turso === "string" || mode === "processes") {
        const why = typeof turso === "string"
          ? turso
          : "turso's MVCC keeps its transaction state in one process: it has no multi-process mode to compare";
        emit({ ...head, skipped: why });
        console.error(`  ${tag}: skipped: ${why}`);
        continue;
      }
      try {
        const r = await runOne(turso.Database, workload, writers, o);
        emit({ ...head, ...r });
        console.error(
          `  ${workload.padEnd(8)} turso       ${mode.padEnd(9)} x${String(writers).padEnd(3)} ${r.tx_per_s.toFixed(0).padStart(9)} tx/s  ` +
            `retries/100 ${r.retries_per_100.toFixed(1).padStart(7)}  p99.9 ${r.p999_us.toFixed(1).padStart(9)} us  gave up ${r.gave_up}  [${r.check}]`,
        );
      } catch (e) {
        failures++;
        emit({ ...head, error: (e as Error).message });
        console.error(`  ${tag}: error: ${(e as Error).message}`);
      }
    }
  }
}
process.exit(failures ? 1 : 0);
