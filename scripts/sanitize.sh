#!/usr/bin/env bash
# sanitize.sh: builds every C test of native/test with clang against native/sqlite/sqlite3.c
# and the engine's native/src/*/*.c (the non-extension build), once with AddressSanitizer + UndefinedBehavior-
# Sanitizer and once with ThreadSanitizer, and runs them. Any sanitizer report, any failing
# test, fails the script.
#
# Usage: scripts/sanitize.sh [asan|tsan ...]   (default: both)
# Env:   CC (default clang), MW_SAN_JOBS (parallel compiles, default nproc),
#        MW_SAN_TIMEOUT (seconds per test, default 600), MW_SAN_ONLY (regex of test names),
#        MW_SAN_SERIAL=1 (one kind after the other instead of both at once).
# The tests see MW_TEST_SCALE (0.5 under ASan, 0.25 under TSan unless set) to shrink their
# loops (test_faults at 1 took 214 s of the stage alone under ASan; npm test runs them whole).
# The kinds run at the same time (each builds, then runs its tests one at a time): the tests
# wait on syncs, sleeps and child processes much of their time, so one kind alone leaves
# the second core mostly idle. Each kind prints one line per test (prefixed [asan]/[tsan]);
# the excerpts of the failing logs come at the end.
# Build outputs go to zig-out/sanitize/<kind>/; sqlite3.o is rebuilt only when sqlite3.c,
# build.zig (the flags) or the compiler command change.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
CC="${CC:-clang}"
jobs="${MW_SAN_JOBS:-$(nproc)}"
per_test_timeout="${MW_SAN_TIMEOUT:-600}"
only="${MW_SAN_ONLY:-}"
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)

if ! command -v "$CC" >/dev/null; then
  echo "sanitize.sh: $CC not found (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 1
fi

# The -D flags of build.zig (scripts/zig-flags.sh).
. scripts/zig-flags.sh sanitize.sh
includes=(-Inative/include "${engine_includes[@]}" -Inative/sqlite -Inative/test)

# A report of any sanitizer in a test's output.
report_re='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: ThreadSanitizer|FATAL: ThreadSanitizer|UndefinedBehaviorSanitizer'


# Sets san, scale and engine_extra for a kind.
select_kind() {
  engine_extra=()
  case "$1" in
    asan) san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
          scale="${MW_TEST_SCALE:-0.5}" ;;
    # A commit may hold every lock stripe of the page store at once, and TSan's deadlock
    # detector tracks at most 64 locks held by one thread (beyond that it dies with a
    # CHECK failure): the page store gets 16 stripes in this build (engine.h allows it).
    tsan) san=(-fsanitize=thread); engine_extra=(-DMW_STRIPES=16)
          scale="${MW_TEST_SCALE:-0.25}" ;;
    *) echo "sanitize.sh: unknown kind $1 (asan|tsan)" >&2; exit 2 ;;
  esac
}

