package allocator

import (
	"fmt"
	"sync"
	"unsafe"
	"weak"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// A region belongs to one allocator: two allocators over the same memory
// would both hand out offset 0. The Region contract makes that impossible
// by construction: New claims the region's RegionState, once and for good
// (a region serves one allocator for its whole life, and closing either
// closes both), so a second New over the same Region value, or over a
// wrapper that embeds it, fails. Two distinct Regions over the same memory
// would break the contract (a Region's memory is its own, and hostmem's
// constructors each map fresh memory); the invariants build checks that
// too, with a process-wide table of the first byte of every region in use.

// claim makes a the owner of its region, or fails when an allocator
// already owns it.
func (a *Allocator) claim() error {
	if !a.closed.owned.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: the region (%s, %d bytes) already belongs to another allocator; a region serves one allocator for its whole life",
			ErrInvalidArgument, a.region.Kind(), len(a.mem))
	}
	if invariants.Enabled {
		if err := claimMemory(a); err != nil {
			a.closed.owned.Store(false)
			return err
		}
	}
	return nil
}

// owners maps the first byte of every region an allocator carves to that
// region's state, under the invariants tag only. The pointers are weak: a
// region dropped without Close does not stay alive for the table, and a
// closed one's entry is stale, free for a new region at the same address.
var owners struct {
	mu sync.Mutex
	m  map[uintptr]weak.Pointer[RegionState]
}

// claimMemory records a's region memory as in use, or fails when another
// live region's state already claims the same first byte.
func claimMemory(a *Allocator) error {
	key := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
	owners.mu.Lock()
	defer owners.mu.Unlock()
	if owners.m == nil {
		owners.m = map[uintptr]weak.Pointer[RegionState]{}
	}
	if old := owners.m[key].Value(); old != nil && old != a.closed && !old.Closed() {
		return fmt.Errorf("%w: the region (%s, %d bytes at %#x) is memory another region already serves to an allocator: two Regions over the same memory break the Region contract",
			ErrInvalidArgument, a.region.Kind(), len(a.mem), key)
	}
	owners.m[key] = weak.Make(a.closed)
	return nil
}
