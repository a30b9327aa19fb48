package l1_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Quarantine of lapsed writes: see quarantine.go.

// quarantineCfg is the configuration of a node pool's manager: lapsed
// writes quarantined, a write TTL of a minute.
var quarantineCfg = l1.Config{QuarantineLapsedWrites: true, WriteTTL: time.Minute}

// checkAccounting asserts the quarantine's invariant: the allocator's used
// bytes are the live objects' plus the quarantined ones, and Stats and the
// allocator agree on it.
func (e *env) checkAccounting(t *testing.T, objects int, bytes int64) {
	t.Helper()
	st := e.m.Stats()
	assert.Equal(t, objects, st.QuarantinedObjects, "quarantined objects")
	assert.Equal(t, bytes, st.QuarantinedBytes, "quarantined bytes")
	assert.Equal(t, st.Used, st.Held+st.QuarantinedBytes, "used = live objects + quarantined")
	assert.Equal(t, e.used(), st.Used)
	require.NoError(t, e.a.Verify())
}

// overlaps reports whether two blocks share a byte.
func overlaps(a, b allocator.Block) bool { return a.Offset < b.End() && b.Offset < a.End() }

// Two actors on one key, one late: A's write lapses while A is still
// writing; B writes the key again under a block of its own; A's bytes
// never reach B's block or a reader, and A's late finish frees A's block
// and leaves B's reservation alone. Without the quarantine (the default),
// B gets A's block back and A's late writes land in B's object.
func TestQuarantineTwoWritersOneKey(t *testing.T) {
	for _, late := range []string{"FinishWrite", "AbortWrite", "FinishWriteAndReserveRead"} {
		t.Run(late, func(t *testing.T) {
			e := newEnv(t, 64*KiB, quarantineCfg)
			a := e.reserve(t, []int{1}, obj)[0]
			require.Equal(t, l1.OK, a.Status)
			e.rec.take()
			e.clk.Advance(time.Minute)

			// The lapse: the key is gone, unreadable, its block quarantined.
			assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
			assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseQuarantined, Keys: []int{1}}}, e.rec.take())
			e.checkAccounting(t, 1, obj)
			st := e.m.Stats()
			assert.Equal(t, uint64(1), st.Quarantines)
			assert.Equal(t, uint64(1), st.Expired)
			assert.Zero(t, st.Objects)

			// B writes the key again: a block of its own.
			b := e.reserve(t, []int{1}, obj)[0]
			require.Equal(t, l1.OK, b.Status)
			assert.False(t, overlaps(a.Block, b.Block), "B got %+v, overlapping A's quarantined %+v", b.Block, a.Block)
			e.checkAccounting(t, 1, obj)

			// A, still alive, keeps writing its buffer; B writes its own.
			copy(e.a.Bytes(a.Block), "A: late bytes")
			copy(e.a.Bytes(b.Block), "B: the value")

			// A's late call frees A's block and leaves B alone.
			var got l1.Status
			want := l1.WriteLapsed
			switch late {
			case "FinishWrite":
				sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{a.Lease})
				require.NoError(t, err)
				got = sts[0]
			case "AbortWrite":
				sts, err := e.m.AbortWrite([]int{1}, []l1.Lease{a.Lease})
				require.NoError(t, err)
				got, want = sts[0], l1.OK
			case "FinishWriteAndReserveRead":
				rs, err := e.m.FinishWriteAndReserveRead([]int{1}, []l1.Lease{a.Lease}, 1)
				require.NoError(t, err)
				got = rs[0].Status
				assert.Zero(t, rs[0].Lease, "no read lock for a lapsed write")
			}
			assert.Equal(t, want, got)
			e.checkAccounting(t, 0, 0)
			s := e.state(t, 1)
			assert.True(t, s.WriteLocked, "B's reservation stands")
			assert.Equal(t, b.Lease, s.WriteLease)

			// A second late call finds nothing of A's: B's lock is not A's.
			sts, err := e.m.AbortWrite([]int{1}, []l1.Lease{a.Lease})
			require.NoError(t, err)
			assert.Equal(t, []l1.Status{l1.StaleLease}, sts)

			// B finishes; readers see B's bytes in B's block.
			sts, err = e.m.FinishWrite([]int{1}, []l1.Lease{b.Lease})
			require.NoError(t, err)
			require.Equal(t, []l1.Status{l1.OK}, sts)
			r := e.read(t, []int{1}, 1)[0]
			require.Equal(t, l1.OK, r.Status)
			assert.Equal(t, b.Block, r.Block)
			assert.Equal(t, "B: the value", string(e.a.Bytes(r.Block)[:12]))
		})
	}
}

