//go:build !linux

package hostmem

import (
	"errors"
	"runtime"
)

// budgetMemlock has no RLIMIT_MEMLOCK to read off Linux.
func budgetMemlock() (cur, max uint64, err error) {
	return 0, 0, errors.New("RLIMIT_MEMLOCK is not read on " + runtime.GOOS)
}
