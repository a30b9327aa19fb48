//go:build linux

package server

import (
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// pool is the daemon's memory: a region the allocator carves, growing as
// its segments become ready, and the memfd behind it, which every client
// maps. hostmem.SegmentedRegion with a memfd backing is one.
type pool interface {
	allocator.GrowingRegion
	FD() int
	Progress() hostmem.SegmentProgress
	Done() <-chan struct{}
}

// PoolOptions configures the pool.
type PoolOptions struct {
	// HugePages backs the memfd with hugetlbfs pages (MFD_HUGETLB): the
	// size must be a multiple of the huge page size, and the system must
	// have that many free (vm.nr_hugepages).
	HugePages bool
	// Populate faults every page in, segment by segment in the background,
	// before the allocator hands it out; the daemon serves as soon as the
	// first segment is ready. Without it the pool is usable at once and
	// pages are backed when first touched: a pool of any size costs no
	// memory until written (the tests' pools).
	Populate bool
	// Lock mlocks each segment once populated (bounded by RLIMIT_MEMLOCK);
	// it implies Populate.
	Lock bool
	// SegmentSize is the unit of population; 0 means hostmem's default
	// (64 MiB).
	SegmentSize int64
}

// newPool creates the pool: a hostmem segmented region over a memfd
// (MFD_CLOEXEC, sealed against shrinking, growing and further seals,
// mapped MAP_SHARED), populated and pinned in the background as opts say.
// It returns once the first segment is ready (every segment, when nothing
// is populated: that takes no time), or with the failure that stopped it.
func newPool(size int64, opts PoolOptions) (pool, error) {
	so := hostmem.SegmentedOptions{
		SegmentSize: opts.SegmentSize,
		Memfd:       &hostmem.MemfdOptions{Name: "kvallocd-pool", HugeTLB: opts.HugePages},
		NoReserve:   !opts.Populate && !opts.Lock,
	}
	if opts.Lock {
		so.Pin = hostmem.PinLock
	}
	r, err := hostmem.NewSegmentedRegion(size, so)
	if err != nil {
		return nil, err
	}
	first := func() bool { return r.Grown() > 0 }
	if so.NoReserve {
		first = func() bool { return false } // wait for all: they are ready at once
	}
	for !first() {
		select {
		case <-r.Done():
			if r.Grown() == 0 {
				err := r.Progress().Err
				r.Close()
				if err == nil {
					err = fmt.Errorf("%w: the pool's first segment never became ready", allocator.ErrClosed)
				}
				return nil, err
			}
			return r, nil
		case <-time.After(100 * time.Microsecond):
		}
	}
	return r, nil
}
