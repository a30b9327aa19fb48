package l1

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

func newHintManager(t *testing.T, objects int) *Manager[ObjectKey] {
	t.Helper()
	r, err := hostmem.NewHeapRegion(int64(objects) * 4096)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: 4096})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	m, err := New[ObjectKey](a, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func hintKeys(n int, model string) []ObjectKey {
	ks := make([]ObjectKey, n)
	for i := range ks {
		ks[i] = ObjectKey{ChunkHash: fmt.Sprintf("chunk-%04d", i), Model: model}
	}
	return ks
}

// store puts keys, finished, and returns their write leases.
func storeKeys(t *testing.T, m *Manager[ObjectKey], ks []ObjectKey) []Lease {
	t.Helper()
	res, err := m.ReserveWrite(ks, nil, 4096, ModeAll)
	require.NoError(t, err)
	leases := make([]Lease, len(ks))
	for i, r := range res {
		require.Equal(t, OK, r.Status, "key %d", i)
		leases[i] = r.Lease
	}
	sts, err := m.FinishWrite(ks, leases)
	require.NoError(t, err)
	require.Equal(t, repeatStatus(OK, len(ks)), sts)
	return leases
}

func repeatStatus(s Status, n int) []Status {
	out := make([]Status, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestHintOfReleasedRecord: the zero key is a valid key, and a released
// record holds the zero key too. A hint that names the record of a removed
// zero key must not find it (fails before records carried the live flag,
// with the hint checking only the key).
func TestHintOfReleasedRecord(t *testing.T) {
	m := newHintManager(t, 4)
	zero := []ObjectKey{{}}
	res, err := m.ReserveWrite(zero, nil, 4096, ModeAll)
	require.NoError(t, err)
	require.Equal(t, OK, res[0].Status)
	leases := []Lease{res[0].Lease}
	sts, err := m.AbortWrite(zero, leases)
	require.NoError(t, err)
	require.Equal(t, []Status{OK}, sts)
	// The hint for position 0 still names the released record.
	sts, err = m.FinishWrite(zero, leases)
	require.NoError(t, err)
	assert.Equal(t, []Status{KeyNotExist}, sts)
	rr, err := m.ReserveRead(zero, 1)
	require.NoError(t, err)
	assert.Equal(t, KeyNotExist, rr[0].Status)
	_, ok := m.State(ObjectKey{})
	assert.False(t, ok)
}

// TestHintOfReusedRecord: a record freed by one key and reused by another
// answers for the new key only, whichever position names it.
func TestHintOfReusedRecord(t *testing.T) {
	m := newHintManager(t, 8)
	a, b := hintKeys(1, "a"), hintKeys(1, "b")
	storeKeys(t, m, a)
	_, err := m.Delete(a, false)
	require.NoError(t, err)
	storeKeys(t, m, b) // reuses a's record, hinted at position 0
	res, err := m.ReserveRead(a, 1)
	require.NoError(t, err)
	assert.Equal(t, KeyNotExist, res[0].Status)
	res, err = m.ReserveRead([]ObjectKey{a[0], b[0]}, 1)
	require.NoError(t, err)
	assert.Equal(t, KeyNotExist, res[0].Status)
	assert.Equal(t, OK, res[1].Status)
}

// TestHintsAnyOrder: calls that name the same keys in another order, in
// part, repeated, or mixed with missing keys answer as they would without
// hints; equal keys in strings of their own find their records.
func TestHintsAnyOrder(t *testing.T) {
	m := newHintManager(t, 64)
	ks := hintKeys(32, "m")
	storeKeys(t, m, ks)
	rev := make([]ObjectKey, len(ks))
	for i, k := range ks {
		rev[len(ks)-1-i] = ObjectKey{ChunkHash: string([]byte(k.ChunkHash)), Model: string([]byte(k.Model))}
	}
	for _, call := range [][]ObjectKey{ks, rev, ks[5:9], append(ks[:3:3], ks[0], hintKeys(40, "x")[39]), ks} {
		res, err := m.ReserveRead(call, 1)
		require.NoError(t, err)
		seen := map[ObjectKey]bool{}
		leases := make([]Lease, len(call))
		for i, k := range call {
			want := OK
			if k.Model == "x" {
				want = KeyNotExist
			}
			assert.Equal(t, want, res[i].Status, "%v", k)
			leases[i] = res[i].Lease
			seen[k] = true
		}
		sts, err := m.FinishRead(call, leases, 1)
		require.NoError(t, err)
		for i, k := range call {
			if k.Model != "x" {
				assert.Equal(t, OK, sts[i], "%v", k)
			}
		}
	}
	for _, k := range ks {
		s, ok := m.State(k)
		require.True(t, ok)
		assert.Zero(t, s.ReadLocks)
	}
}

// TestHintsGiveUp: a call of keys unrelated to the last call's stops
// guessing after hintSlack wrong guesses.
func TestHintsGiveUp(t *testing.T) {
	m := newHintManager(t, 256)
	a, b := hintKeys(100, "a"), hintKeys(100, "b")
	storeKeys(t, m, a)
	storeKeys(t, m, b)
	_, err := m.ReserveRead(a, 1) // hints name a's records
	require.NoError(t, err)
	err = m.Touch(b)
	require.NoError(t, err)
	assert.Equal(t, hintSlack+1, m.hints.misses)
	assert.Zero(t, m.hints.hits)
	err = m.Touch(b) // now the hints name b's records
	require.NoError(t, err)
	assert.Equal(t, len(b), m.hints.hits)
	assert.Zero(t, m.hints.misses)
}

// TestHintsPastMax: a call longer than maxHints keeps hints for its first
// maxHints keys and looks the rest up as usual.
func TestHintsPastMax(t *testing.T) {
	m := newHintManager(t, maxHints+10)
	ks := make([]ObjectKey, maxHints+10)
	for i := range ks {
		ks[i] = ObjectKey{ChunkHash: fmt.Sprint(i)}
	}
	storeKeys(t, m, ks)
	assert.Len(t, m.hints.recs, maxHints)
	res, err := m.ReserveRead(ks, 1)
	require.NoError(t, err)
	for i, r := range res {
		require.Equal(t, OK, r.Status, "key %d", i)
	}
	assert.Equal(t, maxHints, m.hints.hits)
}

// TestHintsAfterClose: Close drops the records the hints name; the calls
// after it answer ErrClosed or see an empty manager.
func TestHintsAfterClose(t *testing.T) {
	m := newHintManager(t, 8)
	ks := hintKeys(4, "m")
	storeKeys(t, m, ks)
	require.NoError(t, m.Close())
	_, err := m.ReserveRead(ks, 1)
	assert.ErrorIs(t, err, ErrClosed)
	_, ok := m.State(ks[0])
	assert.False(t, ok)
	assert.Empty(t, m.Snapshot())
}
