//go:build linux

package l1_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// The hostile cases (late actors, extreme TTLs, jumping clocks, slow
// listeners) at production size: 8 MiB objects (a KV chunk) in a 45 GiB
// pool, 5760 objects when full.
const (
	prodObject = 8 * MiB
	prodPool   = 45 << 30
	prodN      = int(prodPool / prodObject)
)

func prodEnv(t *testing.T, cfg l1.Config) *env {
	t.Helper()
	a := newBigAlloc(t, prodPool)
	return newEnvOver(t, a, a, cfg)
}

// Writer A fills the pool and stalls; writer B reserves every key again and
// gets the same blocks; A's late FinishWrite commits none of B's objects.
func TestProductionLateWriterCommitsNothing(t *testing.T) {
	e := prodEnv(t, l1.Config{WriteTTL: time.Minute})
	ks := keys(0, prodN)
	a := e.reserve(t, ks, prodObject)
	require.Equal(t, repeat(l1.OK, prodN), statuses(a))
	require.Equal(t, int64(prodPool), e.used(), "the pool is full")
	e.clk.Advance(time.Minute)
	b := e.reserve(t, ks, prodObject)
	require.Equal(t, repeat(l1.OK, prodN), statuses(b))
	st, err := e.m.FinishWrite(ks, leasesOf(a))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.StaleLease, prodN), st)
	assert.Equal(t, prodN, e.m.Stats().WriteLocked, "B's reservations stand")
	st, err = e.m.FinishWrite(ks, leasesOf(b))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, prodN), st)
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, prodN, n)
	assert.Zero(t, e.used())
}

// A pool full of finished, never-read temporary objects is reclaimed by
// EvictTo and by on-demand eviction.
func TestProductionFinishedTemporariesAreEvictable(t *testing.T) {
	e := prodEnv(t, l1.Config{EvictOnDemand: true})
	e.putTemp(t, keys(0, prodN), prodObject)
	e.clk.Advance(24 * time.Hour)
	rs := e.reserve(t, keys(prodN, 16), prodObject)
	assert.Equal(t, repeat(l1.OK, 16), statuses(rs), "evicted on demand")
	assert.Equal(t, uint64(16), e.m.Stats().OnDemandEvictions)
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, prodN-16, n)
	assert.Equal(t, 16*prodObject, e.used(), "only the write-locked objects stay")
}

// Locks with a TTL of math.MaxInt64 hold a full pool for 1000 years of
// clock.
func TestProductionNoExpiryHoldsAFullPool(t *testing.T) {
	e := prodEnv(t, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry})
	ks := keys(0, prodN)
	rs := e.reserve(t, ks, prodObject)
	for range 4 {
		e.clk.Advance(250 * 365 * 24 * time.Hour)
		e.m.Len()
	}
	st, err := e.m.FinishWrite(ks, leasesOf(rs))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, prodN), st)
	e.read(t, ks, 1)
	e.clk.Advance(1 << 62)
	e.clk.Advance(-1 << 62)
	assert.Equal(t, repeat(l1.KeyIsLocked, prodN), e.del(ks, false))
	assert.Equal(t, int64(prodPool), e.used())
}

// On-demand eviction with Scattered placement hands each victim's 8 MiB
// block to a new object (allocator.Reissue) in a full 45 GiB pool, with a
// reader holding 16 objects: the held objects are neither evicted nor
// reissued, the reader's late FinishRead still releases them, every
// victim's old handle is stale at the allocator, a late reader of a victim
// finds nothing, and no byte is lost.
func TestProductionReusedVictimBlocksLeaveOldHandlesStale(t *testing.T) {
	e := prodEnv(t, l1.Config{EvictOnDemand: true, Placement: allocator.Scattered, ReadTTL: l1.NoExpiry})
	old := e.put(t, keys(0, prodN), prodObject)
	held := keys(0, 16)
	leases, n, err := e.m.AppendReadPrefix(nil, held, 1)
	require.NoError(t, err)
	require.Equal(t, 16, n)

	fresh := keys(prodN, prodN-16)
	rs := e.reserve(t, fresh, prodObject)
	require.Equal(t, repeat(l1.OK, prodN-16), statuses(rs))
	assert.Equal(t, int64(prodPool), e.used(), "the pool stays full: every victim's block went to a new object")

	victims := map[int64]allocator.Block{}
	for _, r := range old[16:] {
		victims[r.Block.Offset] = r.Block
	}
	for i, r := range rs {
		v, ok := victims[r.Block.Offset]
		require.True(t, ok, "key %d got block %+v, not a victim's", fresh[i], r.Block)
		assert.Equal(t, v.Size, r.Block.Size)
		assert.NotEqual(t, v.Gen, r.Block.Gen, "a reissued block has a new generation")
		delete(victims, r.Block.Offset)
	}
	assert.Empty(t, victims, "each victim's block went to exactly one new object")

	// The old handles are stale: the allocator refuses them and frees nothing.
	err = e.a.Free(old[16].Block)
	require.ErrorIs(t, err, allocator.ErrInvalidBlock)
	assert.Equal(t, int64(prodPool), e.used())

	// The reader's objects kept their blocks, and its late release works.
	rr := e.unsafeRead(held)
	for i := range held {
		assert.Equal(t, old[i].Block, rr[i].Block)
	}
	st, err := e.m.FinishRead(held, leases, 1)
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, 16), st)

	// A victim's key is gone: a prefix read stops at it, a late release finds nothing.
	ls, n, err := e.m.AppendReadPrefix(nil, keys(16, 2), 1)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Empty(t, ls)
	st, err = e.m.FinishRead(keys(16, 1), []l1.Lease{leases[0]}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.KeyNotExist}, st)
}

