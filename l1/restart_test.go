package l1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// TestHoldLeasesAcrossRestore: HoldLeases drops a live write's key and
// holds its block until its lease lapses, bounds a lapsed write's hold
// (it waited for its owner) by the bound given, and leaves a read-locked
// object read-locked; Export and Held say for how long; a manager
// restored from them (RestoreHeld) holds the same blocks, counted in its
// quarantine, and keeps the object unevictable, each until its time is
// up, and never hands a held block to a writer before then.
func TestHoldLeasesAcrossRestore(t *testing.T) {
	const size = 64 * KiB
	cfg := l1.Config{QuarantineLapsedWrites: true, WriteTTL: 10 * time.Second, ReadTTL: 5 * time.Second, EvictOnDemand: true}
	e := newEnv(t, 4*size, cfg)
	e.put(t, []int{2}, size)
	e.reserve(t, []int{4}, size)
	e.clk.Advance(11 * time.Second) // 4's write lapses: quarantined for its owner
	e.reserve(t, []int{1}, size)
	require.Equal(t, l1.OK, e.read(t, []int{2}, 1)[0].Status)
	require.Equal(t, 1, e.m.Stats().QuarantinedObjects)

	dropped, err := e.m.HoldLeases(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, dropped, "the live write's key")
	_, ok := e.m.State(1)
	require.False(t, ok, "a write in progress kept its key")
	require.Equal(t, 2, e.m.Stats().QuarantinedObjects)
	held, err := e.m.Held()
	require.NoError(t, err)
	lefts := map[time.Duration]bool{}
	for _, h := range held {
		require.False(t, h.Read)
		lefts[h.Left] = true
	}
	require.Equal(t, map[time.Duration]bool{10 * time.Second: true, 30 * time.Second: true}, lefts, "the live write's TTL, and the bound for the lapsed one")
	saved, err := e.m.Export()
	require.NoError(t, err)
	require.Len(t, saved, 1)
	require.Equal(t, 5*time.Second, saved[0].ReadLeft)

	a := newAlloc(t, 4*size, 4*KiB)
	bs := []allocator.Block{saved[0].Block}
	for _, h := range held {
		bs = append(bs, h.Block)
	}
	require.NoError(t, a.Restore(bs))
	clk := newClock()
	cfg.Now = clk.Now
	m, err := l1.RestoreHeld[int](a, cfg, saved, held)
	require.NoError(t, err)
	require.Equal(t, 2, m.Stats().QuarantinedObjects)
	require.Equal(t, int64(2*size), m.Stats().QuarantinedBytes)
	require.False(t, m.IsEvictable(2), "a read lock of the restart lapsed at once")
	// One free block: one writer gets it, the next finds no room.
	rs, err := m.ReserveWrite([]int{10}, nil, size, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, l1.OK, rs[0].Status)
	rs2, err := m.ReserveWrite([]int{11}, nil, size, l1.ModeAll)
	require.NoError(t, err)
	require.NotEqual(t, l1.OK, rs2[0].Status, "two blocks handed out of one free one: a held block was reissued")
	_, err = m.AbortWrite([]int{10}, []l1.Lease{rs[0].Lease})
	require.NoError(t, err)

	clk.Advance(6 * time.Second)
	require.True(t, m.IsEvictable(2), "the read lock outlived its lease")
	require.Equal(t, 2, m.Stats().QuarantinedObjects)
	clk.Advance(5 * time.Second)
	_ = m.Touch(nil) // a call: its sweep frees what lapsed
	require.Equal(t, 1, m.Stats().QuarantinedObjects, "the live write's block outlived its lease")
	clk.Advance(20 * time.Second)
	_ = m.Touch(nil)
	require.Equal(t, 0, m.Stats().QuarantinedObjects, "the lapsed write's block outlived the bound")
	require.Equal(t, int64(size), a.Stats().Used, "the held blocks were not freed")

	_, err = l1.RestoreHeld[int](a, cfg, nil, []l1.HeldBlock{{Block: bs[0], Left: 0}})
	require.ErrorIs(t, err, l1.ErrInvalidArgument, "a held block with no time left")
}
