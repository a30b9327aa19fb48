package l1_test

import (
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Leases: a holder whose lock lapsed cannot act on a lock taken after
// its own (see the package doc, "Leases").

// Writer A reserves k and its lock lapses; writer B reserves k again and
// gets the same block; A's late FinishWrite must not commit B's half-written
// object.
// From a hostile review (two actors on one key, one late).
func TestLateWriterCannotCommitAnotherWritersReservation(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second})
	a := e.reserve(t, []int{1}, obj)
	require.Equal(t, l1.OK, a[0].Status)
	e.clk.Advance(11 * time.Second) // A's lock lapses
	b := e.reserve(t, []int{1}, obj)
	require.Equal(t, l1.OK, b[0].Status)
	require.Equal(t, a[0].Block.Offset, b[0].Block.Offset, "B got the same memory")
	require.NotEqual(t, a[0].Block.Gen, b[0].Block.Gen, "under a new handle generation")
	require.NotEqual(t, a[0].Lease, b[0].Lease)
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{a[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st, "A's late FinishWrite")
	s := e.state(t, 1)
	assert.True(t, s.WriteLocked, "B's reservation still stands")
	assert.False(t, s.Finished, "nothing committed")

	// Nor can A abort it, or finish it into a read lock.
	st, err = e.m.AbortWrite([]int{1}, []l1.Lease{a[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st)
	rs, err := e.m.FinishWriteAndReserveRead([]int{1}, []l1.Lease{a[0].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Result{{Status: l1.StaleLease}}, rs)
	assert.True(t, e.state(t, 1).WriteLocked)

	// B, with its own lease, commits.
	st, err = e.m.FinishWrite([]int{1}, []l1.Lease{b[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st)
	// A lease is good once: B's second FinishWrite finds nothing to finish.
	st, err = e.m.FinishWrite([]int{1}, []l1.Lease{b[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.KeyInWrongState}, st)
}

// Reader A's read lock lapses; reader B locks the key again; A's late
// FinishRead must not release B's hold.
// From a hostile review (two actors on one key, one late).
func TestLateReaderCannotReleaseAnotherReadersLock(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{ReadTTL: 5 * time.Second})
	e.putTemp(t, []int{2}, obj) // a temporary object: a release to 0 frees it
	e.put(t, []int{1}, obj)
	a := e.read(t, []int{1, 2}, 1)
	e.clk.Advance(6 * time.Second) // A's locks lapse (the temporary object 2 is reclaimed)
	b := e.read(t, []int{1}, 1)
	require.Equal(t, l1.OK, b[0].Status)
	require.NotEqual(t, a[0].Lease, b[0].Lease, "a new epoch after the lapse")
	st, err := e.m.FinishRead([]int{1, 2}, []l1.Lease{a[0].Lease, a[1].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease, l1.KeyNotExist}, st)
	assert.Equal(t, 1, e.state(t, 1).ReadLocks, "B's hold stands")
	// A second reader of B's epoch shares B's lease.
	c := e.read(t, []int{1}, 2)
	assert.Equal(t, b[0].Lease, c[0].Lease)
	st, err = e.m.FinishRead([]int{1}, []l1.Lease{c[0].Lease}, 3)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st)
}

// A finishing call whose leases and keys differ in length is
// ErrInvalidArgument and changes nothing; lease 0 never matches.
// From a hostile review.
func TestLeasesOfTheWrongLengthAreRejected(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	rs := e.reserve(t, []int{1, 2}, obj)
	before := e.m.Snapshot()
	_, err := e.m.FinishWrite([]int{1, 2}, []l1.Lease{rs[0].Lease})
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.AbortWrite([]int{1}, nil)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.FinishWriteAndReserveRead([]int{1}, []l1.Lease{1, 2}, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.FinishRead([]int{1}, nil, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Equal(t, before, e.m.Snapshot(), "nothing changed")
	// Lease 0 never matches.
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{0})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st)
}

// Leases are unique and grow; every granted key of a batch gets its own.
// From a hostile review.
func TestWriteLeasesAreUniqueAndGrow(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	rs := e.reserve(t, []int{2, 1, 3}, obj) // 2 and 3 allocated, 1 re-locked
	seen := map[l1.Lease]bool{}
	for _, r := range rs {
		require.Equal(t, l1.OK, r.Status)
		assert.NotZero(t, r.Lease)
		assert.False(t, seen[r.Lease], "lease %d handed out twice", r.Lease)
		seen[r.Lease] = true
	}
	assert.Less(t, rs[0].Lease, rs[2].Lease, "allocated keys in request order")
	assert.Less(t, rs[2].Lease, rs[1].Lease, "then re-locked keys")
}
