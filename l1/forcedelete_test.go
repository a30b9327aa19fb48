package l1_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Forced deletes under live locks (see quarantine.go): the key goes at
// once, the block waits for the lock's holders.

// forceConfigs are the two lapse policies a forced delete meets: an
// in-process manager and a node pool's.
var forceConfigs = map[string]l1.Config{
	"default":    {WriteTTL: time.Minute, ReadTTL: time.Minute},
	"quarantine": {QuarantineLapsedWrites: true, WriteTTL: time.Minute, ReadTTL: time.Minute},
}

// Two actors on one key: A holds it write-reserved and is still writing
// when C deletes it with force; B reserves the key again and writes. B
// gets a block of its own, A's late bytes and late call reach neither B's
// object nor a reader, and A's call frees A's block. Before the rule, B
// got A's block back and A's bytes landed in B's finished object.
func TestForcedDeleteOfWriteHoldsBlockUntilWriterLetsGo(t *testing.T) {
	for name, cfg := range forceConfigs {
		for _, late := range []string{"FinishWrite", "AbortWrite", "FinishWriteAndReserveRead"} {
			t.Run(name+"/"+late, func(t *testing.T) {
				e := newEnv(t, 64*KiB, cfg)
				a := e.reserve(t, []int{1}, obj)[0]
				require.Equal(t, l1.OK, a.Status)
				e.rec.take()

				// C deletes with force: the key goes, the block stays.
				assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, true))
				assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseDeleted, Keys: []int{1}}}, e.rec.take())
				assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
				_, ok := e.m.State(1)
				assert.False(t, ok)
				e.checkAccounting(t, 1, obj)

				// B reserves the key again: a block of its own.
				b := e.reserve(t, []int{1}, obj)[0]
				require.Equal(t, l1.OK, b.Status)
				assert.False(t, overlaps(a.Block, b.Block), "B got %+v, overlapping A's held %+v", b.Block, a.Block)
				copy(e.a.Bytes(b.Block), "B: the value")
				copy(e.a.Bytes(a.Block), "A: late bytes")

				// A's late call: nothing published, A's block freed.
				var got l1.Status
				want := l1.WriteDeleted
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
					assert.Zero(t, rs[0].Lease, "no read lock for a deleted write")
				}
				assert.Equal(t, want, got)
				e.checkAccounting(t, 0, 0)
				s := e.state(t, 1)
				assert.True(t, s.WriteLocked, "B's reservation stands")
				assert.Equal(t, b.Lease, s.WriteLease)

				// A second late call finds B's lock, not A's.
				sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{a.Lease})
				require.NoError(t, err)
				assert.Equal(t, []l1.Status{l1.StaleLease}, sts)

				// B finishes; a reader sees B's bytes in B's block.
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
}

// A read-locked object deleted with force: its readers' block stays, with
// the bytes they are reading, while another writer writes the key again;
// each reader's FinishRead answers OK and the last frees the block.
// Before the rule, the block went to the next writer under the readers,
// and their FinishRead answered KeyNotExist.
func TestForcedDeleteOfReadHoldsBlockUntilLastReader(t *testing.T) {
	for name, cfg := range forceConfigs {
		for _, temp := range []bool{false, true} {
			sub := name + "/ordinary"
			if temp {
				sub = name + "/temporary"
			}
			t.Run(sub, func(t *testing.T) {
				e := newEnv(t, 64*KiB, cfg)
				var w l1.Result
				if temp {
					rs, err := e.m.ReserveWrite([]int{1}, []bool{true}, obj, l1.ModeAll)
					require.NoError(t, err)
					w = rs[0]
				} else {
					w = e.reserve(t, []int{1}, obj)[0]
				}
				copy(e.a.Bytes(w.Block), "old value")
				require.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
				r1 := e.read(t, []int{1}, 2)[0] // two holds
				r2 := e.read(t, []int{1}, 1)[0] // one more, same epoch
				require.Equal(t, l1.OK, r1.Status)
				require.Equal(t, r1.Lease, r2.Lease)

				assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, true))
				assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
				e.checkAccounting(t, 1, obj)

				// B writes the key again, under a block of its own.
				b := e.reserve(t, []int{1}, obj)[0]
				require.Equal(t, l1.OK, b.Status)
				assert.False(t, overlaps(r1.Block, b.Block), "B got %+v, the readers' block %+v", b.Block, r1.Block)
				copy(e.a.Bytes(b.Block), "new value")
				require.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
				assert.Equal(t, "old value", string(e.a.Bytes(r1.Block)[:9]), "the readers' bytes are theirs")

				// The readers let go: OK each, the last frees the block.
				sts, err := e.m.FinishRead([]int{1}, []l1.Lease{r1.Lease}, 2)
				require.NoError(t, err)
				assert.Equal(t, []l1.Status{l1.OK}, sts)
				e.checkAccounting(t, 1, obj)
				sts, err = e.m.FinishRead([]int{1}, []l1.Lease{r2.Lease}, 1)
				require.NoError(t, err)
				assert.Equal(t, []l1.Status{l1.OK}, sts)
				e.checkAccounting(t, 0, 0)

				// Their lease is spent: a further release is not theirs.
				sts, err = e.m.FinishRead([]int{1}, []l1.Lease{r1.Lease}, 1)
				require.NoError(t, err)
				assert.Equal(t, []l1.Status{l1.KeyInWrongState}, sts)
				r := e.read(t, []int{1}, 1)[0]
				require.Equal(t, l1.OK, r.Status)
				assert.Equal(t, "new value", string(e.a.Bytes(r.Block)[:9]))
			})
		}
	}
}

