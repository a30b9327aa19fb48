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

// PinMode says what pins a region's pages: for a segmented region, what
// makes a segment ready once it is populated.
type PinMode int

const (
	// PinNone pins nothing (a segmented region still populates each
	// segment): the region's Kind is "mmap".
	PinNone PinMode = iota
	// PinLock page-locks the memory with mlock, bounded by RLIMIT_MEMLOCK
	// (root with CAP_IPC_LOCK is exempt): Kind "pinned".
	PinLock
	// PinCUDA registers each segment of a segmented region with the CUDA
	// driver (cudaHostRegister), which pins it for DMA: Kind "cuda-host".
	PinCUDA
)

// String returns "none", "mlock" or "cuda".
func (p PinMode) String() string {
	switch p {
	case PinNone:
		return "none"
	case PinLock:
		return "mlock"
	case PinCUDA:
		return "cuda"
	}
	return fmt.Sprintf("PinMode(%d)", int(p))
}

// THPMode is the explicit transparent-huge-page policy of a region.
// Compaction stalls while the kernel assembles huge pages can collapse
// pinning throughput, so the choice is the caller's, not left implicit.
type THPMode int

const (
	// THPDefault leaves the system's policy
	// (/sys/kernel/mm/transparent_hugepage/enabled) alone.
	THPDefault THPMode = iota
	// THPOn advises huge pages (MADV_HUGEPAGE). The mapping is then
	// aligned to the huge-page size (a segmented region's SegmentSize must
	// be a multiple of it). A refused hint does not fail the region;
	// HintErr reports it.
	THPOn
	// THPOff forbids huge pages (MADV_NOHUGEPAGE): no compaction stalls,
	// 512 times more page faults to populate.
	THPOff
)

// MmapOptions configures NewMmapRegion. Its THP and Pin are the settings
// of the same names in SegmentedOptions.
type MmapOptions struct {
	// Populate prefaults every page at creation (MAP_POPULATE), so first
	// touches in the hot path do not fault.
	Populate bool
	// THP is the transparent-huge-page policy: THPOn advises huge pages
	// (MADV_HUGEPAGE) and aligns the mapping to them, THPOff forbids them
	// (MADV_NOHUGEPAGE), THPDefault leaves the system's policy.
	THP THPMode
	// Pin says what pins the pages: PinNone nothing, PinLock mlock, giving
	// pinned host memory (the region's Kind is then "pinned"; a refused
	// lock is an error that names RLIMIT_MEMLOCK and the limit in force).
	// PinCUDA is for NewCUDAHostRegion and segmented regions, and an error
	// wrapping ErrInvalidArgument here.
	Pin PinMode
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
	// NoReserve with Populate or a Pin is a contradiction and an error
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
