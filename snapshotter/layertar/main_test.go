package layertar

import (
	"flag"
	"os"
	"testing"
)

// TestMain bounds the fuzzer's minimizer by a count of executions unless
// -fuzzminimizetime is given. Nearly every early mutation of a FuzzImport
// seed adds coverage and is sent to a worker to be minimized, and Go's
// byte-slice minimizer is quadratic in the input's length: on a tar of a few
// KB it never ends within the default 60 s, and when that time is up the
// coordinator kills the worker and drops its executions, so with both
// workers minimizing the run stalls at 0 execs/s. A count bound ends
// normally and its executions are counted.
func TestMain(m *testing.M) {
	flag.Parse()
	const name = "test.fuzzminimizetime"
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if !given && flag.Lookup(name) != nil {
		if err := flag.Set(name, "100x"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
