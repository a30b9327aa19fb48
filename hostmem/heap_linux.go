//go:build linux

package hostmem

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// heapBackable returns nil when a heap region of size bytes can be backed
// now, or an error wrapping ErrOutOfMemory that names the limit. Go has no
// way to catch a failed heap allocation: a make the machine cannot back is
// a fatal "runtime: out of memory" that kills the process. So before make
// the region is checked against what the kernel can still give:
//
//   - MemAvailable + SwapFree from /proc/meminfo;
//   - the cgroup v2 limit, memory.max - memory.current, when one is set;
//   - RLIMIT_AS, when one is set.
//
// A source that cannot be read is skipped. The check is a snapshot: memory
// other processes take afterwards is not reserved by it.
func heapBackable(size int64) error {
	if avail, ok := meminfoAvailable(); ok && uint64(size) > avail {
		return fmt.Errorf("%w: heap region of %s cannot be backed: MemAvailable + SwapFree is %s (/proc/meminfo); "+
			"use NewMmapRegion with NoReserve to reserve address space without memory", ErrOutOfMemory, regionSizeString(size), regionSizeString(int64(avail)))
	}
	if left, ok := cgroupMemoryLeft(); ok && uint64(size) > left {
		return fmt.Errorf("%w: heap region of %s cannot be backed: the cgroup has %s left (memory.max - memory.current)",
			ErrOutOfMemory, regionSizeString(size), regionSizeString(int64(left)))
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) == nil && lim.Cur != unix.RLIM_INFINITY && uint64(size) > lim.Cur {
		return fmt.Errorf("%w: heap region of %s exceeds RLIMIT_AS (%d bytes)", ErrOutOfMemory, regionSizeString(size), lim.Cur)
	}
	return nil
}

// meminfoAvailable returns MemAvailable + SwapFree in bytes.
func meminfoAvailable() (uint64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	var total uint64
	found := false
	for line := range bytes.Lines(b) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "MemAvailable" && string(name) != "SwapFree") {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		total += kb << 10
		found = found || string(name) == "MemAvailable"
	}
	return total, found
}

// cgroupMemoryLeft returns memory.max - memory.current of the process's
// cgroup v2, when a limit is set.
func cgroupMemoryLeft() (uint64, bool) {
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil // "max" does not parse: no limit
	}
	limit, ok := read("memory.max")
	if !ok {
		return 0, false
	}
	cur, _ := read("memory.current")
	if cur > limit {
		return 0, true
	}
	return limit - cur, true
}
