// lib/jsr.ts: the JSR (Deno) entry: lib/mod.ts plus the library download, and the names
// @db/sqlite code imports. JSR installs no native file, so at module load, and only when
// no local place has the library (libraryPath aside: an explicit path is seen later, by
// new Database()), this awaits ensureLibrary(), which fetches the release asset of this
// platform, checks its sha256 and caches it. Then `new Database()` stays synchronous. A
// failed download is not thrown here: it is listed, with the URL tried, in the error of
// the first `new Database()` that needs the library. Bun and the npm package use
// lib/mod.ts, which has no top-level await and never downloads unless asked
// (`await ensureLibrary()`).
/**
 * sqlite-multiwriter for Deno: many writers on one SQLite database, with the API of
 * `@db/sqlite` (`Database`, `Statement`, `SqliteError`, `SQLITE_VERSION`,
 * `SQLITE_SOURCEID`, `isComplete`), so code written for it changes one import. The
 * bun:sqlite-shaped classes of the npm entry are here as `CoreDatabase` and
 * `CoreStatement` (and `db.core`).
 *
 * @example
 * ```ts
 * import { Database } from "jsr:@sqlite-multiwriter/sqlite-multiwriter";
 * const db = new Database("app.db");
 * db.exec("CREATE TABLE IF NOT EXISTS t(x)");
 * const rows = db.sql`SELECT count(*) AS n FROM t`;
 * ```
 *
 * @module
 */
import { sourceId } from "./database.ts";
import { SQLiteError } from "./error.ts";
import { ensureLibrary } from "./ffi/resolve.ts";
import { nativeManifest } from "./ffi/manifest.generated.ts";

export * from "./mod.ts";
// The @db/sqlite face: these names shadow the core's of the line above.
export {
  Database,
  type DbAggregateOptions,
  type DbAsyncTransaction,
  type DbBindParams,
  type DbBindValue,
  type DbDatabaseOptions,
  type DbParams,
  Statement,
} from "./dbsqlite.ts";
export { Database as CoreDatabase } from "./database.ts";
export { Statement as CoreStatement } from "./statement.ts";

/** The error class under the name @db/sqlite gives it (the same class as SQLiteError). */
export const SqliteError: typeof SQLiteError = SQLiteError;
/** The type of SqliteError. */
export type SqliteError = SQLiteError;

/** The version of the SQLite this release is built with, e.g. "3.54.1". */
export const SQLITE_VERSION: string = nativeManifest.sqlite ?? "";

await ensureLibrary().catch(() => {
  // Recorded by ensureLibrary; reported by the first new Database() that needs it.
});

/**
 * SQLite's source id (date, time and hash of the check-in) of the library that was found
 * at load; "" when none was found yet.
 */
export const SQLITE_SOURCEID: string = (() => {
  try {
    return sourceId();
  } catch {
    return "";
  }
})();