// A held lease ends with its lock's lapse too: the block is freed then
// (for a write, only without QuarantineLapsedWrites, under which a lapsed
// write waits for its owner), and a later finishing call is a lapsed
// holder's.
func TestForcedDeleteHoldEndsAtLapse(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		e := newEnv(t, 64*KiB, forceConfigs["default"])
		a := e.reserve(t, []int{1}, obj)[0]
		e.clk.Advance(time.Minute / 2)
		e.del([]int{1}, true)
		e.clk.Advance(time.Minute/2 - 1)
		e.m.Len() // a call: it sweeps (Stats does not)
		e.checkAccounting(t, 1, obj)
		e.clk.Advance(1)
		e.m.Len()
		e.checkAccounting(t, 0, 0)
		sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{a.Lease})
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, sts)
	})
	t.Run("write_quarantined", func(t *testing.T) {
		e := newEnv(t, 64*KiB, forceConfigs["quarantine"])
		a := e.reserve(t, []int{1}, obj)[0]
		e.del([]int{1}, true)
		e.clk.Advance(time.Hour)
		e.m.Len()
		e.checkAccounting(t, 1, obj)
		assert.Zero(t, e.m.Stats().Quarantines, "a delete is not a lapse")
		sts, err := e.m.FinishWrite([]int{1}, []l1.Lease{a.Lease})
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.WriteDeleted}, sts)
		e.checkAccounting(t, 0, 0)
	})
	t.Run("read", func(t *testing.T) {
		e := newEnv(t, 64*KiB, forceConfigs["quarantine"])
		e.put(t, []int{1, 2}, obj)
		r := e.read(t, []int{1, 2}, 1)
		e.del([]int{1, 2}, true)
		e.checkAccounting(t, 2, 2*obj)
		sts, err := e.m.FinishRead([]int{2}, []l1.Lease{r[1].Lease}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.OK}, sts)
		e.checkAccounting(t, 1, obj)
		e.clk.Advance(time.Minute)
		e.m.Len()
		e.checkAccounting(t, 0, 0)
		sts, err = e.m.FinishRead([]int{1}, []l1.Lease{r[0].Lease}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, sts)
	})
}

