//go:build !linux

package hostmem

// heapBackable cannot ask the system how much memory is left on this
// platform; only the runtime's own limits apply there (see NewHeapRegion).
func heapBackable(size int64) error { return nil }
