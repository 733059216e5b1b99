# Prints the files of one permutations.test suite (default veryquick), one per line
# in the suite's order, as paths relative to the source tree (test/x.test,
# ext/fts5/test/y.test). Run with a testfixture: testfixture list.tcl TESTDIR [SUITE]
set testdir [file normalize [lindex $argv 0]]
set suite [expr {[llength $argv] > 1 ? [lindex $argv 1] : "veryquick"}]
# permutations.test takes its directory from argv0 and runs its own main only when
# argv0 names it; tester.tcl reads argv for options.
set ::argv0 [file join $testdir list.tcl]
set ::argv {}
source [file join $testdir permutations.test]
array set O $::testspec($suite)
set root [file dirname $testdir]
foreach f $O(-files) {
  set f [file normalize [expr {[file pathtype $f] eq "absolute" ? $f : [file join $testdir $f]}]]
  puts [string range $f [expr {[string length $root] + 1}] end]
}
exit 0
