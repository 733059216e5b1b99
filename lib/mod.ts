// lib/mod.ts: the npm entry (the bun:sqlite face). Many writers on one SQLite database,
// for Bun and Deno.
/**
 * sqlite-multiwriter: many writers on one SQLite database, for Bun and Deno. The API is
 * shaped after `bun:sqlite`, so a Bun user changes one import.
 *
 * @example
 * ```ts
 * import { Database } from "sqlite-multiwriter";
 * const db = new Database("app.db");
 * db.run("CREATE TABLE IF NOT EXISTS t(x)");
 * db.query("INSERT INTO t VALUES (?)").run(1);
 * console.log(db.query("SELECT x FROM t").all());
 * ```
 *
 * @module
 */
export {
  type AggregateOptions,
  Database,
  type EngineStats,
  type FunctionOptions,
  isComplete,
  libraryPath,
  mwVersion,
  sourceId,
  sqliteVersion,
  type TransactionFunction,
} from "./database.ts";
export type { AsyncTransaction, AsyncTransactionOptions } from "./async.ts";
export { type BlobOpenOptions, SQLBlob } from "./blob.ts";
export { constants } from "./constants.ts";
export { SQLiteError } from "./error.ts";
export { type Params, type RunResult, Statement } from "./statement.ts";
export type { DatabaseOptions } from "./options.ts";
export type { BindParams, BindValue, SQLValue } from "./values.ts";
export {
  ensureLibrary,
  LIBRARY_ENV,
  LibraryNotFoundError,
  NO_CHECKOUT_ENV,
  type ResolveOptions,
  type Resolved,
} from "./ffi/resolve.ts";
export {
  BASE_URL_ENV,
  CACHE_ENV,
  type ManifestFile,
  type ManifestTarget,
  type NativeManifest,
  NO_DOWNLOAD_ENV,
  releaseBaseUrl,
} from "./ffi/download.ts";
export { codeName } from "./codes.ts";
