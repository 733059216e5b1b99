#!/usr/bin/env bash
# Runs one test file of SQLite's Tcl suite in its own empty directory with a time
# limit, and writes OUT/NAME.res: "NAME STATUS FIRST-FAILING-TEST SECONDS rc=N
# FAILING-TESTS...", NAME being the file's name without its directory.
#   STATUS: clean | errors | hang (time limit) | crash (killed by a signal)
#   FAILING-TESTS: every failing test, each once, in the order of the log: the names
#     that failing.awk finds in the log, then any other name of the harness's own list
#     ("!Failures on these tests:", complete: the harness gives up only after 1000
#     failures, and prints "*** Giving up...", which adds "(gave-up)"), then pseudo-names:
#       (script)  the file stopped on a Tcl error outside any test, or exited early
#                 with an error: no "N errors out of M tests" line (the tests after
#                 the error did not run);
#       (leak)    the harness's end-of-file check failed: "files were left open" or
#                 "Unfreed memory".
#   FIRST-FAILING-TEST: the first of FAILING-TESTS; "-" when clean.
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
log=$out/$f.log
failures=$( { LC_ALL=C awk -f "$(dirname "$0")/failing.awk" "$log"
              grep -a -m1 '^!Failures on these tests:' "$log" | sed 's/^!Failures on these tests://' | tr ' ' '\n'
              grep -aq '^\*\*\* Giving up' "$log" && echo '(gave-up)'
              grep -aq ' errors out of ' "$log" || echo '(script)'
              grep -aq -e ' files were left open$' -e '^Unfreed memory' "$log" && echo '(leak)'
            } | awk 'NF && !seen[$1]++ { print $1 }' | tr '\n' ' ')
failures=${failures% }
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
if [ "$status" = clean ]; then
  first=- failures=
else
  first=${failures%% *}
  [ -n "$first" ] || first='(script)' failures='(script)'
fi
echo "$f $status $first $secs rc=$rc${failures:+ $failures}" >"$out/$f.res"
cd "$out" && rm -rf "$work"
