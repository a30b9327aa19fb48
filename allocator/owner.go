package allocator

import (
	"fmt"
	"sync"
	"unsafe"
	"weak"
)

// A region belongs to one allocator. Two allocators over the same memory
// would both hand out offset 0, so New claims the region's first byte in a
// process-wide table and Close (or the discovery that the region was
// closed) gives it up. The table holds weak pointers: an allocator dropped
// without Close does not stay alive for it, and its claim lapses once the
// garbage collector has reclaimed it.

var owners struct {
	mu sync.Mutex
	m  map[uintptr]weak.Pointer[Allocator]
}

// claimRegion records a as the owner of its region's memory, or fails when
// a live allocator already owns it.
func claimRegion(a *Allocator) error {
	key := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
	a.key = key
	owners.mu.Lock()
	defer owners.mu.Unlock()
	if owners.m == nil {
		owners.m = map[uintptr]weak.Pointer[Allocator]{}
	}
	if old := owners.m[key].Value(); old != nil && old != a && !old.lapsed() {
		return fmt.Errorf("%w: the region (%s, %d bytes at %#x) already belongs to another allocator; close that allocator first",
			ErrInvalidArgument, a.region.Kind(), len(a.mem), key)
	}
	owners.m[key] = weak.Make(a)
	return nil
}

// lapsed reports whether a no longer uses its region: a is closed, or its
// region was closed directly. It takes no allocator lock (the lock order
// is allocator, then owners).
func (a *Allocator) lapsed() bool { return a.dead.Load() || a.regionClosed() }

// unclaimRegion gives up a's claim, if it still holds it.
func unclaimRegion(a *Allocator) {
	owners.mu.Lock()
	defer owners.mu.Unlock()
	if w, ok := owners.m[a.key]; ok && (w.Value() == a || w.Value() == nil) {
		delete(owners.m, a.key)
	}
}
