# Prints the files of one permutations.test suite (default veryquick), one name per
# line, in the suite's order. Run with a testfixture: testfixture list.tcl TESTDIR [SUITE]
set testdir [file normalize [lindex $argv 0]]
set suite [expr {[llength $argv] > 1 ? [lindex $argv 1] : "veryquick"}]
# permutations.test takes its directory from argv0 and runs its own main only when
# argv0 names it; tester.tcl reads argv for options.
set ::argv0 [file join $testdir list.tcl]
set ::argv {}
source [file join $testdir permutations.test]
array set O $::testspec($suite)
foreach f $O(-files) { puts [file tail $f] }
exit 0
