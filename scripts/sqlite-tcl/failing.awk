# Prints the names of the failing tests of a testfixture log, in order, each once: a
# test prints "name..." (then " Ok" when it passes); a failure is a "! name expected:"
# line, or an "Error: ..." line right after the test's own line (the test's script
# raised an error). The first name printed is the file's first failing test. Prints
# nothing when no test failed. run-one.sh adds the names of the harness's own list
# ("!Failures on these tests:", printed only when the file runs to its end).
function out(n) { if (!(n in seen)) { seen[n] = 1; print n } }
/^! [^ ]+ expected:/ { out($2); cur = ""; next }
/^Error: / { if (cur != "") out(cur); cur = ""; next }
{
  cur = ""
  if (match($0, /^[^ ]+\.\.\./) && substr($0, RLENGTH + 1) !~ /^ *Ok/) cur = substr($0, 1, RLENGTH - 3)
}
