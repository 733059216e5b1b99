# Prints the name of the first failing test of a testfixture log: a test prints
# "name..." (then " Ok" when it passes); a failure is a "! name expected:" line, or an
# "Error: ..." line right after the test's own line (the test's script raised an error).
# Prints nothing when no test failed.
/^! [^ ]+ expected:/ { print $2; exit }
/^Error: / { if (cur != "") { print cur; exit } }
{
  cur = ""
  if (match($0, /^[^ ]+\.\.\./) && substr($0, RLENGTH + 1) !~ /^ *Ok/) cur = substr($0, 1, RLENGTH - 3)
}