// Clear with force is a forced delete of every key, and Close frees what
// the holders still hold.
func TestForcedClearHoldsLockedBlocks(t *testing.T) {
	e := newEnv(t, 64*KiB, forceConfigs["quarantine"])
	e.put(t, []int{1, 2}, obj)
	r := e.read(t, []int{1}, 1)[0]
	w := e.reserve(t, []int{3}, obj)[0]
	assert.Equal(t, 3, e.m.Clear(true))
	e.checkAccounting(t, 2, 2*obj) // key 2 was unlocked: freed at once
	sts, err := e.m.FinishRead([]int{1}, []l1.Lease{r.Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, sts)
	e.checkAccounting(t, 1, obj)
	require.NoError(t, e.m.Close())
	assert.Zero(t, e.used(), "Close frees the held write")
	_, err = e.m.AbortWrite([]int{3}, []l1.Lease{w.Lease})
	assert.ErrorIs(t, err, l1.ErrClosed)
}

// A lease held for a deleted key is its holder's with that key and that
// kind of lock only: a write lease is no read lease, nor the reverse, and
// presented with another key it frees nothing.
func TestForcedDeleteHoldNeedsItsKeyAndKind(t *testing.T) {
	e := newEnv(t, 64*KiB, forceConfigs["quarantine"])
	e.put(t, []int{1}, obj)
	r := e.read(t, []int{1}, 1)[0]
	w := e.reserve(t, []int{2}, obj)[0]
	e.del([]int{1, 2}, true)
	sts, err := e.m.FinishRead([]int{2, 1}, []l1.Lease{w.Lease, r.Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.KeyNotExist, l1.OK}, sts, "the write lease is no read hold")
	e.checkAccounting(t, 1, obj)
	sts, err = e.m.AbortWrite([]int{1}, []l1.Lease{w.Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.KeyNotExist}, sts, "another key's hold")
	e.checkAccounting(t, 1, obj)
	sts, err = e.m.AbortWrite([]int{2}, []l1.Lease{w.Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, sts)
	e.checkAccounting(t, 0, 0)
}

// A Snapshot reads the same, to the bit, across calls that change
// nothing: a rejected ReserveWrite leaves every lock, and so every
// reported expiry, as it was. The manager reads the real clock here,
// whose readings carry a wall and a monotonic time that step differently:
// an expiry computed from a fresh reading moved by a few nanoseconds.
func TestSnapshotUnchangedByRejectedReserveWrite(t *testing.T) {
	a := newAlloc(t, 64*KiB, 4*KiB)
	m, err := l1.New[int](a, l1.Config{WriteTTL: time.Hour, ReadTTL: time.Hour})
	require.NoError(t, err)
	_, err = m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	s2, ok := m.State(2)
	require.True(t, ok)
	_, err = m.FinishWrite([]int{2}, []l1.Lease{s2.WriteLease})
	require.NoError(t, err)
	_, err = m.ReserveRead([]int{2}, 1)
	require.NoError(t, err)
	for i := range 200 {
		before := m.Snapshot()
		rs, err := m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeNew)
		require.NoError(t, err)
		require.Equal(t, []l1.Status{l1.KeyNotWritable, l1.KeyNotWritable}, statuses(rs))
		_, err = m.ReserveWrite([]int{1}, nil, 0, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		after := m.Snapshot()
		require.Equal(t, before, after, "round %d: a rejected ReserveWrite moved the snapshot", i)
	}
}

// The held leases at the TTLs' edges and under a jumping clock: a hold
// whose lock never lapses (NoExpiry) outlives any forward jump, one of
// 1 ns lapses at the next nanosecond, and a jump back lapses nothing.
func TestForcedDeleteHoldAtTTLEdges(t *testing.T) {
	t.Run("no_expiry", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry})
		e.put(t, []int{1}, obj)
		r := e.read(t, []int{1}, 1)[0]
		w := e.reserve(t, []int{2}, obj)[0]
		e.del([]int{1, 2}, true)
		e.clk.Advance(time.Duration(math.MaxInt64))
		e.m.Len()
		e.checkAccounting(t, 2, 2*obj)
		sts, err := e.m.FinishRead([]int{1}, []l1.Lease{r.Lease}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.OK}, sts)
		sts, err = e.m.FinishWrite([]int{2}, []l1.Lease{w.Lease})
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.WriteDeleted}, sts)
		e.checkAccounting(t, 0, 0)
	})
	t.Run("one_ns", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 1, ReadTTL: 1})
		w := e.reserve(t, []int{1}, obj)[0]
		e.del([]int{1}, true)
		e.checkAccounting(t, 1, obj)
		e.clk.Advance(-time.Hour) // back: nothing lapses
		e.m.Len()
		e.checkAccounting(t, 1, obj)
		e.clk.Advance(1)
		e.m.Len()
		e.checkAccounting(t, 0, 0)
		sts, err := e.m.AbortWrite([]int{1}, []l1.Lease{w.Lease})
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, sts)
	})
}