# SQLite: once per sanitizer, kept between runs.
build_sqlite() {
  local kind="$1" san scale engine_extra
  select_kind "$kind"
  local out="zig-out/sanitize/$kind"
  mkdir -p "$out"
  local sq_cmd=("$CC" -O1 -g "${san[@]}" "${sqlite_flags[@]}" "${posix_flags[@]}" -Inative/sqlite
                -c native/sqlite/sqlite3.c -o "$out/sqlite3.o.tmp")
  local stamp="${sq_cmd[*]} $(cksum < native/sqlite/sqlite3.c)"
  if [ ! -f "$out/sqlite3.o" ] || [ "$(cat "$out/sqlite3.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "[$kind] compiling sqlite3.c (-O1, takes a while)"
    rm -f "$out/sqlite3.o" "$out/sqlite3.stamp"
    "${sq_cmd[@]}"
    mv "$out/sqlite3.o.tmp" "$out/sqlite3.o" # never a half-written object after an interrupt
    printf '%s' "$stamp" > "$out/sqlite3.stamp"
  fi
}

build_and_run() {
  local kind="$1" san scale engine_extra
  select_kind "$kind"
  local out="zig-out/sanitize/$kind"
  mkdir -p "$out/obj" "$out/bin" "$out/log"
  local t0=$SECONDS
  # What the main script reads back once this kind is done (it may run in a subshell).
  : > "$out/failures"; : > "$out/details"; rm -f "$out/summary"

  # Engine and tests: always rebuilt (small), in parallel.
  rm -f "$out"/obj/*.o "$out"/bin/*
  local cflags=(-O1 -g "${san[@]}" "${engine_extra[@]}" "${engine_flags[@]}" "${includes[@]}")
  local srcs=("${engine_srcs[@]}")
  local tests=()
  for t in native/test/*.c; do
    local n; n="$(basename "$t" .c)"
    if [ -n "$only" ] && ! [[ "$n" =~ $only ]]; then continue; fi
    tests+=("$t")
  done
  echo "[$kind] compiling ${#srcs[@]} engine sources and ${#tests[@]} tests"
  export CC out
  export CFLAGS_STR="${cflags[*]}"
  printf '%s\n' "${srcs[@]}" | xargs -P "$jobs" -I{} sh -c \
    'f="{}"; $CC $CFLAGS_STR -c "$f" -o "$out/obj/$(basename "$f" .c).o"'
  local libs=(-lpthread -lm -ldl)
  # Tests include helper headers with static functions some of them do not use.
  printf '%s\n' "${tests[@]}" | xargs -P "$jobs" -I{} sh -c \
    'f="{}"; n="$(basename "$f" .c)"; $CC $CFLAGS_STR -Wno-unused-function "$f" "$out"/obj/*.o "$out/sqlite3.o" -o "$out/bin/$n" '"${libs[*]}"
  echo "[$kind] built in $((SECONDS - t0)) s"

  # Run: each test from the repository root (as zig build test does), one at a time.
  local opts_asan="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
  local opts_ubsan="print_stacktrace=1:halt_on_error=1"
  local opts_tsan="halt_on_error=0:second_deadlock_stack=1:history_size=4"
  for t in "${tests[@]}"; do
    local n; n="$(basename "$t" .c)"
    local log="$out/log/$n.log"
    local t1=$SECONDS rc=0
    ASAN_OPTIONS="$opts_asan" UBSAN_OPTIONS="$opts_ubsan" TSAN_OPTIONS="$opts_tsan" \
      MW_TEST_SCALE="$scale" MW_SANITIZER="$kind" \
      timeout -k 10 "$per_test_timeout" "$out/bin/$n" > "$log" 2>&1 || rc=$?
    local secs=$((SECONDS - t1))
    if grep -Eq "$report_re" "$log"; then
      echo "[$kind] REPORT  $n (${secs} s, exit $rc): sanitizer report, see $log"
      { echo "---- [$kind] $n: the sanitizer report ($log)"; grep -E -m 5 -A 30 "$report_re" "$log" | head -120; } >> "$out/details"
      echo "$kind/$n (report)" >> "$out/failures"
    elif [ "$rc" -ne 0 ]; then
      echo "[$kind] FAIL    $n (${secs} s, exit $rc), see $log"
      { echo "---- [$kind] $n: exit $rc, the end of $log"; tail -n 30 "$log"; } >> "$out/details"
      echo "$kind/$n (exit $rc)" >> "$out/failures"
    else
      local skip=""
      grep -q '^SKIP' "$log" && skip=" ($(grep -m1 '^SKIP' "$log"))"
      echo "[$kind] ok      $n (${secs} s)$skip"
    fi
  done
  echo "$kind: $((SECONDS - t0)) s" > "$out/summary"
}

# The sqlite3.o of every kind at once (the longest part of a fresh run, one core each).
summary=()
failures=()
t_sqlite=$SECONDS
pids=()
for k in "${kinds[@]}"; do build_sqlite "$k" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || { echo "sanitize.sh: building sqlite3.o failed" >&2; exit 1; }; done
summary+=("sqlite3.o: $((SECONDS - t_sqlite)) s")
# Then every kind's build and tests, the kinds at the same time (MW_SAN_SERIAL=1: in turn).
t_tests=$SECONDS
pids=()
for k in "${kinds[@]}"; do
  if [ "${MW_SAN_SERIAL:-0}" = 1 ]; then
    build_and_run "$k"
  else
    build_and_run "$k" & pids+=($!)
  fi
done
for p in "${pids[@]}"; do wait "$p" || { echo "sanitize.sh: a build failed" >&2; exit 1; }; done
for k in "${kinds[@]}"; do
  out="zig-out/sanitize/$k"
  summary+=("$(cat "$out/summary" 2>/dev/null || echo "$k: did not finish")")
  [ -f "$out/summary" ] || failures+=("$k (did not finish)")
  while IFS= read -r f; do failures+=("$f"); done < "$out/failures"
  cat "$out/details"
done
summary+=("tests: $((SECONDS - t_tests)) s")

echo "sanitize.sh: ${summary[*]}"
if [ ${#failures[@]} -gt 0 ]; then
  echo "sanitize.sh: ${#failures[@]} failed: ${failures[*]}"
  exit 1
fi
echo "sanitize.sh: all clean"
