# Proves that the testfixture opens every connection through the engine, before and
# after sqlite3_shutdown (whose re-initialization makes "unix" the default again
# unless the testfixture re-registers the engine). Prints "engine" or "stock" and
# exits 0; exits 1 on a mixed answer.
#   testfixture check-default.tcl   (in an empty directory)
proc engine_open {label} {
  file delete -force check.db check.db-wal check.db-shm check.db-mw
  sqlite3 db check.db
  # A new database is in WAL mode only through the engine (stock's default is
  # "delete"), the engine's WAL is in memory (no -wal file), and mw_version() is
  # the engine's function, added to every connection.
  set mode [db eval {PRAGMA journal_mode}]
  db eval {CREATE TABLE t(x); INSERT INTO t VALUES(1)}
  set wal [file exists check.db-wal]
  set fn [catch {db eval {SELECT mw_version()}}]
  db close
  set engine [expr {$mode eq "wal" && !$wal && $fn == 0}]
  puts "$label: journal_mode=$mode -wal-file=$wal mw_version-error=$fn -> [expr {$engine ? "engine" : "stock"}]"
  return $engine
}
set a [engine_open "at start"]
sqlite3_shutdown
sqlite3_initialize
set b [engine_open "after sqlite3_shutdown"]
file delete -force check.db check.db-wal check.db-shm check.db-mw
if {$a != $b} { puts "mixed"; exit 1 }
puts [expr {$a ? "engine" : "stock"}]
exit 0
