#!/usr/bin/env bash
# Runs one test file of SQLite's Tcl suite in its own empty directory with a time
# limit, and writes OUT/NAME.res: "NAME STATUS FIRST-FAILING-TEST SECONDS rc=N
# FAILING-TESTS...", NAME being the file's name without its directory.
#   STATUS: clean | errors | hang (time limit) | crash (killed by a signal)
#   FIRST-FAILING-TEST: the first test of the log that failed (first-failing.awk); "-"
#   when clean, "(script)" when the file stopped on a Tcl error outside any test.
# Usage: run-one.sh TESTFIXTURE SOURCE-TREE OUT LIMIT_SECONDS PATH (relative to the tree)
set -u
tf=$1 srcdir=$2 out=$3 limit=$4 path=$5
f=$(basename "$path")
work=$out/work/$f
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
start=$(date +%s)
# timeout puts the file in its own process group and kills the whole group, so
# testfixture children (the suite launches some) go too.
timeout -k 10 "$limit" "$tf" "$srcdir/$path" >"$out/$f.log" 2>&1 </dev/null
rc=$?
secs=$(( $(date +%s) - start ))
first=$(LC_ALL=C awk -f "$(dirname "$0")/first-failing.awk" "$out/$f.log")
failures=$(grep -a -m1 '^!Failures on these tests:' "$out/$f.log" | sed 's/^!Failures on these tests://')
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  status=hang
elif [ $rc -gt 128 ]; then
  status=crash
elif [ $rc -eq 0 ] && { grep -aq '^0 errors out of' "$out/$f.log" ||
                        ! grep -aq -e '^! ' -e ' errors out of ' "$out/$f.log"; }; then
  # A file that returns early on this platform (win32*.test) prints no count.
  status=clean
else
  status=errors
fi
[ "$status" = clean ] && first=-
[ -z "$first" ] && first='(script)'
echo "$f $status $first $secs rc=$rc$failures" >"$out/$f.res"
cd "$out" && rm -rf "$work"
