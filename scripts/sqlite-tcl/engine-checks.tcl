# Checks of engine fixes that the engine's own C tests cannot make, because the
# vendored SQLite is built without shared cache (SQLITE_OMIT_SHARED_CACHE) and the
# testfixture is not. Run by run.sh with the engine's testfixture, under a time limit
# (a hang is a failure). Prints "ok" and exits 0, or names the failed check, exit 1.
proc check {name got want} {
  if {$got ne $want} { puts "FAILED $name: got {$got}, wanted {$want}"; exit 1 }
}

# Shared cache on: opening a rollback-mode file converts it with a private stock
# connection, which used to wait forever for the outer open's shared-cache mutex.
sqlite3_enable_shared_cache 1
file delete -force sc.db sc.db-journal sc.db-wal sc.db-mw
sqlite3 s sc.db -vfs unix
s eval {PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES(1)}
s close
sqlite3 db1 sc.db
sqlite3 db2 sc.db
check "engine" [db1 eval {PRAGMA journal_mode}] wal
check "read" [db1 eval {SELECT count(*) FROM t}] 1
db2 eval {INSERT INTO t VALUES(2)}
check "shared write seen" [db1 eval {SELECT count(*) FROM t}] 2
db1 close
db2 close
sqlite3_enable_shared_cache 0
sqlite3 db sc.db
check "after reopen" [db eval {SELECT count(*) FROM t}] 2
db close
file delete -force sc.db sc.db-journal sc.db-wal sc.db-mw
puts ok
exit 0
