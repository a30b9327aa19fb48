package l1_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/internal/invariants"
	"github.com/kvalloc/kvalloc/l1"
)

// AppendReserveWriteChain appends exactly what ReserveWriteChain returns,
// after dst's own entries, and allocates no result slice when dst has room.
func TestAppendReserveWriteChainAppends(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{Eviction: l1.EvictPrefix})
	e.put(t, []int{1}, obj)
	mark := l1.Result{Status: l1.KeyIsLocked, Lease: 99}
	dst := make([]l1.Result, 1, 8)
	dst[0] = mark
	dst = append(dst, mark) // a stale entry beyond the kept prefix...
	dst = dst[:1]           // ...that the call must overwrite, not keep
	rs, err := e.m.AppendReserveWriteChain(dst, []int{0, 1, 2}, []uint32{0, 1, 2 | l1.Partial}, nil, obj, l1.ModeNew)
	require.NoError(t, err)
	require.Len(t, rs, 4)
	assert.Equal(t, mark, rs[0], "dst's own entry is kept")
	assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotWritable, l1.OK}, statuses(rs[1:]))
	assert.Equal(t, l1.Result{Status: l1.KeyNotWritable}, rs[2], "a refused key's Result is zero but its status")
	assert.Same(t, &dst[:4][0], &rs[0], "no new slice when dst has room")
	assert.Equal(t, e.wl([]int{0, 2}), []l1.Lease{rs[1].Lease, rs[3].Lease})

	// Bad input: nil and the error, dst untouched.
	before := append([]l1.Result(nil), rs...)
	got, err := e.m.AppendReserveWriteChain(rs, []int{5}, []uint32{0, 1}, nil, obj, l1.ModeNew)
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Nil(t, got)
	got, err = e.m.AppendReserveWriteChain(rs, []int{5}, nil, nil, 0, l1.ModeNew)
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Nil(t, got)
	assert.Equal(t, before, rs)
	_, ok := e.m.State(5)
	assert.False(t, ok)

	// With room, the call allocates no result slice (the invariants
	// build's check allocates: counted in a release build only).
	if invariants.Enabled {
		return
	}
	buf := make([]l1.Result, 0, 4)
	keys := []int{10, 11, 12}
	allocs := testing.AllocsPerRun(20, func() {
		rs, err := e.m.AppendReserveWriteChain(buf, keys, nil, nil, obj, l1.ModeAll)
		if err != nil || len(rs) != 3 {
			require.Fail(t, fmt.Sprintf("%v %v", rs, err))
		}
	})
	assert.Zero(t, allocs)
}

// AppendReserveRead appends exactly what ReserveRead returns, after dst's
// own entries, overwriting stale entries beyond them, and allocates no
// result slice when dst has room.
func TestAppendReserveReadAppends(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{})
	e.put(t, []int{1, 2}, obj)
	mark := l1.Result{Status: l1.KeyIsLocked, Lease: 99}
	dst := make([]l1.Result, 1, 8)
	dst[0] = mark
	dst = append(dst, mark, mark, mark) // stale entries beyond the kept prefix...
	dst = dst[:1]                       // ...that the call must overwrite, not keep
	rs, err := e.m.AppendReserveRead(dst, []int{1, 7, 2}, 1)
	require.NoError(t, err)
	require.Len(t, rs, 4)
	assert.Equal(t, mark, rs[0], "dst's own entry is kept")
	assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotExist, l1.OK}, statuses(rs[1:]))
	assert.Equal(t, l1.Result{Status: l1.KeyNotExist}, rs[2], "a missing key's Result is zero but its status")
	assert.Same(t, &dst[:4][0], &rs[0], "no new slice when dst has room")
	for _, k := range []int{1, 2} {
		st, ok := e.m.State(k)
		require.True(t, ok)
		assert.Equal(t, 1, st.ReadLocks, "key %d read-locked once", k)
	}
	want, err := e.m.ReserveRead([]int{1, 7, 2}, 1)
	require.NoError(t, err)
	assert.Equal(t, want, rs[1:], "the same Results as ReserveRead (the lock's lease is shared)")

	// Bad input: nil and the error, dst untouched, no lock taken.
	before := append([]l1.Result(nil), rs...)
	got, err := e.m.AppendReserveRead(rs, []int{1}, 0)
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Nil(t, got)
	assert.Equal(t, before, rs)
	st, _ := e.m.State(1)
	assert.Equal(t, 2, st.ReadLocks)

	if invariants.Enabled {
		return
	}
	// The env's listener costs an allocation a call (the event's keys),
	// so the check is against ReserveRead: fewer allocations, by the
	// result slice (one in a release build; the race build counts more).
	buf := make([]l1.Result, 0, 4)
	keys := []int{1, 2}
	allocs := testing.AllocsPerRun(20, func() {
		rs, err := e.m.AppendReserveRead(buf, keys, 1)
		if err != nil || len(rs) != 2 {
			require.Fail(t, fmt.Sprintf("%v %v", rs, err))
		}
	})
	plain := testing.AllocsPerRun(20, func() {
		rs, err := e.m.ReserveRead(keys, 1)
		if err != nil || len(rs) != 2 {
			require.Fail(t, fmt.Sprintf("%v %v", rs, err))
		}
	})
	assert.Less(t, allocs, plain, "no result slice allocated")
}