// Missing keys past the room get no placeholder (room.go), at production
// size and with two actors on one allocator: the manager holds 5000
// objects and another user of the allocator 600 blocks, so the room says
// 760 (it cannot see the other user's blocks) while 160 fit. A batch of
// 1000 new keys, each listed twice, grants the first 160 in one allocator
// call, answers the other 840 OutOfMemory
// at their first occurrence and every repeat KeyNotWritable, and leaves
// no record behind for a refused key. The other user then frees late;
// with no room left at all, a batch makes no allocator call.
func TestProductionPrefixPastTheRoom(t *testing.T) {
	e := prodEnv(t, l1.Config{WriteTTL: time.Minute})
	e.put(t, keys(0, 5000), prodObject)
	other, err := e.a.AllocateBatch(prodObject, 600, allocator.Scattered)
	require.NoError(t, err)
	fit := prodN - 5000 - 600
	fresh := keys(10_000, 1000)
	var ks []int
	for _, k := range fresh {
		ks = append(ks, k, k)
	}
	before := e.m.Stats()
	rs := e.reserve(t, ks, prodObject)
	for i, r := range rs {
		j := i / 2
		switch {
		case i%2 == 1:
			require.Equal(t, l1.KeyNotWritable, r.Status, "repeat of key %d", fresh[j])
		case j < fit:
			require.Equal(t, l1.OK, r.Status, "key %d", fresh[j])
		default:
			require.Equal(t, l1.OutOfMemory, r.Status, "key %d", fresh[j])
		}
	}
	st := e.m.Stats()
	assert.Equal(t, uint64(1), st.AllocCalls-before.AllocCalls)
	assert.Equal(t, uint64(1000-fit), st.OOMKeys-before.OOMKeys)
	assert.Equal(t, uint64(1), st.PartialGrants-before.PartialGrants)
	assert.Equal(t, 5000+fit, e.m.Len(), "a refused key holds no record")
	require.Equal(t, repeat(l1.OK, fit), e.finish(fresh[:fit]))

	// The other user frees its blocks late: the refused keys now fit.
	require.NoError(t, e.a.Free(other...))
	rs = e.reserve(t, fresh[fit:fit+600], prodObject)
	require.Equal(t, repeat(l1.OK, 600), statuses(rs))
	require.Equal(t, repeat(l1.OK, 600), e.finish(fresh[fit:fit+600]))

	// The manager's objects fill the allocator: no room, no call.
	require.Equal(t, int64(prodPool), e.used())
	before = e.m.Stats()
	last := append(fresh[fit+600:], fresh[fit+600])
	rs = e.reserve(t, last, prodObject)
	want := repeat(l1.OutOfMemory, len(last))
	want[len(want)-1] = l1.KeyNotWritable
	require.Equal(t, want, statuses(rs))
	st = e.m.Stats()
	assert.Zero(t, st.AllocCalls-before.AllocCalls)
	assert.Equal(t, uint64(len(last)-1), st.OOMKeys-before.OOMKeys)
	assert.Equal(t, uint64(1), st.FailedReservations-before.FailedReservations)
	assert.Equal(t, prodN, e.m.Len())
	require.NoError(t, e.a.Verify())
}

// stamp writes v into the first and the last 8 bytes of b's memory: all a
// production-size test writes of an 8 MiB object, so that a pool of
// 45 GiB backs two pages per object it stamps.
func (e *env) stamp(b allocator.Block, v uint64) {
	m := e.a.Bytes(b)
	binary.LittleEndian.PutUint64(m, v)
	binary.LittleEndian.PutUint64(m[len(m)-8:], v)
}

// stamped reports whether b's memory holds v at both ends.
func (e *env) stamped(b allocator.Block, v uint64) bool {
	m := e.a.Bytes(b)
	return binary.LittleEndian.Uint64(m) == v && binary.LittleEndian.Uint64(m[len(m)-8:]) == v
}

