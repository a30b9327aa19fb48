package allocator

import "sync"

// sliceRegion is the smallest Region: a []byte on the Go heap, for the
// package's internal tests, which cannot import hostmem (it imports this
// package).
type sliceRegion struct {
	mu  sync.Mutex
	buf []byte
	RegionState
}

// newSliceRegion returns a sliceRegion of size bytes.
func newSliceRegion(size int64) (Region, error) {
	return &sliceRegion{buf: make([]byte, size)}, nil
}

func (r *sliceRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf
}

func (r *sliceRegion) Kind() string { return "heap" }

func (r *sliceRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.MarkClosed()
	r.buf = nil
	return nil
}