// A full pool of lapsed writes is not handed to other writers: they get
// OutOfMemory until the owners let go, and the room accounts for the
// quarantine (no allocator call is made for a batch that cannot fit).
func TestQuarantineFullPoolIsNotReissued(t *testing.T) {
	e := newEnv(t, 64*KiB, quarantineCfg)
	ks := keys(0, 16)
	a := e.reserve(t, ks, obj)
	require.Equal(t, repeat(l1.OK, 16), statuses(a))
	e.clk.Advance(time.Minute)
	before := e.m.Stats()
	rs := e.reserve(t, keys(100, 4), obj)
	assert.Equal(t, repeat(l1.OutOfMemory, 4), statuses(rs))
	assert.Equal(t, before.AllocCalls, e.m.Stats().AllocCalls, "the room knows the quarantine: no call")
	e.checkAccounting(t, 16, 16*obj)

	// The owners abort half: those blocks, and only those, serve again.
	sts, err := e.m.AbortWrite(ks[:8], leasesOf(a[:8]))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, 8), sts)
	e.checkAccounting(t, 8, 8*obj)
	rs = e.reserve(t, keys(100, 10), obj)
	assert.Equal(t, append(repeat(l1.OK, 8), l1.OutOfMemory, l1.OutOfMemory), statuses(rs))
	for _, r := range rs[:8] {
		for _, q := range a[8:] {
			assert.False(t, overlaps(r.Block, q.Block), "%+v reissued a quarantined block %+v", r.Block, q.Block)
		}
	}
	e.checkAccounting(t, 8, 8*obj)
}

// Eviction never takes a quarantined block, on demand or by EvictTo, under
// every placement and policy (Scattered placement reissues victims' blocks
// in place).
func TestQuarantineNeverEvicted(t *testing.T) {
	for _, p := range allocator.Placements {
		for _, pol := range l1.EvictionPolicies {
			t.Run(p.String()+"/"+pol.String(), func(t *testing.T) {
				cfg := quarantineCfg
				cfg.EvictOnDemand, cfg.Placement, cfg.Eviction = true, p, pol
				e := newEnv(t, 64*KiB, cfg)
				stuck := e.reserve(t, keys(0, 8), obj)
				e.clk.Advance(30 * time.Second)
				e.put(t, keys(8, 8), obj) // evictable
				e.clk.Advance(30 * time.Second)
				assert.Equal(t, 8, e.m.Len(), "the lapse takes effect at the next call")
				e.checkAccounting(t, 8, 8*obj)

				// A batch of 12 under pressure: the 8 evictable objects go,
				// the 8 quarantined blocks stay; 8 are granted.
				rs := e.reserve(t, keys(100, 12), obj)
				assert.Equal(t, append(repeat(l1.OK, 8), repeat(l1.OutOfMemory, 4)...), statuses(rs))
				for _, r := range rs[:8] {
					for _, q := range stuck {
						assert.False(t, overlaps(r.Block, q.Block), "%+v took a quarantined block %+v", r.Block, q.Block)
					}
				}
				assert.Equal(t, uint64(8), e.m.Stats().OnDemandEvictions)
				e.checkAccounting(t, 8, 8*obj)

				require.Equal(t, repeat(l1.OK, 8), e.finish(keys(100, 8)))
				n, err := e.m.EvictTo(0)
				require.NoError(t, err)
				assert.Equal(t, 8, n)
				e.checkAccounting(t, 8, 8*obj)
				assert.Equal(t, 8*obj, e.used(), "only the quarantine is left")
			})
		}
	}
}

