/*
** extension.c: the entry points of the engine into SQLite.
**  - sqlite3_multiwriter_init: the loadable-extension entry (".load multiwriter",
**    sqlite3_load_extension). It registers the VFS for the whole process and the SQL
**    functions on the connection that loaded it.
**  - mw_sqlite_extra_init: called by sqlite3_initialize() in the build that links
**    SQLite in (SQLITE_EXTRA_INIT), so the VFS exists before the first open, and
**    every new connection gets the SQL functions through an auto-extension.
**  - mw_stats, mw_db_config: calls for the TypeScript binding, which cannot reach a
**    file control's result array or a C function with variable arguments itself.
*/
#include "engine.h"
#include "vfs/vfs.h"

#ifdef MW_EXTENSION
SQLITE_EXTENSION_INIT1
#endif

const char *mw_version(void) { return MW_VERSION; }

static void sql_mw_version(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(ctx, MW_VERSION, -1, SQLITE_STATIC);
}

static int add_functions(sqlite3 *db) {
  return sqlite3_create_function(db, "mw_version", 0,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, 0,
                                 sql_mw_version, 0, 0);
}

int mw_stats(sqlite3 *db, const char *zDb, int64_t *out, int n) {
  int64_t all[MW_STAT_COUNT] = { 0 };
  if (db == 0 || out == 0 || n < 0) return SQLITE_MISUSE;
  int rc = sqlite3_file_control(db, zDb ? zDb : "main", MW_FCNTL_STATS, all);
  if (rc == SQLITE_NOTFOUND) rc = SQLITE_OK; /* not on the engine: all zeros */
  for (int i = 0; i < n; i++) out[i] = i < MW_STAT_COUNT ? all[i] : 0;
  return rc;
}

int mw_rebase_rows_declare(sqlite3 *db, const char *zDb, const int64_t *rowids, int n) {
  if (db == 0 || n < 0 || (n > 0 && rowids == 0)) return SQLITE_MISUSE;
  /* Inside an explicit transaction only: an autocommit statement's transaction has no
  ** moment between its reads and its commit to declare in. */
  if (sqlite3_get_autocommit(db)) {
    sqlite3_log(SQLITE_MISUSE, "multiwriter: rows declared outside a transaction: declare "
                "them between BEGIN and COMMIT, after the first write");
    return SQLITE_MISUSE;
  }
  mw_rebase_rows r = { n, rowids };
  return sqlite3_file_control(db, zDb ? zDb : "main", MW_FCNTL_REBASE_ROWS, &r);
}

/* sqlite3_db_config for the options that take an int and an int*: variadic C
** functions cannot be called through bun:ffi or Deno.dlopen (on arm64 Apple their
** arguments go on the stack, not in registers). */
int mw_db_config(sqlite3 *db, int op, int value, int *out) {
  if (db == 0) return SQLITE_MISUSE;
  switch (op) {
    case SQLITE_DBCONFIG_ENABLE_FKEY:
    case SQLITE_DBCONFIG_ENABLE_TRIGGER:
    case SQLITE_DBCONFIG_ENABLE_VIEW:
    case SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER:
    case SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION:
    case SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE:
    case SQLITE_DBCONFIG_ENABLE_QPSG:
    case SQLITE_DBCONFIG_TRIGGER_EQP:
    case SQLITE_DBCONFIG_RESET_DATABASE:
    case SQLITE_DBCONFIG_DEFENSIVE:
    case SQLITE_DBCONFIG_WRITABLE_SCHEMA:
    case SQLITE_DBCONFIG_LEGACY_ALTER_TABLE:
    case SQLITE_DBCONFIG_DQS_DML:
    case SQLITE_DBCONFIG_DQS_DDL:
    case SQLITE_DBCONFIG_TRUSTED_SCHEMA:
    case SQLITE_DBCONFIG_LEGACY_FILE_FORMAT:
      /* Newer options only where the SQLite compiled against has them (the Tcl suite's
      ** testfixture builds this file against Debian's 3.40.1). */
#ifdef SQLITE_DBCONFIG_STMT_SCANSTATUS
    case SQLITE_DBCONFIG_STMT_SCANSTATUS:
#endif
#ifdef SQLITE_DBCONFIG_REVERSE_SCANORDER
    case SQLITE_DBCONFIG_REVERSE_SCANORDER:
#endif
      return sqlite3_db_config(db, op, value, out);
    default:
      return SQLITE_MISUSE; /* other arguments, or unknown */
  }
}

/* Runs at the end of every sqlite3_open (auto-extension): fails the open of a
** database whose mw* options were refused, with the message naming the option
** (an xOpen failure alone would only say "unable to open database file"), and
** adds the SQL functions. */
static int auto_extension(sqlite3 *db, char **pzErrMsg, const void *pApi) {
  (void)pApi;
  int rc = mw_check_open(db, pzErrMsg);
  if (rc == SQLITE_OK) rc = add_functions(db);
  return rc;
}

#ifdef MW_EXTENSION
MW_API int sqlite3_multiwriter_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  int rc = mw_register();
  if (rc == SQLITE_OK) rc = add_functions(db);
  if (rc == SQLITE_OK) rc = sqlite3_auto_extension((void (*)(void))auto_extension);
  if (rc != SQLITE_OK) {
    if (pzErrMsg) *pzErrMsg = sqlite3_mprintf("multiwriter: cannot register (%s)", sqlite3_errstr(rc));
    return rc;
  }
  /* The VFS must outlive this connection: other connections open through it. */
  return SQLITE_OK_LOAD_PERMANENTLY;
}
#else
int mw_sqlite_extra_init(const char *unused) {
  (void)unused;
  int rc = mw_register();
  if (rc == SQLITE_OK) rc = sqlite3_auto_extension((void (*)(void))auto_extension);
  return rc;
}
#endif