// Writers, readers and a deleter on four keys at once: the deleter
// force-deletes keys under their holders, who go on writing and reading
// until their finishing calls answer. Every writer stamps its lease into
// its block until it finishes; every reader reads its block's stamp at the
// start and the end of its hold. A block reissued under a live lease shows
// as a stamp that changed under a reader, a stamp no finished write put
// there, a finish_read that is not OK, or (under -race, the arena being Go
// memory) a data race between the two holders.
func TestForcedDeleteUnderConcurrentHolders(t *testing.T) {
	const keySpace, rounds = 4, 300
	e := newEnv(t, 16*obj, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry})
	var mu sync.Mutex
	published := map[uint64]bool{} // write leases whose FinishWrite answered OK
	stamp := func(b allocator.Block, v uint64) { binary.LittleEndian.PutUint64(e.a.Bytes(b), v) }
	read := func(b allocator.Block) uint64 { return binary.LittleEndian.Uint64(e.a.Bytes(b)) }
	var wg sync.WaitGroup
	var stop atomic.Bool
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				k := rng.IntN(keySpace)
				rs, err := e.m.ReserveWrite([]int{k}, nil, obj, l1.ModeAll)
				if !assert.NoError(t, err) || rs[0].Status != l1.OK {
					continue
				}
				for range 3 {
					stamp(rs[0].Block, uint64(rs[0].Lease))
					runtime.Gosched()
				}
				if rng.IntN(4) == 0 {
					sts, err := e.m.AbortWrite([]int{k}, []l1.Lease{rs[0].Lease})
					assert.NoError(t, err)
					assert.Equal(t, l1.OK, sts[0], "an abort of a live or deleted write")
					continue
				}
				sts, err := e.m.FinishWrite([]int{k}, []l1.Lease{rs[0].Lease})
				assert.NoError(t, err)
				switch sts[0] {
				case l1.OK:
					mu.Lock()
					published[uint64(rs[0].Lease)] = true
					mu.Unlock()
				case l1.WriteDeleted:
				default:
					t.Errorf("FinishWrite of a write reserved with no TTL: %v", sts[0])
				}
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for range rounds {
				k := rng.IntN(keySpace)
				rs, err := e.m.ReserveRead([]int{k}, 1)
				if !assert.NoError(t, err) || rs[0].Status != l1.OK {
					continue
				}
				first := read(rs[0].Block)
				runtime.Gosched()
				last := read(rs[0].Block)
				sts, err := e.m.FinishRead([]int{k}, []l1.Lease{rs[0].Lease}, 1)
				assert.NoError(t, err)
				assert.Equal(t, l1.OK, sts[0], "FinishRead of a live or deleted read")
				assert.Equal(t, first, last, "the block changed under its reader")
				ok := false
				for start := time.Now(); !ok && time.Since(start) < 5*time.Second; runtime.Gosched() {
					mu.Lock()
					ok = published[first]
					mu.Unlock()
				}
				assert.True(t, ok, "a reader read stamp %d, which no finished write of key %d put there", first, k)
			}
		}()
	}
	holdersDone := make(chan struct{})
	go func() { wg.Wait(); close(holdersDone) }()
	deleterDone := make(chan struct{})
	go func() {
		defer close(deleterDone)
		rng := rand.New(rand.NewPCG(9, 3))
		for !stop.Load() {
			_, err := e.m.Delete([]int{rng.IntN(keySpace)}, true)
			assert.NoError(t, err)
			runtime.Gosched()
		}
	}()
	for running := true; running; {
		select {
		case <-holdersDone:
			running = false
		case <-time.After(time.Millisecond):
		}
		if st := e.m.Stats(); st.Used != st.Held+st.QuarantinedBytes {
			t.Errorf("used %d, held %d + quarantined %d", st.Used, st.Held, st.QuarantinedBytes)
		}
	}
	stop.Store(true)
	<-deleterDone
	e.checkAccounting(t, 0, 0) // every holder let go: nothing held
	require.NoError(t, e.m.Close())
	assert.Zero(t, e.used())
	assert.NotEmpty(t, published)
}
