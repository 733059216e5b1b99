// lib/mod.ts: the package entry. Many writers on one SQLite database, for Bun and Deno.
export {
  Database,
  type EngineStats,
  type FunctionOptions,
  libraryPath,
  mwVersion,
  sourceId,
  sqliteVersion,
  type TransactionFunction,
} from "./database.ts";
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
  NO_DOWNLOAD_ENV,
  releaseBaseUrl,
} from "./ffi/download.ts";
export { codeName } from "./codes.ts";
