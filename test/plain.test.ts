// Plain statements outside transaction() from several Workers at once: a statement whose
// commit lost to another writer is run again within the busy timeout (as stock SQLite's
// busy handler waits), so none fails; explicit transactions keep the error.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { runWorker, tempDir } from "./helpers.ts";

interface Result {
  id: number;
  failures: string[];
  error?: string;
}

describe("plain statements under concurrency", () => {
  it("4 Workers of single INSERT/UPDATE statements: zero failures, every row present", async () => {
    const path = join(tempDir(), "plain.db");
    const workers = 4;
    const rounds = 150;
    const db = new Database(path);
    db.exec("CREATE TABLE items(worker INTEGER, i INTEGER, PRIMARY KEY (worker, i))");
    db.exec("CREATE TABLE counter(id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
    db.exec("INSERT INTO counter VALUES (1, 0), (2, 0)");
    const results = await Promise.all(
      Array.from({ length: workers }, (_, id) => runWorker<Result>("plain-worker.ts", { path, id, rounds })),
    );
    for (const r of results) {
      expect(r.error ?? "", `worker ${r.id}`).toBe("");
      expect(r.failures, `worker ${r.id}`).toEqual([]);
    }
    expect(db.query("SELECT count(*) AS n FROM items").get()).toEqual({ n: workers * rounds });
    for (let w = 0; w < workers; w++) {
      expect(db.query("SELECT count(DISTINCT i) AS n FROM items WHERE worker = ?").get(w)).toEqual({ n: rounds });
    }
    expect(db.query("SELECT sum(v) AS v FROM counter").get()).toEqual({ v: 2 * workers * rounds });
    db.close();
  }, 180_000);

  it("a lost plain statement is run again; an explicit transaction keeps SQLITE_BUSY_SNAPSHOT", () => {
    const path = join(tempDir(), "lost.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0)");
    // Explicit: b reads, a commits, b's write loses and SQLite rolled b back.
    b.exec("BEGIN");
    expect(b.query("SELECT v FROM c").get()).toEqual({ v: 0 });
    a.run("UPDATE c SET v = 10 WHERE id = 1");
    let err: unknown;
    try {
      b.run("UPDATE c SET v = v + 1 WHERE id = 1");
      b.exec("COMMIT");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SQLiteError);
    expect((err as SQLiteError).extendedCode).toBe("SQLITE_BUSY_SNAPSHOT");
    expect((err as SQLiteError).message).toMatch(/another writer committed first/);
    if (b.inTransaction) b.exec("ROLLBACK");
    // Plain: the same write outside BEGIN commits.
    expect(b.run("UPDATE c SET v = v + 1 WHERE id = 1").changes).toBe(1);
    expect(a.query("SELECT v FROM c").get()).toEqual({ v: 11 });
    a.close();
    b.close();
  });

  // A write consumed through iterate() and left early (break, return(), the statement run
  // again, the database closed) used to commit in the reset that ends it; a commit that lost
  // there was dropped unseen, after its RETURNING rows were handed out (found by an outside
  // review: 1,853 of 48,757 acknowledged updates lost from 4 Workers).
  it("a write left early through iterate() keeps its commit", () => {
    const path = join(tempDir(), "iterate-write.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO c VALUES (1, 0), (2, 0), (3, 0)");
    const bump = a.prepare("UPDATE c SET n = n + 1 RETURNING id, n");
    const table = () => a.query("SELECT n FROM c ORDER BY id").values().flat();
    // break after the first row, b writing meanwhile
    for (const row of bump.iterate()) {
      expect(row).toEqual({ id: 1, n: 1 });
      b.run("UPDATE c SET n = n + 100 WHERE id = 3");
      break;
    }
    expect(table()).toEqual([1, 1, 101]);
    // return() of a half-read iterator
    const it = bump.iterate();
    expect(it.next().value).toEqual({ id: 1, n: 2 });
    b.run("UPDATE c SET n = n + 100 WHERE id = 3");
    it.return!();
    expect(table()).toEqual([2, 2, 202]);
    // the statement run again while an iterator of it is open
    bump.iterate().next();
    b.run("UPDATE c SET n = n + 100 WHERE id = 3");
    expect(bump.all()).toHaveLength(3);
    expect(table()).toEqual([4, 4, 304]);
    // the database closed with the iterator open
    a.prepare("UPDATE c SET n = n + 1 RETURNING id").iterate().next();
    b.run("UPDATE c SET n = n + 100 WHERE id = 3");
    a.close();
    expect(b.query("SELECT n FROM c ORDER BY id").values().flat()).toEqual([5, 5, 405]);
    // Every row a write's iterator yields is of the attempt that committed.
    const c = new Database(path);
    const rows = [...c.prepare("UPDATE c SET n = n + 1 RETURNING n").iterate()];
    expect(rows.map((r) => r.n)).toEqual([6, 6, 406]);
    c.close();
    b.close();
  });
});
