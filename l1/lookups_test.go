package l1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// lookups returns the manager's lookup counters of kind k.
func (e *env) lookups(k l1.LookupKind) l1.LookupCounts { return e.m.Stats().Lookups[k] }

// The lookup counters, kind by kind: see lookups.go.
func TestLookupCounters(t *testing.T) {
	// Keys 0 and 1 ready, 2 and 3 write-locked, 4 and 5 missing.
	setup := func(t *testing.T) *env {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, keys(0, 2), obj)
		e.reserve(t, keys(2, 2), obj)
		return e
	}
	t.Run("read", func(t *testing.T) {
		e := setup(t)
		e.read(t, []int{0, 1, 2, 3, 4, 5, 0}, 1)
		assert.Equal(t, l1.LookupCounts{Calls: 1, Hits: 3, Misses: 4}, e.lookups(l1.LookupRead), "a write-locked key is a miss")
		e.read(t, nil, 1)
		assert.Equal(t, l1.LookupCounts{Calls: 2, Hits: 3, Misses: 4}, e.lookups(l1.LookupRead))
	})
	t.Run("read_prefix", func(t *testing.T) {
		e := setup(t)
		_, n, err := e.m.ReserveReadPrefix(keys(0, 6), 1) // stops at the write-locked key 2
		require.NoError(t, err)
		require.Equal(t, 2, n)
		assert.Equal(t, l1.LookupCounts{Calls: 1, Hits: 2, Misses: 1, Skipped: 3}, e.lookups(l1.LookupReadPrefix))
		_, n, err = e.m.AppendReadPrefix(nil, []int{0, 1, 0}, 1) // all hits: no miss
		require.NoError(t, err)
		require.Equal(t, 3, n)
		assert.Equal(t, l1.LookupCounts{Calls: 2, Hits: 5, Misses: 1, Skipped: 3}, e.lookups(l1.LookupReadPrefix))
		_, n, err = e.m.AppendReadPrefix(nil, []int{5, 0}, 1) // stops at once, at a missing key
		require.NoError(t, err)
		require.Zero(t, n)
		assert.Equal(t, l1.LookupCounts{Calls: 3, Hits: 5, Misses: 2, Skipped: 4}, e.lookups(l1.LookupReadPrefix))
		assert.Zero(t, e.lookups(l1.LookupRead).Calls, "a prefix lookup is not a ReserveRead")
	})
	t.Run("unsafe_read", func(t *testing.T) {
		e := setup(t)
		e.read(t, []int{0}, 1)
		e.unsafeRead(keys(0, 6)) // only 0 is read-locked
		assert.Equal(t, l1.LookupCounts{Calls: 1, Hits: 1, Misses: 5}, e.lookups(l1.LookupUnsafeRead))
	})
	t.Run("write", func(t *testing.T) {
		e := setup(t)
		before := e.lookups(l1.LookupWrite) // setup's two calls: 4 misses
		assert.Equal(t, l1.LookupCounts{Calls: 2, Misses: 4}, before)
		// Present: 0 (re-locked), 2 (write-locked), 0 again (repeat);
		// missing: 4, 5, and 4 again (a repeat of a missing key).
		rs := e.reserve(t, []int{0, 2, 4, 0, 5, 4}, obj)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotWritable, l1.OK, l1.KeyNotWritable, l1.OK, l1.KeyNotWritable}, statuses(rs))
		assert.Equal(t, l1.LookupCounts{Calls: 3, Hits: 3, Misses: 7}, e.lookups(l1.LookupWrite))
		rs, err := e.m.ReserveWrite([]int{1, 9}, nil, obj, l1.ModeUpdate)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotWritable}, statuses(rs))
		assert.Equal(t, l1.LookupCounts{Calls: 4, Hits: 4, Misses: 8}, e.lookups(l1.LookupWrite))
	})
	t.Run("out_of_memory_is_a_miss", func(t *testing.T) {
		e := newEnv(t, 16*KiB, l1.Config{})
		rs := e.reserve(t, keys(0, 6), obj) // room for 4
		assert.Equal(t, append(repeat(l1.OK, 4), l1.OutOfMemory, l1.OutOfMemory), statuses(rs))
		assert.Equal(t, l1.LookupCounts{Calls: 1, Misses: 6}, e.lookups(l1.LookupWrite))
	})
	t.Run("rejected_and_closed_calls_count_nothing", func(t *testing.T) {
		e := setup(t)
		want := e.m.Stats().Lookups
		_, err := e.m.ReserveRead(keys(0, 2), 0)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		_, _, err = e.m.ReserveReadPrefix(keys(0, 2), l1.MaxReadLocks+1)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		_, err = e.m.ReserveWrite(keys(0, 2), nil, 0, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		assert.Equal(t, want, e.m.Stats().Lookups)
		require.NoError(t, e.m.Close())
		_, err = e.m.ReserveRead(keys(0, 2), 1)
		require.ErrorIs(t, err, l1.ErrClosed)
		_, err = e.m.UnsafeRead(keys(0, 2))
		require.ErrorIs(t, err, l1.ErrClosed)
		assert.Equal(t, want, e.m.Stats().Lookups)
	})
}

func TestLookupKindStrings(t *testing.T) {
	var names []string
	for _, k := range l1.LookupKinds {
		names = append(names, k.String())
	}
	assert.Equal(t, []string{"read", "read_prefix", "unsafe_read", "write"}, names)
	assert.Len(t, l1.LookupKinds, int(l1.NumLookupKinds))
	assert.Equal(t, "LookupKind(9)", l1.LookupKind(9).String())
}
