package l1

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTTLLock(t *testing.T) {
	var l ttlLock
	assert.False(t, l.held(0))
	assert.False(t, l.lapsed(0))

	l.lock(2, 100, 50) // held until 150
	assert.True(t, l.held(149))
	assert.False(t, l.held(150), "a lock lapses at its expiry")
	assert.True(t, l.lapsed(150))

	l.lock(3, 140, 50) // refreshes every holder's expiry to 190
	assert.Equal(t, ttlLock{count: 5, expiry: 190}, l)
	assert.True(t, l.held(180))

	l.unlock(1) // does not refresh
	assert.Equal(t, ttlLock{count: 4, expiry: 190}, l)

	l.lock(1, 200, 50) // lapsed at 190: the old holds are dropped
	assert.Equal(t, ttlLock{count: 1, expiry: 250}, l)

	l.unlock(7) // floor at zero
	assert.Equal(t, ttlLock{}, l)
	assert.False(t, l.lapsed(1000))
}

func TestList(t *testing.T) {
	var s store[int]
	s.init()
	var l list[int]
	l.init(&s, setEvict)
	assert.Nil(t, l.front())
	var objs []*object[int]
	for k := range 3 {
		o := s.alloc()
		o.key = k
		objs = append(objs, o)
	}
	for _, o := range objs {
		l.pushBack(o)
	}
	order := func() []int {
		var out []int
		for o := l.front(); o != nil; o = l.after(o) {
			out = append(out, o.key)
		}
		return out
	}
	assert.Equal(t, []int{0, 1, 2}, order())
	l.moveToBack(objs[0])
	assert.Equal(t, []int{1, 2, 0}, order())
	l.moveToBack(objs[0])
	assert.Equal(t, []int{1, 2, 0}, order())
	l.remove(objs[2])
	assert.Equal(t, []int{1, 0}, order())
	assert.Equal(t, 2, l.len)
}

// TestStore drives the index with random inserts and removals of few keys,
// so that probe runs collide and wrap, and checks it against a map after
// every step: each key found or missing as it should be, and every probe
// run intact (each slot reachable from its home without crossing an empty
// slot). The second pass gives all keys one of four hashes: long runs.
func TestStore(t *testing.T) {
	for _, hashMask := range []uint32{^uint32(0), 3} {
		var s store[int]
		s.init()
		model := map[int]*object[int]{}
		rng := rand.New(rand.NewPCG(1, uint64(hashMask)))
		for step := range 10000 {
			k := rng.IntN(48)
			h := s.hash(&k) & hashMask
			o, pos := s.find(&k, h)
			if o != model[k] {
				require.Fail(t, fmt.Sprintf("mask %x step %d: find(%d) = %p, want %p", hashMask, step, k, o, model[k]))
			}
			if o == nil {
				o = s.alloc()
				o.key, o.hash = k, h
				s.insert(o, pos)
				model[k] = o
			} else if rng.IntN(2) == 0 {
				s.remove(o)
				s.release(o)
				delete(model, k)
			}
			if s.n != len(model) {
				require.Fail(t, fmt.Sprintf("mask %x step %d: n %d, model %d", hashMask, step, s.n, len(model)))
			}
			mask := uint32(len(s.slots) - 1)
			for i, sl := range s.slots {
				if sl.rec == 0 {
					continue
				}
				o := s.rec(sl.rec)
				if o.hash != sl.hash || model[o.key] != o {
					require.Fail(t, fmt.Sprintf("mask %x step %d: slot %d holds a stale record", hashMask, step, i))
				}
				for j := sl.hash & mask; j != uint32(i); j = (j + 1) & mask {
					if s.slots[j].rec == 0 {
						require.Fail(t, fmt.Sprintf("mask %x step %d: slot %d unreachable from its home %d", hashMask, step, i, sl.hash&mask))
					}
				}
			}
		}
		assert.Len(t, s.chunks, 1, "records are reused")
	}
}