// The quarantine at production size: in a full 45 GiB pool of 8 MiB
// objects, a stuck writer's 1000 writes lapse while it keeps writing; a
// writer of a whole pool's worth of new keys evicts every finished object
// on demand (Scattered placement: their blocks reissued in place) and is
// granted exactly the evictable memory, never a quarantined block, so the
// stuck writer's stamps survive; the stuck writer's disconnect (AbortWrite
// of its leases) frees its 8000 MiB at once, and the refused keys then fit.
// Used == Held + QuarantinedBytes at every step.
func TestProductionQuarantineUnderPressure(t *testing.T) {
	e := prodEnv(t, l1.Config{QuarantineLapsedWrites: true, EvictOnDemand: true, Placement: allocator.Scattered, WriteTTL: time.Minute})
	const stuckN = 1000
	stuck := e.reserve(t, keys(0, stuckN), prodObject)
	require.Equal(t, repeat(l1.OK, stuckN), statuses(stuck))
	e.put(t, keys(stuckN, prodN-stuckN), prodObject)
	require.Equal(t, int64(prodPool), e.used(), "the pool is full")
	e.clk.Advance(time.Minute)
	require.Equal(t, prodN-stuckN, e.m.Len(), "the stuck writes lapsed")
	e.checkAccounting(t, stuckN, stuckN*prodObject)
	for i, r := range stuck { // the stuck writer is alive and still writing
		e.stamp(r.Block, uint64(i)+1)
	}

	fresh := keys(prodN, prodN)
	rs := e.reserve(t, fresh, prodObject)
	granted := prodN - stuckN
	assert.Equal(t, append(repeat(l1.OK, granted), repeat(l1.OutOfMemory, stuckN)...), statuses(rs))
	assert.Equal(t, uint64(granted), e.m.Stats().OnDemandEvictions)
	quarantined := map[int64]bool{}
	for _, r := range stuck {
		quarantined[r.Block.Offset] = true
	}
	for i, r := range rs[:granted] {
		require.False(t, quarantined[r.Block.Offset], "key %d got a quarantined block %+v", fresh[i], r.Block)
		e.stamp(r.Block, ^uint64(i))
	}
	for i, r := range stuck {
		require.True(t, e.stamped(r.Block, uint64(i)+1), "the stuck writer's block %+v was overwritten", r.Block)
	}
	e.checkAccounting(t, stuckN, stuckN*prodObject)
	assert.Equal(t, int64(prodPool), e.used())

	// The stuck writer's connection ends: the owner aborts its leases.
	sts, err := e.m.AbortWrite(keys(0, stuckN), leasesOf(stuck))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, stuckN), sts)
	e.checkAccounting(t, 0, 0)
	assert.Equal(t, int64(prodPool-stuckN*prodObject), e.used())
	rest := e.reserve(t, fresh[granted:], prodObject)
	assert.Equal(t, repeat(l1.OK, stuckN), statuses(rest))
	for i, r := range rs[:granted] {
		require.True(t, e.stamped(r.Block, ^uint64(i)), "a granted block %+v was overwritten", r.Block)
	}
	require.NoError(t, e.m.Close())
	assert.Zero(t, e.used())
}

// A production pool, 45 GiB of 8 MiB objects, every one write-reserved
// and then deleted with force: no block goes to the next writer until the
// first writers let go. The second writers get OutOfMemory, then, once
// the first have aborted, the whole pool.
func TestForcedDeleteFullBigPoolNotReissued(t *testing.T) {
	const size, capacity = prodObject, prodPool
	a := newBigAlloc(t, capacity)
	m, err := l1.New[int](a, l1.Config{QuarantineLapsedWrites: true, WriteTTL: time.Minute})
	require.NoError(t, err)
	n := int(capacity / size)
	ks := make([]int, n)
	for i := range ks {
		ks[i] = i
	}
	first, err := m.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	leases := make([]l1.Lease, n)
	for i, r := range first {
		require.Equal(t, l1.OK, r.Status)
		leases[i] = r.Lease
	}
	stamp := func(b allocator.Block, s string) { copy(a.Bytes(b)[b.Size-int64(len(s)):], s) }
	stamp(first[n-1].Block, "first")
	sts, err := m.Delete(ks, true)
	require.NoError(t, err)
	for _, s := range sts {
		require.Equal(t, l1.OK, s)
	}
	st := m.Stats()
	require.Zero(t, st.Objects)
	require.Equal(t, int64(capacity), st.QuarantinedBytes)
	require.Equal(t, st.Used, st.QuarantinedBytes)

	second, err := m.ReserveWrite(ks[:1], nil, size, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, l1.OutOfMemory, second[0].Status, "a held block was reissued")

	// The first writers abort, in one call; the second get the pool.
	sts, err = m.AbortWrite(ks, leases)
	require.NoError(t, err)
	for _, s := range sts {
		require.Equal(t, l1.OK, s)
	}
	require.Zero(t, m.Stats().QuarantinedBytes)
	second, err = m.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	for _, r := range second {
		require.Equal(t, l1.OK, r.Status)
	}
	require.NoError(t, m.Close())
	require.Zero(t, a.Stats().Used)
}
