// Closing: the allocator and its region close together, and a region
// closed directly, behind the allocator's back, closes the allocator at its
// next call (RegionState).

package allocator

// Close releases the region. It is idempotent; every later call fails with
// ErrClosed, Bytes returns nil and Fit returns 0.
func (a *Allocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return nil
	}
	a.markClosedLocked()
	return a.region.Close()
}

// openLocked reports whether the allocator may still hand out or take back
// memory: it is not closed, and neither is its region. A region closed
// directly, behind the allocator's back, closes the allocator here, so
// every later call returns ErrClosed instead of handing out offsets into
// unmapped memory. The region answers with one atomic load of its
// RegionState.
func (a *Allocator) openLocked() bool {
	if a.mem != nil && !a.closed.Closed() {
		return true
	}
	return a.openSlowLocked()
}

// openSlowLocked is openLocked for a closed allocator or a closed region.
func (a *Allocator) openSlowLocked() bool {
	if a.mem == nil {
		return false
	}
	if a.regionClosed() {
		a.markClosedLocked()
		return false
	}
	return true
}

// markClosedLocked closes the allocator's side: no more calls.
func (a *Allocator) markClosedLocked() { a.mem = nil }

// regionClosed reports whether the region has been closed.
func (a *Allocator) regionClosed() bool { return a.closed.Closed() }
