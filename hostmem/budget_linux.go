//go:build linux

package hostmem

import "golang.org/x/sys/unix"

// budgetMemlock reads RLIMIT_MEMLOCK.
func budgetMemlock() (cur, max uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		return 0, 0, err
	}
	return lim.Cur, lim.Max, nil
}
