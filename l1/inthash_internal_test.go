package l1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// intProbeCheck is probeCheck on a fresh store[K] under hash.
func intProbeCheck[K comparable](keys []K, hash func(*store[K], K) uint64) (longest, dup64 int) {
	var s store[K]
	s.init()
	return probeCheck(&s, keys, func(k K) uint64 { return hash(&s, k) })
}

type namedUint16 uint16

// TestIntKeyHash: integer keys take intHash, and hostile sets of them
// (sequential, strided so that only high bits differ, negative) spread over
// the index as random keys do. The check bites: a hash blind to the high
// half fails it.
func TestIntKeyHash(t *testing.T) {
	const n = 10000
	hash := func(s *store[int64], k int64) uint64 { return s.hash64(k) }
	for name, f := range map[string]func(i int64) int64{
		"sequential": func(i int64) int64 { return i },
		"stride2^16": func(i int64) int64 { return i << 16 },
		"stride2^32": func(i int64) int64 { return i << 32 },
		"stride2^50": func(i int64) int64 { return i << 50 },
		"negative":   func(i int64) int64 { return -i - 1 },
	} {
		t.Run(name, func(t *testing.T) {
			keys := make([]int64, n)
			for i := range keys {
				keys[i] = f(int64(i))
			}
			longest, dup := intProbeCheck(keys, hash)
			assert.LessOrEqual(t, longest, maxProbe, "longest probe")
			assert.Zero(t, dup, "64-bit collisions")
		})
	}
	t.Run("int32", func(t *testing.T) {
		var s store[int32]
		s.init()
		require.Equal(t, uint8(4), s.intBytes)
		keys := make([]int32, n)
		for i := range keys {
			keys[i] = int32(i) << 18
		}
		longest, dup := intProbeCheck(keys, func(s *store[int32], k int32) uint64 { return s.hash64(k) })
		assert.LessOrEqual(t, longest, maxProbe)
		assert.Zero(t, dup)
	})
	t.Run("named_uint16", func(t *testing.T) {
		var s store[namedUint16]
		s.init()
		require.Equal(t, uint8(2), s.intBytes)
		keys := make([]namedUint16, 1<<16)
		for i := range keys {
			keys[i] = namedUint16(i)
		}
		_, dup := intProbeCheck(keys, func(s *store[namedUint16], k namedUint16) uint64 { return s.hash64(k) })
		assert.Zero(t, dup, "every uint16 hashes apart")
	})
	t.Run("not_integers", func(t *testing.T) {
		var a store[string]
		a.init()
		var b store[float64]
		b.init()
		var c store[ObjectKey]
		c.init()
		assert.Zero(t, a.intBytes+b.intBytes+c.intBytes)
	})
	t.Run("bites", func(t *testing.T) {
		keys := make([]int64, 2000)
		for i := range keys {
			keys[i] = int64(i) << 32
		}
		longest, dup := intProbeCheck(keys, func(s *store[int64], k int64) uint64 { // blind to the high half
			return s.hash64(int64(uint32(k)))
		})
		assert.Greater(t, longest, maxProbe)
		assert.Equal(t, len(keys)-1, dup)
	})
}
