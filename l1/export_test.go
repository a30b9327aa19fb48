package l1_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// churn runs a random mix of calls on e, leaving some objects
// write-locked, some read-locked, some temporary, some partial.
func churn(t *testing.T, e *env, rng *rand.Rand) {
	t.Helper()
	next := 0
	for range 300 {
		switch rng.IntN(6) {
		case 0, 1: // a chain, some tails partial
			n := 1 + rng.IntN(6)
			ks := keys(next, n)
			next += n
			pos := make([]uint32, n)
			for i := range pos {
				pos[i] = uint32(i)
			}
			if rng.IntN(3) == 0 {
				pos[n-1] |= l1.Partial
			}
			rs, err := e.m.ReserveWriteChain(ks, pos, nil, obj*int64(1+rng.IntN(2)), l1.ModeAll)
			require.NoError(t, err)
			var ok []int
			var ls []l1.Lease
			for i, r := range rs {
				if r.Status == l1.OK {
					ok, ls = append(ok, ks[i]), append(ls, r.Lease)
				}
			}
			if rng.IntN(5) > 0 {
				_, err = e.m.FinishWrite(ok, ls)
				require.NoError(t, err)
			}
		case 2:
			if next > 0 {
				ks := keys(rng.IntN(next), 1+rng.IntN(3))
				rs, err := e.m.ReserveRead(ks, 1)
				require.NoError(t, err)
				if rng.IntN(2) == 0 {
					var got []int
					var ls []l1.Lease
					for i, r := range rs {
						if r.Status == l1.OK {
							got, ls = append(got, ks[i]), append(ls, r.Lease)
						}
					}
					_, err = e.m.FinishRead(got, ls, 1)
					require.NoError(t, err)
				}
			}
		case 3:
			if next > 0 {
				e.touch(keys(rng.IntN(next), 2))
			}
		case 4:
			e.putTemp(t, keys(next, 1), obj)
			next++
		case 5:
			if next > 0 {
				_, err := e.m.Delete(keys(rng.IntN(next), 1), false)
				require.NoError(t, err)
			}
		}
	}
}

// restored builds a fresh allocator of capacity bytes holding saved's
// blocks and a manager over it.
func restored(t *testing.T, capacity int64, cfg l1.Config, saved []l1.Saved[int]) (*allocator.Allocator, *l1.Manager[int]) {
	t.Helper()
	a := newAlloc(t, capacity, 4*KiB)
	bs := make([]allocator.Block, len(saved))
	for i, s := range saved {
		bs[i] = s.Block
	}
	require.NoError(t, a.Restore(bs))
	m, err := l1.Restore[int](a, cfg, saved)
	require.NoError(t, err)
	return a, m
}

