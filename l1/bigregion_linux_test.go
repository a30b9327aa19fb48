//go:build linux

package l1_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
)

// bigRegion is an anonymous mapping made with MAP_NORESERVE: it reserves
// address space without memory or swap, so tests can build pools of
// production size (tens of GiB) on a small machine. The allocator never
// touches region memory, and these tests write at most stamps at the ends
// of blocks, so a pool backs a few pages per stamped block at most.
type bigRegion struct {
	mu sync.Mutex
	b  []byte
}

func newBigRegion(t testing.TB, size int64) *bigRegion {
	t.Helper()
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	require.NoError(t, err, "mmap %d bytes with MAP_NORESERVE", size)
	return &bigRegion{b: b}
}

func (r *bigRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

func (r *bigRegion) Kind() string { return allocator.KindMmap }

func (r *bigRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil {
		return nil
	}
	err := unix.Munmap(r.b)
	r.b = nil
	return err
}

// newBigAlloc returns an allocator over a MAP_NORESERVE region of capacity
// bytes, 4 KiB aligned, closed with the test.
func newBigAlloc(t testing.TB, capacity int64) *allocator.Allocator {
	t.Helper()
	a, err := allocator.New(newBigRegion(t, capacity), allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}
