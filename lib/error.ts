// lib/error.ts: the one error class of the package, carrying SQLite's result codes by
// number and by name, SQLite's message and the SQL that failed.
import { codeName, primaryCodeName } from "./codes.ts";

export class SQLiteError extends Error {
  /** The primary result code name, e.g. "SQLITE_BUSY". */
  readonly code: string;
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
    this.code = primaryCodeName(errno);
    this.extendedCode = codeName(errno);
    this.sql = sql;
    this.byteOffset = byteOffset;
  }
}
