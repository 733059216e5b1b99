// lib/error.ts: the one error class of the package, carrying SQLite's result codes by
// number and by name, SQLite's message and the SQL that failed.
import { codeName, primaryCodeName } from "./codes.ts";

/**
 * An error reported by SQLite (or a misuse the package refuses), with SQLite's result
 * code by name and by number.
 *
 * @example
 * ```ts
 * try {
 *   db.run("INSERT INTO users(id) VALUES (1)");
 * } catch (e) {
 *   if (e instanceof SQLiteError && e.code === "SQLITE_CONSTRAINT_PRIMARYKEY") console.log("taken");
 * }
 * ```
 */
export class SQLiteError extends Error {
  /**
   * The most precise name of the result code, e.g. "SQLITE_CONSTRAINT_UNIQUE" or
   * "SQLITE_BUSY_SNAPSHOT" (the extended name where SQLite gives one, as bun:sqlite and
   * better-sqlite3 report it).
   */
  readonly code: string;
  /** The primary result code name, e.g. "SQLITE_CONSTRAINT". */
  readonly primaryCode: string;
  /** The extended result code name, e.g. "SQLITE_BUSY_SNAPSHOT". */
  readonly extendedCode: string;
  /** The extended result code number, e.g. 517. */
  readonly errno: number;
  /** The primary result code number, e.g. 5. */
  readonly errcode: number;
  /** The SQL that failed, when there was one. */
  readonly sql: string | undefined;
  /** Where in the SQL the error is, when SQLite knows (-1 otherwise). */
  readonly byteOffset: number;

  /** Makes an error from SQLite's message and (extended) result code. */
  constructor(
    message: string,
    errno: number,
    sql?: string,
    byteOffset = -1,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "SQLiteError";
    this.errno = errno;
    this.errcode = errno & 0xff;
    this.code = codeName(errno);
    this.primaryCode = primaryCodeName(errno);
    this.extendedCode = codeName(errno);
    this.sql = sql;
    this.byteOffset = byteOffset;
  }
}
