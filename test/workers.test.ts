// Several Workers, each with its own connection, write one database through
// transaction(): money is neither made nor lost, every increment is counted, and the
// transactions run again are counted.
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { runWorker, tempDir } from "./helpers.ts";

interface Result {
  ok: boolean;
  id: number;
  error?: string;
  calls: number;
  attempts: number;
  most: number;
  retries: number;
  engine: boolean;
  commits: number;
}

describe("Workers writing one database", () => {
  it("8 Workers: transfers keep the total, the counter equals the increments", async () => {
    const path = join(tempDir(), "bank.db");
    const accounts = 10;
    const rounds = 100;
    const workers = 8;
    const db = new Database(path);
    db.exec("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)");
    db.exec("CREATE TABLE counter(id INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0)");
    const insert = db.query("INSERT INTO accounts VALUES (?, 1000)");
    db.transaction(() => {
      for (let i = 1; i <= accounts; i++) insert.run(i);
    })();

    const results = await Promise.all(
      Array.from({ length: workers }, (_, id) => runWorker<Result>("bank-worker.ts", { path, id, rounds, accounts })),
    );
    for (const r of results) expect(r.error ?? "", `worker ${r.id}`).toBe("");
    expect(db.query("SELECT sum(balance) AS s FROM accounts").get()).toEqual({ s: accounts * 1000 });
    expect(db.query("SELECT min(balance) >= 0 AS ok FROM accounts").get()).toEqual({ ok: 1 });
    expect(db.query("SELECT v FROM counter").get()).toEqual({ v: workers * rounds });
    for (const r of results) {
      expect(r.calls).toBe(rounds * 2);
      // Each retry is one more attempt: the counters agree with each other.
      expect(r.attempts - r.calls).toBe(r.retries);
      // Every increment changes a page; a transfer of 0 does not (SQLite skips writing a
      // cell whose bytes are unchanged, so nothing is committed).
      expect(r.engine).toBe(true);
      expect(r.commits).toBeGreaterThanOrEqual(rounds);
    }
    const retries = results.reduce((s, r) => s + r.retries, 0);
    const most = Math.max(...results.map((r) => r.most));
    console.log(`workers: ${workers} x ${rounds * 2} transactions, ${retries} retried, at most ${most} attempts`);
    expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    // Bun's Workers took turns at their first dlopen; the per-process lock is released.
    expect(existsSync(join(tmpdir(), `sqlite-multiwriter-dlopen-${process.pid}.lock`))).toBe(false);
    db.close();
  }, 120_000);
});