// Delete and Clear, even with force, name keys; a quarantined block
// belongs to none. Close frees it.
func TestQuarantineSurvivesDeleteAndClearFreedByClose(t *testing.T) {
	e := newEnv(t, 64*KiB, quarantineCfg)
	e.reserve(t, keys(0, 3), obj)
	e.clk.Advance(time.Minute)
	assert.Equal(t, repeat(l1.KeyNotExist, 3), e.del(keys(0, 3), true))
	assert.Zero(t, e.m.Clear(true))
	e.checkAccounting(t, 3, 3*obj)
	require.NoError(t, e.m.Close())
	assert.Zero(t, e.used(), "Close frees the quarantine")
	st := e.m.Stats()
	assert.Zero(t, st.QuarantinedObjects)
	assert.Zero(t, st.QuarantinedBytes)
	_, err := e.m.AbortWrite([]int{0}, []l1.Lease{1})
	assert.ErrorIs(t, err, l1.ErrClosed)
}

// A lease is its owner's with its key only: presented with another key it
// frees nothing.
func TestQuarantineLeaseNeedsItsKey(t *testing.T) {
	e := newEnv(t, 64*KiB, quarantineCfg)
	a := e.reserve(t, []int{1, 2}, obj)
	e.clk.Advance(time.Minute)
	sts, err := e.m.AbortWrite([]int{2, 1}, leasesOf(a))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.KeyNotExist, 2), sts)
	e.checkAccounting(t, 2, 2*obj)
	sts, err = e.m.FinishWrite([]int{1, 2}, leasesOf(a))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.WriteLapsed, 2), sts)
	e.checkAccounting(t, 0, 0)
}

// A lapsed rewrite of a finished object: the writer may have half
// overwritten the old value, so the old value goes too, and its block is
// quarantined as any other.
func TestQuarantineLapsedRewrite(t *testing.T) {
	e := newEnv(t, 64*KiB, quarantineCfg)
	e.put(t, []int{1}, obj)
	rw := e.reserve(t, []int{1}, obj)[0]
	require.Equal(t, l1.OK, rw.Status)
	e.clk.Advance(time.Minute)
	assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
	e.checkAccounting(t, 1, obj)
	sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{rw.Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.WriteLapsed}, sts)
	e.checkAccounting(t, 0, 0)
}

// TTL edges: 1 ns lapses at the next tick; NoExpiry never lapses, whatever
// the clock does; a forward jump of the int64 range lapses every finite
// lock at once, and the quarantine holds them all.
func TestQuarantineTTLEdges(t *testing.T) {
	t.Run("1ns", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{QuarantineLapsedWrites: true, WriteTTL: 1})
		a := e.reserve(t, keys(0, 2), obj)
		assert.Equal(t, 2, e.m.Stats().WriteLocked, "no tick yet")
		e.clk.Advance(1)
		assert.Zero(t, e.m.Len())
		e.checkAccounting(t, 2, 2*obj)
		sts, err := e.m.FinishWrite(keys(0, 2), leasesOf(a))
		require.NoError(t, err)
		assert.Equal(t, repeat(l1.WriteLapsed, 2), sts)
		e.checkAccounting(t, 0, 0)
	})
	t.Run("NoExpiry", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{QuarantineLapsedWrites: true, WriteTTL: l1.NoExpiry})
		a := e.reserve(t, keys(0, 2), obj)
		e.clk.Advance(math.MaxInt64)
		e.m.Len()
		e.clk.Advance(math.MaxInt64)
		e.checkAccounting(t, 0, 0)
		sts, err := e.m.FinishWrite(keys(0, 2), leasesOf(a))
		require.NoError(t, err)
		assert.Equal(t, repeat(l1.OK, 2), sts)
	})
	t.Run("jump", func(t *testing.T) {
		e := newEnv(t, 64*KiB, quarantineCfg)
		a := e.reserve(t, keys(0, 4), obj)
		e.clk.Advance(-1 << 62) // back: nothing lapses
		assert.Equal(t, 4, e.m.Len())
		e.clk.Advance(math.MaxInt64) // forward by the int64 range
		assert.Zero(t, e.m.Len())
		e.checkAccounting(t, 4, 4*obj)
		// The manager's time stops short of the end: new locks never lapse.
		b := e.reserve(t, keys(10, 4), obj)
		require.Equal(t, repeat(l1.OK, 4), statuses(b))
		e.clk.Advance(math.MaxInt64)
		assert.Equal(t, 4, e.m.Stats().WriteLocked)
		sts, err := e.m.AbortWrite(keys(0, 4), leasesOf(a))
		require.NoError(t, err)
		assert.Equal(t, repeat(l1.OK, 4), sts)
		e.checkAccounting(t, 0, 0)
	})
}

