#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of native/fuzz (Debian's clang, with ASan + UBSan)
# and runs each for a bounded time from its seed corpus native/fuzz/corpus/<target>/.
# Any crash, sanitizer report, leak, timeout or failed check of a target fails the script;
# the input that did it is kept in zig-out/fuzz/artifacts/ (rerun a target on it to
# reproduce: zig-out/fuzz/bin/<target> <file>).
#
# Usage: scripts/fuzz.sh [seconds per target] [target ...]
#   npm test runs it with 25 s per target; a longer run: scripts/fuzz.sh 1800
# Env: CC (default clang), MW_FUZZ_JOBS (parallel fuzzing processes per target, default 1),
#      MW_FUZZ_AT_ONCE (targets fuzzed at the same time, default nproc: each target still
#      gets its own process and the whole time given),
#      MW_FUZZ_SAVE=1 (merge the new inputs that add coverage into native/fuzz/corpus/,
#      to commit after a long run).
# Inputs found during a run go to zig-out/fuzz/corpus/<target>/ and are used again by the
# next run. sqlite3.o is rebuilt only when sqlite3.c, build.zig or the command change.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
CC="${CC:-clang}"
secs="${1:-25}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_log fuzz_btree fuzz_opts)
jobs="${MW_FUZZ_JOBS:-1}"

if ! command -v "$CC" >/dev/null; then
  echo "fuzz.sh: $CC not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi

# The -D flags of build.zig (scripts/zig-flags.sh).
. scripts/zig-flags.sh fuzz.sh

out=zig-out/fuzz
mkdir -p "$out/obj" "$out/bin" "$out/artifacts"
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
t0=$SECONDS

# SQLite: sanitized but not coverage-instrumented (the targets fuzz the engine). The
# object scripts/sanitize.sh built for ASan has the same flags: taken when current.
sqlite_cmd() {
  echo "$CC" -O1 -g "${san[@]}" "${sqlite_flags[@]}" "${posix_flags[@]}" -Inative/sqlite \
    -c native/sqlite/sqlite3.c -o "$1/sqlite3.o.tmp"
}
sum="$(cksum < native/sqlite/sqlite3.c)"
sq_cmd=($(sqlite_cmd "$out"))
stamp="${sq_cmd[*]} $sum"
asan=zig-out/sanitize/asan
if [ -f "$asan/sqlite3.o" ] && [ "$(cat "$asan/sqlite3.stamp" 2>/dev/null)" = "$(sqlite_cmd "$asan") $sum" ]; then
  cp "$asan/sqlite3.o" "$out/sqlite3.o"
  printf '%s' "$stamp" > "$out/sqlite3.stamp"
fi
if [ ! -f "$out/sqlite3.o" ] || [ "$(cat "$out/sqlite3.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "fuzz.sh: compiling sqlite3.c (-O1, takes a while)"
  rm -f "$out/sqlite3.o" "$out/sqlite3.stamp"
  "${sq_cmd[@]}"
  mv "$out/sqlite3.o.tmp" "$out/sqlite3.o"
  printf '%s' "$stamp" > "$out/sqlite3.stamp"
fi

# The engine, coverage-instrumented; then one program per target.
cflags=(-O1 -g "${san[@]}" -fsanitize=fuzzer-no-link "${engine_flags[@]}"
        -Inative/include "${engine_includes[@]}" -Inative/sqlite)
rm -f "$out"/obj/*.o
# The engine sources in parallel (one compile per core), then one program per target.
export CC out
export CFLAGS_STR="${cflags[*]}"
printf '%s\n' "${engine_srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  'f="{}"; $CC $CFLAGS_STR -c "$f" -o "$out/obj/$(basename "$f" .c).o"'
for t in "${targets[@]}"; do
  "$CC" "${cflags[@]}" -fsanitize=fuzzer "native/fuzz/$t.c" "$out"/obj/*.o "$out/sqlite3.o" \
    -o "$out/bin/$t" -lpthread -lm -ldl &
done
wait_all() { local rc=0 p; for p in $(jobs -p); do wait "$p" || rc=1; done; return $rc; }
wait_all || { echo "fuzz.sh: building a target failed" >&2; exit 1; }
echo "fuzz.sh: built ${#targets[@]} targets in $((SECONDS - t0)) s"

# One target's run: its log in $out/<target>.log, its exit status in $out/<target>.rc.
# Parallel workers (-jobs) write fuzz-<n>.log into their current folder: one per target.
fuzz_one() {
  local t="$1" rc=0
  local work="$out/corpus/$t" dir="$out/run/$t"
  local par=()
  [ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$root/$out/bin/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
      "${par[@]}" -print_final_stats=1 -artifact_prefix="$root/$out/artifacts/$t-" \
      "$root/$work" "$root/native/fuzz/corpus/$t") > "$out/$t.log" 2>&1 || rc=$?
  [ "$jobs" -gt 1 ] && cat "$dir"/fuzz-*.log >> "$out/$t.log" 2>/dev/null
  echo "$rc" > "$out/$t.rc"
}

# The targets, as many at a time as there are cores (each the whole $secs seconds).
at_once="${MW_FUZZ_AT_ONCE:-$(nproc)}"
running=0
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t"
  rm -f "$out/$t.rc"
  echo "fuzz.sh: $t for $secs s (seeds: $(ls "native/fuzz/corpus/$t" | wc -l), corpus: $(ls "$out/corpus/$t" | wc -l))"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$at_once" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true

failed=()
for t in "${targets[@]}"; do
  seeds="native/fuzz/corpus/$t"
  work="$out/corpus/$t"
  log="$out/$t.log"
  rc="$(cat "$out/$t.rc" 2>/dev/null || echo "no status")"
  if [ "$rc" != 0 ] || grep -Eq 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    echo "fuzz.sh: FAIL $t (exit $rc), see $log"
    grep -E -m 3 -A 25 'ERROR:|runtime error:|fuzz_[a-z]+: ' "$log" | head -80
    failed+=("$t")
    continue
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$log" | sed "s/^/  $t /"
  grep -E 'cov: [0-9]+' "$log" | tail -n 1 | sed "s/^/  $t /"
  if [ "${MW_FUZZ_SAVE:-0}" = 1 ]; then
    "$out/bin/$t" -merge=1 "$seeds" "$work" > "$out/$t.merge.log" 2>&1 || { echo "fuzz.sh: merge of $t failed" >&2; exit 1; }
    echo "  $t: seeds now $(ls "$seeds" | wc -l)"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "fuzz.sh: all clean ($((SECONDS - t0)) s)"
