package hostmem

import (
	"fmt"
	"strconv"
)

// Region kinds returned by the regions' Kind methods.
const (
	KindHeap     = "heap"
	KindMmap     = "mmap"
	KindPinned   = "pinned"
	KindCUDAHost = "cuda-host"
)

// MmapOptions configures NewMmapRegion.
type MmapOptions struct {
	// Populate prefaults every page at creation (MAP_POPULATE), so first
	// touches in the hot path do not fault.
	Populate bool
	// HugePages asks for transparent huge pages (MADV_HUGEPAGE).
	HugePages bool
	// Lock page-locks the mapping with mlock, giving pinned host memory; the
	// region's Kind is then "pinned". A refused lock is an error that names
	// RLIMIT_MEMLOCK and the limit in force.
	Lock bool
	// NoReserve maps with MAP_NORESERVE: the region reserves address space
	// without committing memory or swap, so a pool larger than RAM + swap
	// can be created (under the kernel's default heuristic overcommit,
	// vm.overcommit_memory=0; under strict accounting, =2, the kernel ignores
	// the flag). Pages are backed only when first touched.
	//
	// The risk: when memory is short at that first touch, the kernel
	// cannot back the page and the process gets SIGBUS or is killed by the
	// OOM killer, at the write, not at NewMmapRegion. Use it for pools
	// whose working set is known to fit, and for tests and benchmarks at
	// production sizes (the allocator itself never touches region memory,
	// so a NoReserve pool of 1 TiB costs no RAM until it is written).
	// NoReserve with Populate or Lock is a contradiction and an error
	// wrapping ErrInvalidArgument. Linux only, like the mmap region.
	NoReserve bool
}

// regionSizeString formats a byte count for messages: "64 MiB" when exact in
// the largest binary unit that fits, else "N bytes (X.Y MiB)".
func regionSizeString(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	u, div := 0, int64(1024)
	for u+1 < len(units) && n >= div*1024 {
		u++
		div *= 1024
	}
	if n%div == 0 {
		return fmt.Sprintf("%d %s", n/div, units[u])
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, float64(n)/float64(div), units[u])
}