// Without the option a lapsed write is reclaimed and its block freed at
// once, as before: the default is unchanged.
func TestQuarantineOffReclaims(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: time.Minute})
	a := e.reserve(t, []int{1}, obj)[0]
	e.clk.Advance(time.Minute)
	b := e.reserve(t, []int{1}, obj)[0]
	assert.Equal(t, a.Block.Offset, b.Block.Offset, "the block is reissued")
	e.checkAccounting(t, 0, 0)
	sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{a.Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, sts)
}

// Eight writers share eight keys under a one-second TTL and stall at
// random (each moves the clock), so writes lapse while their writers go on
// writing. Each writer stamps its block, stalls, and checks its stamp
// before it finishes: no other writer ever got its block. At the end each
// writer aborts every lease it got, as a node pool's owner does at a
// disconnect, and the quarantine is empty. Run it with -race.
func TestQuarantineConcurrentWriters(t *testing.T) {
	e := newEnv(t, 64*obj, l1.Config{QuarantineLapsedWrites: true, WriteTTL: time.Second})
	const writers, rounds = 8, 300
	var wg sync.WaitGroup
	var lapsed atomic.Int64
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var ks []int
			var ls []l1.Lease
			for i := range rounds {
				k := rng.IntN(8)
				rs, err := e.m.ReserveWrite([]int{k}, nil, obj, l1.ModeAll)
				if !assert.NoError(t, err) {
					return
				}
				r := rs[0]
				if r.Status != l1.OK {
					continue
				}
				ks, ls = append(ks, k), append(ls, r.Lease)
				stamp := uint64(w)<<32 | uint64(i)
				buf := e.a.Bytes(r.Block)
				binary.LittleEndian.PutUint64(buf, stamp)
				// A stall: up to 1.5 TTLs, so a writer's own stall lapses its write
				// about a third of the time whatever the interleaving.
				e.clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
				if !assert.Equal(t, stamp, binary.LittleEndian.Uint64(buf), "writer %d's block %+v was given to another writer", w, r.Block) {
					return
				}
				sts, err := e.m.FinishWrite([]int{k}, []l1.Lease{r.Lease})
				if !assert.NoError(t, err) {
					return
				}
				switch sts[0] {
				case l1.WriteLapsed:
					lapsed.Add(1)
				case l1.OK:
				default:
					assert.Fail(t, fmt.Sprintf("writer %d: FinishWrite of its own lease: %v", w, sts[0]))
				}
			}
			// The connection ends: every lease it got goes back.
			_, err := e.m.AbortWrite(ks, ls)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	t.Logf("%d of %d writes lapsed", lapsed.Load(), writers*rounds)
	assert.Positive(t, lapsed.Load(), "no write lapsed: the test proves nothing")
	e.checkAccounting(t, 0, 0)
	e.m.Clear(true)
	assert.Zero(t, e.used())
}
