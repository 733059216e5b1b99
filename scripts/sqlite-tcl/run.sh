#!/usr/bin/env bash
# SQLite's own Tcl test suite (Debian source package sqlite3 3.40.1) through the
# engine: builds a stock testfixture and one whose default VFS is the engine, checks
# that the engine really is the default, runs the "veryquick" files one process per
# file with a time limit as an unprivileged user, and compares with expected.txt test
# by test (compare.mjs). Fails on a failing test not listed for its file (so on a file
# that is neither clean nor listed), on any hang, and on any crash not listed as the
# suite's own script crashing the testfixture ("harness crash:"); a listed test that
# passes is printed, and fails the run only with MW_TCL_STRICT=1.
#
#   scripts/sqlite-tcl/run.sh [--stock] [FILE.test ...]
#     --stock    also run every file with the stock testfixture (and check it too)
#     FILE.test  only these files (names without directory)
# Environment: MW_TCL_DIR (default /tmp/mw-sqlite-tcl: sources, builds, logs),
#   MW_TCL_JOBS (parallel files, default 2), MW_TCL_LIMIT (seconds per file, default 200),
#   MW_TCL_USER (the unprivileged user when run as root, default mwtest),
#   MW_TCL_STRICT=1 (a listed test that passes, unless listed as unstable, fails the run),
#   MW_TCL_WAIT=1 (the engine's connections take the write gate, as the extension's do in
#   the sqlite3 shell; expected.txt is for the default, 0).
# docs/sqlite-tests.md explains the results and every listed difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${MW_TCL_DIR:-/tmp/mw-sqlite-tcl}
jobs=${MW_TCL_JOBS:-2}
limit=${MW_TCL_LIMIT:-200}
user=${MW_TCL_USER:-mwtest}
stock_all=0 only=()
for a in "$@"; do
  case $a in
    --stock) stock_all=1 ;;
    -*) echo "unknown option $a" >&2; exit 2 ;;
    *) only+=("$a") ;;
  esac
done
log() { echo "[sqlite-tcl $(date +%H:%M:%S)] $*"; }
mkdir -p "$dir"
src=$dir/sqlite3-3.40.1
bld=$dir/build
bin=$dir/bin

