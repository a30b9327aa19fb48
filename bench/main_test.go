//go:build linux

package bench

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the child roles of the benchmarks that need other
// processes (manyClientsChild), else the tests and benchmarks.
func TestMain(m *testing.M) {
	if arg, ok := os.LookupEnv(manyClientsEnv); ok {
		if err := manyClientsChild(arg); err != nil {
			fmt.Fprintln(os.Stderr, "many-clients child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
