//go:build linux

package bench

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the child roles of the benchmarks that need other
// processes (manyClientsChild), else the tests and benchmarks, then stops
// the Redis Cluster the L2 benchmarks share.
func TestMain(m *testing.M) {
	if arg, ok := os.LookupEnv(manyClientsEnv); ok {
		if err := manyClientsChild(arg); err != nil {
			fmt.Fprintln(os.Stderr, "many-clients child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	closeL2Cluster()
	os.Exit(code)
}