# ---- 1. the source package (and what building and running it needs)
need=()
dpkg -s tcl-dev >/dev/null 2>&1 || need+=(tcl-dev)
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
if [ ! -d "$src" ] || [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "run once as root: fetching the sources needs apt" >&2; exit 1; }
  # A deb-src entry mirroring the deb entries of the Debian sources file.
  if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      >/etc/apt/sources.list.d/debian-src.sources
  fi
  log "apt-get update; install ${need[*]:-nothing}; apt-get source sqlite3"
  apt-get update -qq
  [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  if [ ! -d "$src" ]; then
    rm -rf "$dir/fetch" && mkdir -p "$dir/fetch"
    (cd "$dir/fetch" && apt-get source -qq sqlite3 >/dev/null 2>&1)
    [ -d "$dir/fetch/sqlite3-3.40.1" ] || { echo "apt-get source sqlite3 did not give 3.40.1" >&2; exit 1; }
    mv "$dir/fetch/sqlite3-3.40.1" "$src"
    rm -rf "$dir/fetch"
  fi
fi

# ---- 2. the stock testfixture
mkdir -p "$bld" "$bin"
if [ ! -x "$bin/testfixture-stock" ]; then
  log "building the stock testfixture (configure, make)"
  (cd "$bld" && "$src/configure" --with-tcl=/usr/lib/tcl8.6 >configure.log 2>&1 \
     && make -j2 testfixture >make-stock.log 2>&1) || { tail -30 "$bld/make-stock.log"; exit 1; }
  cp "$bld/testfixture" "$bin/testfixture-stock"
fi

# ---- 3. the engine's testfixture: the engine compiled against this tree's
# sqlite3.h (the engine uses only SQLite 3.40 APIs) and linked in; the amalgamation
# calls mw_testfixture_init at every sqlite3_initialize (SQLITE_EXTRA_INIT).
eng=$dir/engine
rm -rf "$eng" && mkdir -p "$eng"
# The engine is every .c of native/src and its folders (one per layer); its headers are
# included with their folder ("core/db.h"), so native/src is their only include path.
cflags=(-O2 -g -std=c11 -D_GNU_SOURCE -fno-strict-aliasing -Wall -Wno-unused-parameter
        -DMW_WAIT_DEFAULT="${MW_TCL_WAIT:-0}"
        -Werror=implicit-function-declaration -I"$repo/native/include" -I"$repo/native/src"
        -I"$bld")
mapfile -t engine_srcs < <(find "$repo/native/src" -name '*.c' | sort)
for c in "${engine_srcs[@]}" "$here/testfixture_init.c"; do
  gcc "${cflags[@]}" -c "$c" -o "$eng/$(basename "${c%.c}").o"
done
ar rcs "$eng/libmwtf.a" "$eng"/*.o
sum=$(cat "$eng"/*.o | md5sum | cut -d' ' -f1)
if [ ! -x "$bin/testfixture-mw" ] || [ "$(cat "$bin/testfixture-mw.sum" 2>/dev/null)" != "$sum" ]; then
  log "building the engine's testfixture"
  rm -f "$bld/testfixture"
  (cd "$bld" && make testfixture OPTS="-DSQLITE_EXTRA_INIT=mw_testfixture_init" \
     LIBS="$eng/libmwtf.a -lpthread" >make-mw.log 2>&1) || { tail -30 "$bld/make-mw.log"; exit 1; }
  mv "$bld/testfixture" "$bin/testfixture-mw"
  cp "$bin/testfixture-stock" "$bld/testfixture"
  echo "$sum" >"$bin/testfixture-mw.sum"
fi

# ---- 4. the unprivileged user (the suite refuses some tests as root)
run_as=()
if [ "$(id -u)" = 0 ]; then
  id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
  run_as=(runuser -u "$user" --)
fi
out=$dir/out
rm -rf "$out" && mkdir -p "$out/stock" "$out/mw" "$out/check"
# The unprivileged user may not be able to read the checkout (a clone under /root):
# it runs copies of the helpers.
cp "$here/run-one.sh" "$here/failing.awk" "$here/check-default.tcl" "$here/engine-checks.tcl" "$bin/"
chmod -R a+rX "$dir"
[ ${#run_as[@]} -eq 0 ] || chown -R "$user" "$out"
export HOME=$out

# ---- 5. the engine is the default VFS of the engine's testfixture, and not of stock
for m in stock mw; do
  got=$(cd "$out/check" && "${run_as[@]}" "$bin/testfixture-$m" "$bin/check-default.tcl") \
    || { echo "$got"; echo "check-default failed for $m" >&2; exit 1; }
  echo "$got" | sed "s/^/  $m: /"
  want=engine; [ $m = stock ] && want=stock
  [ "$(echo "$got" | tail -1)" = $want ] || { echo "testfixture-$m is not $want" >&2; exit 1; }
done

got=$(cd "$out/check" && "${run_as[@]}" timeout 60 "$bin/testfixture-mw" "$bin/engine-checks.tcl" 2>&1) \
  || { echo "$got"; echo "engine-checks.tcl failed (exit $?, 124: hang)" >&2; exit 1; }
echo "  mw: engine-checks.tcl: $got"

# ---- 6. the files
"$bin/testfixture-stock" "$here/list.tcl" "$src/test" veryquick 2>/dev/null | grep '\.test$' >"$out/veryquick.txt"
# A name alone (select1.test) selects the file of that name.
pick() { # names on stdin -> their paths in veryquick.txt
  while read -r n; do
    awk -v n="$n" '{ m = $0; sub(/.*\//, "", m) } m == n { print; found = 1 } END { exit !found }' \
      "$out/veryquick.txt" || { echo "no file $n in veryquick" >&2; exit 1; }
  done
}
if [ ${#only[@]} -gt 0 ]; then
  printf '%s\n' "${only[@]}" | pick >"$out/files.txt"
else
  cp "$out/veryquick.txt" "$out/files.txt"
fi
# Files listed as "skip (hang):" hang for a known reason being fixed elsewhere: they
# are not run (each would cost the whole time limit) and the summary names them.
awk '/^[^#[:space:]]/ && $2 == "skip" { print $1 }' "$here/expected.txt" >"$out/skipped.txt"
awk -v skip="$(tr '\n' ' ' <"$out/skipped.txt")" \
  'BEGIN { n = split(skip, a, " "); for (i = 1; i <= n; i++) s[a[i]] = 1 }
   { m = $0; sub(/.*\//, "", m) } !(m in s)' "$out/files.txt" >"$out/files.run"
mv "$out/files.run" "$out/files.txt"
log "$(wc -l <"$out/files.txt") files, $jobs at a time, ${limit}s each; skipped: $(tr '\n' ' ' <"$out/skipped.txt")"

run_files() { # MODE FILELIST
  xargs -a "$2" -P "$jobs" -n 1 "${run_as[@]}" "$bin/run-one.sh" "$bin/testfixture-$1" \
    "$src" "$out/$1" "$limit"
  for p in $(cat "$2"); do
    f=$(basename "$p")
    cat "$out/$1/$f.res" 2>/dev/null || echo "$f crash (no-result) 0 rc=?"
  done >"$out/$1.results"
}
t0=$(date +%s)
run_files mw "$out/files.txt"
log "engine run: $(( $(date +%s) - t0 ))s"
if [ $stock_all = 1 ]; then
  cp "$out/files.txt" "$out/stock-files.txt"
else
  # Stock only on what the engine did not pass: it tells engine differences from
  # files that fail without the engine too.
  awk '$2 != "clean" {print $1}' "$out/mw.results" | pick >"$out/stock-files.txt"
fi
t1=$(date +%s)
[ ! -s "$out/stock-files.txt" ] || run_files stock "$out/stock-files.txt"
touch "$out/stock.results"
log "stock run ($(wc -l <"$out/stock-files.txt") files): $(( $(date +%s) - t1 ))s"

# ---- 7. compare
node "$here/compare.mjs" "$here/expected.txt" "$out/mw.results" "$out/stock.results" "$out" "$out/skipped.txt"
