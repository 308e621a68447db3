package e2e

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs this package's tests one at a time unless -parallel is given. Each of them
// starts real dispatcher, consumer or outboxctl processes against the shared cluster, and some
// assert on timing under those processes' own timeouts (TestOverlappingDispatcherFencedOff
// waits for every outcome call of the resumed dispatcher to be fenced off, not timed out): since
// the split into packages (issue 23 item 3) they no longer share the -parallel slots with the
// SQL-only suites, so two of them side by side, next to another package's tests on a two-core
// machine, starved those calls.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			given = true
		}
	})
	if !given {
		if err := flag.Set("test.parallel", "1"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
