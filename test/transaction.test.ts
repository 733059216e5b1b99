// transaction(): commit, rollback when fn throws, savepoints, modes, and the retry of a
// transaction whose commit (or a statement) lost with SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { backoffMs } from "../lib/database.ts";
import { tempDir } from "./helpers.ts";

function counterDb(options = {}): Database {
  const db = new Database(join(tempDir(), "tx.db"), options);
  db.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0)");
  return db;
}
const value = (db: Database) => db.query("SELECT v FROM c WHERE id = 1").get()!.v;

describe("transaction()", () => {
  it("commits, passes arguments and the result through", () => {
    const db = counterDb();
    const add = db.transaction((n: number) => {
      expect(db.inTransaction).toBe(true);
      db.run("UPDATE c SET v = v + ? WHERE id = 1", n);
      return value(db);
    });
    expect(add(5)).toBe(5);
    expect(db.inTransaction).toBe(false);
    expect(db.autocommit).toBe(true);
    expect(db.lastTransactionAttempts).toBe(1);
    db.close();
  });

  it("a function that throws is rolled back and its error passes through", () => {
    const db = counterDb();
    const boom = new Error("boom");
    const tx = db.transaction(() => {
      db.run("UPDATE c SET v = 99 WHERE id = 1");
      throw boom;
    });
    expect(() => tx()).toThrow(boom);
    expect(value(db)).toBe(0);
    expect(db.inTransaction).toBe(false);
    db.close();
  });

  it("nested calls are savepoints: an inner failure undoes only the inner part", () => {
    const db = counterDb();
    const inner = db.transaction((fail: boolean) => {
      db.run("UPDATE c SET v = v + 10 WHERE id = 1");
      if (fail) throw new Error("inner");
    });
    const outer = db.transaction(() => {
      db.run("UPDATE c SET v = v + 1 WHERE id = 1");
      inner(false);
      try {
        inner(true);
      } catch (e) {
        expect((e as Error).message).toBe("inner");
      }
      expect(value(db)).toBe(11);
      db.transaction(() => db.transaction(() => db.run("UPDATE c SET v = v + 100 WHERE id = 1"))())();
    });
    outer();
    expect(value(db)).toBe(111);
    // An outer failure undoes the committed savepoints too.
    expect(() => db.transaction(() => {
      inner(false);
      throw new Error("outer");
    })()).toThrow("outer");
    expect(value(db)).toBe(111);
    db.close();
  });

  it("deferred, immediate and exclusive begin the transaction in that mode", () => {
    const path = join(tempDir(), "modes.db");
    const a = new Database(path, { multiwriter: false });
    const b = new Database(path, { multiwriter: false, busyTimeout: 0 });
    a.exec("CREATE TABLE x(v)");
    const tryWrite = () => {
      try {
        b.run("INSERT INTO x VALUES (1)");
        return "ok";
      } catch (e) {
        return (e as SQLiteError).primaryCode;
      }
    };
    const tx = a.transaction(() => tryWrite());
    expect(tx.deferred()).toBe("ok"); // a deferred transaction that has not written holds no lock
    expect(tx.immediate()).toBe("SQLITE_BUSY");
    expect(tx.exclusive()).toBe("SQLITE_BUSY");
    expect(tx.deferred).toBe(tx);
    a.close();
    b.close();
  });

  it("runs fn again when the transaction lost to another writer (SQLITE_BUSY_SNAPSHOT)", () => {
    const path = join(tempDir(), "lost.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0)");
    let calls = 0;
    const increment = b.transaction(() => {
      calls++;
      const v = value(b) as number; // the snapshot is taken here
      if (calls === 1) a.run("UPDATE c SET v = v + 100 WHERE id = 1"); // another writer commits
      b.run("UPDATE c SET v = ? WHERE id = 1", v + 1); // stale: must not commit
    });
    increment();
    expect(calls).toBe(2);
    expect(value(a)).toBe(101);
    expect(b.lastTransactionAttempts).toBe(2);
    expect(b.transactionRetries).toBe(1);
    expect(b.stats().retries).toBe(1);
    expect(b.stats().lastTransactionAttempts).toBe(2);
    a.close();
    b.close();
  });

  it("attempts are bounded by maxAttempts; then the SQLITE_BUSY error is thrown", () => {
    const db = counterDb({ maxAttempts: 3 });
    let calls = 0;
    const tx = db.transaction(() => {
      calls++;
      db.run("UPDATE c SET v = v + 1 WHERE id = 1");
      throw new SQLiteError("lost", 517);
    });
    let err: unknown;
    try {
      tx();
    } catch (e) {
      err = e;
    }
    expect((err as SQLiteError).extendedCode).toBe("SQLITE_BUSY_SNAPSHOT");
    expect(calls).toBe(3);
    expect(db.lastTransactionAttempts).toBe(3);
    expect(db.transactionRetries).toBe(2);
    expect(value(db)).toBe(0);
    db.close();
  });

  it("other errors are not retried", () => {
    const db = counterDb();
    let calls = 0;
    expect(() => db.transaction(() => {
      calls++;
      db.run("INSERT INTO c VALUES (1, 1)");
    })()).toThrow(/UNIQUE constraint failed/);
    expect(calls).toBe(1);
    expect(db.transactionRetries).toBe(0);
    db.close();
  });

  it("an async function is refused and rolled back", () => {
    const db = counterDb();
    const tx = db.transaction(async () => {
      db.run("UPDATE c SET v = 5 WHERE id = 1");
    });
    expect(() => tx()).toThrow(/must be synchronous/);
    expect(value(db)).toBe(0);
    db.close();
  });

  it("backoff: jittered, starting at microseconds and capped at 2 ms", () => {
    for (let i = 0; i < 50; i++) {
      const first = backoffMs(1);
      expect(first).toBeGreaterThanOrEqual(0.0025);
      expect(first).toBeLessThanOrEqual(0.005);
      const late = backoffMs(40);
      expect(late).toBeGreaterThanOrEqual(1);
      expect(late).toBeLessThanOrEqual(2);
    }
    expect(backoffMs(3)).toBeLessThanOrEqual(0.02);
  });
});
