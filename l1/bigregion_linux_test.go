//go:build linux

package l1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// newBigAlloc returns an allocator over a NoReserve mmap region of capacity
// bytes, 4 KiB aligned, closed with the test. MAP_NORESERVE reserves
// address space without memory or swap, so tests can build pools of
// production size (tens of GiB) on a small machine. The allocator never
// touches region memory, and these tests write at most stamps at the ends
// of blocks, so a pool backs a few pages per stamped block at most.
func newBigAlloc(t testing.TB, capacity int64) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewMmapRegion(capacity, hostmem.MmapOptions{NoReserve: true})
	require.NoError(t, err, "mmap %d bytes with MAP_NORESERVE", capacity)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

// A production pool, 45 GiB of 8 MiB objects, every one write-reserved
// and then deleted with force: no block goes to the next writer until the
// first writers let go. The second writers get OutOfMemory, then, once
// the first have aborted, the whole pool.
func TestForcedDeleteFullBigPoolNotReissued(t *testing.T) {
	const size, capacity = 8 << 20, 45 << 30
	a := newBigAlloc(t, capacity)
	m, err := l1.New[int](a, l1.Config{QuarantineLapsedWrites: true, WriteTTL: time.Minute})
	require.NoError(t, err)
	n := int(capacity / size)
	ks := make([]int, n)
	for i := range ks {
		ks[i] = i
	}
	first, err := m.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	leases := make([]l1.Lease, n)
	for i, r := range first {
		require.Equal(t, l1.OK, r.Status)
		leases[i] = r.Lease
	}
	stamp := func(b allocator.Block, s string) { copy(a.Bytes(b)[b.Size-int64(len(s)):], s) }
	stamp(first[n-1].Block, "first")
	sts, err := m.Delete(ks, true)
	require.NoError(t, err)
	for _, s := range sts {
		require.Equal(t, l1.OK, s)
	}
	st := m.Stats()
	require.Zero(t, st.Objects)
	require.Equal(t, int64(capacity), st.QuarantinedBytes)
	require.Equal(t, st.Used, st.QuarantinedBytes)

	second, err := m.ReserveWrite(ks[:1], nil, size, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, l1.OutOfMemory, second[0].Status, "a held block was reissued")

	// The first writers abort, in one call; the second get the pool.
	sts, err = m.AbortWrite(ks, leases)
	require.NoError(t, err)
	for _, s := range sts {
		require.Equal(t, l1.OK, s)
	}
	require.Zero(t, m.Stats().QuarantinedBytes)
	second, err = m.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	for _, r := range second {
		require.Equal(t, l1.OK, r.Status)
	}
	require.NoError(t, m.Close())
	require.Zero(t, a.Stats().Used)
}
