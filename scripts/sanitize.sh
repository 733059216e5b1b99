#!/bin/sh
# Builds every C test of native/test with AddressSanitizer + UndefinedBehaviorSanitizer
# and with ThreadSanitizer (Debian's clang, or $CC), then runs each one.
#   scripts/sanitize.sh [asan|tsan|all] [name-filter]
# The page store uses 16 lock stripes here: a commit may hold every stripe at once,
# and ThreadSanitizer's deadlock detector tracks at most 64 held locks per thread.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-all}
filter=${2:-}
CC=${CC:-clang}
out=zig-out/sanitize
mkdir -p "$out"
common="-O1 -g -fno-omit-frame-pointer -D_GNU_SOURCE -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI=1 \
 -DSQLITE_EXTRA_INIT=mw_sqlite_extra_init -DSQLITE_DQS=0 -DHAVE_USLEEP=1 -DHAVE_FDATASYNC=1 \
 -DMW_STRIPES=16 -Inative/include -Inative/src -Inative/sqlite -Inative/test"

run_mode() {
  m=$1
  case $m in
    asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
    tsan) flags="-fsanitize=thread" ;;
    *) echo "unknown mode $m" >&2; exit 2 ;;
  esac
  dir=$out/$m
  mkdir -p "$dir"
  # SQLite itself is built once per mode (it takes the longest).
  if [ ! -f "$dir/sqlite3.o" ] || [ native/sqlite/sqlite3.c -nt "$dir/sqlite3.o" ]; then
    echo "[$m] building sqlite3.o"
    $CC $common $flags -w -c native/sqlite/sqlite3.c -o "$dir/sqlite3.o"
  fi
  failed=0
  for src in native/test/*.c; do
    name=$(basename "$src" .c)
    case $name in *"$filter"*) ;; *) continue ;; esac
    $CC $common $flags -std=gnu11 -o "$dir/$name" "$src" native/src/*.c "$dir/sqlite3.o" -lpthread -lm
    echo "[$m] $name"
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
         UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
         TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
         timeout 900 "$dir/$name" > "$dir/$name.log" 2>&1; then
      echo "[$m] $name FAILED (log: $dir/$name.log)"
      tail -40 "$dir/$name.log"
      failed=1
    fi
  done
  return $failed
}

status=0
if [ "$mode" = all ]; then
  run_mode asan || status=1
  run_mode tsan || status=1
else
  run_mode "$mode" || status=1
fi
exit $status
