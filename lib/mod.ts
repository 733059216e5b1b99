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
export { LIBRARY_ENV, LibraryNotFoundError } from "./ffi/resolve.ts";
export { codeName } from "./codes.ts";
