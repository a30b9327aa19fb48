package l1

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// TestObjectKeyManagerMatchesInt runs one random sequence of batch calls on
// a Manager[ObjectKey] and on a Manager[int] whose key i stands for the
// i-th ObjectKey, and requires the same answers and the same Snapshot. The
// ObjectKeys differ from each other in one field only (chunk hash, model,
// rank, group or salt), and each call names them in strings of their own
// half the time, so the ObjectKey hash, its string-identity shortcut and
// the lookup hints are checked against the generic path, repeats and
// shuffled orders included. Locks lapse as a shared clock moves.
func TestObjectKeyManagerMatchesInt(t *testing.T) {
	base := ObjectKey{ChunkHash: strings.Repeat("c", 32), Model: "m", KVRank: 1, GroupID: 2, CacheSalt: "s"}
	var pool []ObjectKey
	for i := range 8 {
		for f := range 5 {
			k := base
			switch f {
			case 0:
				k.ChunkHash = strings.Repeat("c", 31) + string(rune('A'+i))
			case 1:
				k.Model = string(rune('A' + i))
			case 2:
				k.KVRank = uint32(10 + i)
			case 3:
				k.GroupID = uint32(10 + i)
			case 4:
				k.CacheSalt = string(rune('A' + i))
			}
			pool = append(pool, k)
		}
	}
	pool = append(pool, base, ObjectKey{})
	for i := range pool {
		for j := range i {
			require.NotEqual(t, pool[i], pool[j], "the pool's keys are distinct")
		}
	}

	newMem := func() *allocator.Allocator {
		r, err := hostmem.NewHeapRegion(24 * 4096)
		require.NoError(t, err)
		a, err := allocator.New(r, allocator.Options{Align: 4096})
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		return a
	}
	clk := &testClock{t: time.Unix(1_000_000, 0)}
	cfg := Config{EvictOnDemand: true, Now: clk.Now, WriteTTL: 50 * time.Millisecond, ReadTTL: 80 * time.Millisecond}
	mo, err := New[ObjectKey](newMem(), cfg)
	require.NoError(t, err)
	mi, err := New[int](newMem(), cfg)
	require.NoError(t, err)
	require.True(t, mo.objects.objectKey)

	rng := rand.New(rand.NewPCG(7, 11))
	leases := map[int]Lease{} // the last lease each key got
	var prev []int
	for step := range 4000 {
		clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond) // both managers see it
		// The key list: the last call's again (hints right), or a fresh
		// random one with repeats.
		var ids []int
		if len(prev) > 0 && rng.IntN(2) == 0 {
			ids = prev
		} else {
			for range 1 + rng.IntN(12) {
				ids = append(ids, rng.IntN(len(pool)))
			}
		}
		prev = ids
		oks := make([]ObjectKey, len(ids))
		copies := rng.IntN(2) == 0
		for j, id := range ids {
			oks[j] = pool[id]
			if copies {
				k := &oks[j]
				k.ChunkHash, k.Model, k.CacheSalt = strings.Clone(k.ChunkHash), strings.Clone(k.Model), strings.Clone(k.CacheSalt)
			}
		}
		ls := make([]Lease, len(ids))
		for j, id := range ids {
			ls[j] = leases[id]
		}
		keep := func(ids []int, rs []Result) {
			for j, r := range rs {
				if r.Status == OK {
					leases[ids[j]] = r.Lease
				}
			}
		}
		switch rng.IntN(6) + 1 {
		case 1:
			mode := Mode(rng.IntN(3))
			ro, err1 := mo.ReserveWrite(oks, nil, 4096, mode)
			ri, err2 := mi.ReserveWrite(ids, nil, 4096, mode)
			require.Equal(t, err2, err1, "step %d", step)
			require.Equal(t, ri, ro, "step %d: ReserveWrite", step)
			keep(ids, ro)
		case 2:
			so, err1 := mo.FinishWrite(oks, ls)
			si, err2 := mi.FinishWrite(ids, ls)
			require.Equal(t, err2, err1)
			require.Equal(t, si, so, "step %d: FinishWrite", step)
		case 3:
			ro, err1 := mo.ReserveRead(oks, 1)
			ri, err2 := mi.ReserveRead(ids, 1)
			require.Equal(t, err2, err1)
			require.Equal(t, ri, ro, "step %d: ReserveRead", step)
			keep(ids, ro)
		case 4:
			so, err1 := mo.FinishRead(oks, ls, 1)
			si, err2 := mi.FinishRead(ids, ls, 1)
			require.Equal(t, err2, err1)
			require.Equal(t, si, so, "step %d: FinishRead", step)
		case 5:
			force := rng.IntN(4) == 0
			so, err1 := mo.Delete(oks, force)
			si, err2 := mi.Delete(ids, force)
			require.Equal(t, err2, err1)
			require.Equal(t, si, so, "step %d: Delete", step)
		case 6:
			require.NoError(t, mo.Touch(oks))
			require.NoError(t, mi.Touch(ids))
		}
		if step%50 == 0 {
			so, si := mo.Snapshot(), mi.Snapshot()
			require.Len(t, so, len(si), "step %d", step)
			for j := range so {
				require.Equal(t, pool[si[j].Key], so[j].Key, "step %d: Snapshot order", step)
				require.Equal(t, si[j].ObjectState, so[j].ObjectState, "step %d", step)
			}
		}
	}
	require.NoError(t, mo.Close())
	require.NoError(t, mi.Close())
}