// TestExportRestore: under each policy, a manager's export, restored over
// a fresh allocator, holds every finished object that was not
// write-locked (and no read-locked temporary one), with its block; it
// exports the same list again; its allocator verifies; and with no locks
// held on either side, both evict the same victims.
func TestExportRestore(t *testing.T) {
	for _, p := range l1.EvictionPolicies {
		t.Run(p.String(), func(t *testing.T) {
			const capacity = 2 * MiB
			cfg := l1.Config{Eviction: p, EvictOnDemand: true, Placement: allocator.Scattered}
			e := newEnv(t, capacity, cfg)
			churn(t, e, rand.New(rand.NewPCG(7, uint64(p))))
			saved, err := e.m.Export()
			require.NoError(t, err)
			want := map[int]l1.ObjectState{}
			for _, en := range e.m.Snapshot() {
				if en.Finished && !en.WriteLocked && !(en.Temporary && en.ReadLocks > 0) {
					want[en.Key] = en.ObjectState
				}
			}
			require.Len(t, saved, len(want))
			require.NotEmpty(t, saved)
			for _, s := range saved {
				w, ok := want[s.Key]
				require.True(t, ok, "exported key %d", s.Key)
				require.Equal(t, w.Block, s.Block)
				require.Equal(t, w.Size, s.Size)
				require.Equal(t, w.Temporary, s.Temporary)
			}
			cfg.Now = e.clk.Now
			a, m := restored(t, capacity, cfg, saved)
			require.NoError(t, a.Verify())
			again, err := m.Export()
			require.NoError(t, err)
			require.Equal(t, saved, again, "the restored manager exports another list")
			require.Equal(t, len(saved), m.Len())
			readLeft := map[int]time.Duration{}
			for _, s := range saved {
				readLeft[s.Key] = s.ReadLeft
			}
			for _, en := range m.Snapshot() {
				require.Equal(t, readLeft[en.Key] == 0, en.Evictable, "restored key %d: evictable, read-locked for %v", en.Key, readLeft[en.Key])
			}

			// Eviction order: release the old manager's locks (abort its
			// writes, finish its reads), then evict half of both.
			for _, en := range e.m.Snapshot() {
				switch {
				case en.WriteLocked:
					_, err := e.m.AbortWrite([]int{en.Key}, []l1.Lease{en.WriteLease})
					require.NoError(t, err)
				case en.ReadLocks > 0:
					_, err := e.m.FinishRead([]int{en.Key}, []l1.Lease{en.ReadLease}, en.ReadLocks)
					require.NoError(t, err)
				}
			}
			// With no lock left on the old manager, a manager restored from
			// its export evicts the very victims the old one does.
			saved, err = e.m.Export()
			require.NoError(t, err)
			_, m2 := restored(t, capacity, cfg, saved)
			n := len(saved) / 2
			for range n {
				require.True(t, evictOne(t, e.m))
				require.True(t, evictOne(t, m2))
			}
			want2, err := e.m.Export()
			require.NoError(t, err)
			got2, err := m2.Export()
			require.NoError(t, err)
			require.Len(t, got2, len(saved)-n)
			require.Equal(t, keysOf(want2), keysOf(got2), "the restored manager evicted others than the old one")
		})
	}
}

// evictOne evicts one object of m through on-demand eviction: a reserve
// of a new key that needs one victim's room, then its abort.
func evictOne(t *testing.T, m *l1.Manager[int]) bool {
	t.Helper()
	before := m.Stats().Evictions
	used, capacity := m.Usage()
	got, err := m.EvictTo(float64(used-1) / float64(capacity))
	require.NoError(t, err)
	return got >= 1 && m.Stats().Evictions > before
}

func keysOf(s []l1.Saved[int]) []int {
	out := make([]int, len(s))
	for i := range s {
		out[i] = s[i].Key
	}
	return out
}

// TestRestoreRefuses: a list Export could not have made, or one the
// memory disagrees with, is refused with ErrInvalidArgument.
func TestRestoreRefuses(t *testing.T) {
	cfg := l1.Config{}
	blk := func(off int64) allocator.Block {
		return allocator.Block{Offset: off, Size: obj, Gen: uint64(1 + off/obj)}
	}
	good := []l1.Saved[int]{{Key: 1, Block: blk(0), Size: obj}, {Key: 2, Block: blk(obj), Size: obj}}
	_, m := restored(t, MiB, cfg, good)
	require.Equal(t, 2, m.Len())
	for name, bad := range map[string][]l1.Saved[int]{
		"duplicate key": {{Key: 1, Block: blk(0), Size: obj}, {Key: 1, Block: blk(obj), Size: obj}},
		"size 0":        {{Key: 1, Block: blk(0), Size: 0}, {Key: 2, Block: blk(obj), Size: obj}},
		"size > block":  {{Key: 1, Block: blk(0), Size: obj + 1}, {Key: 2, Block: blk(obj), Size: obj}},
		"small queue":   {{Key: 1, Block: blk(0), Size: obj, Small: true}, {Key: 2, Block: blk(obj), Size: obj}},
		"frequency":     {{Key: 1, Block: blk(0), Size: obj, Freq: 4}, {Key: 2, Block: blk(obj), Size: obj}},
	} {
		a := newAlloc(t, MiB, 4*KiB)
		require.NoError(t, a.Restore([]allocator.Block{blk(0), blk(obj)}))
		_, err := l1.Restore[int](a, cfg, bad)
		require.ErrorIs(t, err, l1.ErrInvalidArgument, name)
	}
	// The memory holds a block the list lacks.
	a := newAlloc(t, MiB, 4*KiB)
	require.NoError(t, a.Restore([]allocator.Block{blk(0), blk(obj), blk(2 * obj)}))
	_, err := l1.Restore[int](a, cfg, slices.Clone(good))
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
}
