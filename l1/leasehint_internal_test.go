package l1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lease guess (hint.go) names the record a lease was handed out for,
// so calls that finish keys after other calls overwrote the position hints
// find them without a probe; and like every hint it never changes an
// answer: a lease whose entry was overwritten, a stale lease, and a lease
// whose record now holds another key are answered as without guesses.
func TestLeaseGuess(t *testing.T) {
	m := newHintManager(t, 64)
	a, b := hintKeys(4, "a"), hintKeys(4, "b")
	ra, err := m.ReserveWrite(a, nil, 4096, ModeAll)
	require.NoError(t, err)
	rb, err := m.ReserveWrite(b, nil, 4096, ModeAll) // overwrites a's position hints
	require.NoError(t, err)
	la, lb := make([]Lease, 4), make([]Lease, 4)
	for i := range ra {
		la[i], lb[i] = ra[i].Lease, rb[i].Lease
	}
	for i, l := range la {
		m.mu.Lock()
		o := m.lookupLeaseLocked(i, &a[i], l, m.now)
		m.mu.Unlock()
		require.NotNil(t, o)
		assert.Equal(t, a[i], o.key)
		assert.Equal(t, m.leaseRecs[uint64(l)&(leaseTable-1)], o.idx, "the guess names a's record")
	}
	st, err := m.FinishWrite(a, la)
	require.NoError(t, err)
	assert.Equal(t, []Status{OK, OK, OK, OK}, st)

	// b's lease 0 presented for a[0]: the guess names b[0]'s record, whose
	// key differs, so a[0] is looked up: finished, not write-locked.
	st, err = m.FinishWrite(a[:1], lb[:1])
	require.NoError(t, err)
	assert.Equal(t, []Status{KeyInWrongState}, st)

	// b[1] aborted and reserved again: its old lease guesses a record
	// that now holds b[1] under a new lease (or another key): StaleLease.
	_, err = m.AbortWrite(b[1:2], lb[1:2])
	require.NoError(t, err)
	_, err = m.ReserveWrite(b[1:2], nil, 4096, ModeAll)
	require.NoError(t, err)
	st, err = m.FinishWrite(b[1:2], lb[1:2])
	require.NoError(t, err)
	assert.Equal(t, []Status{StaleLease}, st)

	// A lease whose table entry later leases overwrote: looked up as usual.
	m.mu.Lock()
	m.leaseRecs[uint64(lb[2])&(leaseTable-1)] = m.leaseRecs[uint64(lb[3])&(leaseTable-1)]
	m.mu.Unlock()
	st, err = m.FinishWrite(b[2:3], lb[2:3])
	require.NoError(t, err)
	assert.Equal(t, []Status{OK}, st)
	st, err = m.FinishWrite(b[3:4], lb[3:4])
	require.NoError(t, err)
	assert.Equal(t, []Status{OK}, st)

	// A missing key with a lease that guesses a live record: KeyNotExist.
	ghost := hintKeys(5, "c")[4]
	st, err = m.FinishWrite([]ObjectKey{ghost}, la[:1])
	require.NoError(t, err)
	assert.Equal(t, []Status{KeyNotExist}, st)
}
