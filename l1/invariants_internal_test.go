//go:build invariants

package l1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/invariants"
)

// invEnv is a manager in every state an object can be in, made by correct
// calls that every check passed: keys 1 to 4 finished and evictable, 5
// write-locked, 6 read-locked, 7 a temporary object read-locked, and a
// quarantined write of key 8. It is never closed: a mutant leaves it
// corrupt, and Close would only report the corruption again.
type invEnv struct {
	m          *Manager[int]
	clk        *testClock
	w5, r6, q8 Lease
}

const invObj = 4096

func newInvEnv(t *testing.T, p EvictionPolicy) *invEnv {
	t.Helper()
	r, err := hostmem.NewHeapRegion(64 * invObj)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: invObj})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	clk := &testClock{t: time.Unix(1_000_000, 0)}
	m, err := New[int](a, Config{Now: clk.Now, WriteTTL: time.Second, ReadTTL: time.Second,
		Eviction: p, QuarantineLapsedWrites: true})
	require.NoError(t, err)
	e := &invEnv{m: m, clk: clk}

	e.q8 = e.reserve(t, 8, false)
	clk.Advance(2 * time.Second)
	require.Zero(t, m.Len(), "8's write lapsed into the quarantine")
	for k := 1; k <= 4; k++ {
		e.finish(t, k, e.reserve(t, k, false))
	}
	e.w5 = e.reserve(t, 5, false)
	e.finish(t, 6, e.reserve(t, 6, false))
	e.r6 = e.read(t, 6)
	e.finish(t, 7, e.reserve(t, 7, true))
	e.read(t, 7)
	require.Equal(t, 7, m.Len())
	require.Equal(t, 1, m.Stats().QuarantinedObjects)
	return e
}

func (e *invEnv) reserve(t *testing.T, k int, temporary bool) Lease {
	t.Helper()
	rs, err := e.m.ReserveWrite([]int{k}, []bool{temporary}, invObj, ModeAll)
	require.NoError(t, err)
	require.Equal(t, OK, rs[0].Status)
	return rs[0].Lease
}

func (e *invEnv) finish(t *testing.T, k int, l Lease) {
	t.Helper()
	st, err := e.m.FinishWrite([]int{k}, []Lease{l})
	require.NoError(t, err)
	require.Equal(t, []Status{OK}, st)
}

func (e *invEnv) read(t *testing.T, k int) Lease {
	t.Helper()
	rs, err := e.m.ReserveRead([]int{k}, 1)
	require.NoError(t, err)
	require.Equal(t, OK, rs[0].Status)
	return rs[0].Lease
}

// obj returns k's record, which must be live.
func (e *invEnv) obj(k int) *object[int] {
	o, _ := e.m.objects.find(&k, e.m.objects.hash(&k))
	if o == nil {
		panic("no object for the key")
	}
	return o
}

// TestInvariantsCatchMutantsAtTheirCall: under the invariants tag a
// corruption made inside a call panics at that very call, naming it, with
// the invariant it broke. Each mutant corrupts one part of the state once,
// at the check of one call, after the correct calls of newInvEnv.
func TestInvariantsCatchMutantsAtTheirCall(t *testing.T) {
	mutants := []struct {
		name, op string
		policy   EvictionPolicy
		call     func(e *invEnv) error
		corrupt  func(e *invEnv)
		want     string // in the violation's message
	}{
		{"ReserveWrite miscounts held bytes", "ReserveWrite", EvictLRU,
			func(e *invEnv) error { _, err := e.m.ReserveWrite([]int{20}, nil, invObj, ModeAll); return err },
			func(e *invEnv) { e.m.held += invObj },
			"held bytes"},
		{"Delete keeps the held bytes of the object it removed", "Delete", EvictLRU,
			func(e *invEnv) error { _, err := e.m.Delete([]int{1}, false); return err },
			func(e *invEnv) { e.m.held += invObj },
			"held bytes"},
		{"FinishRead of a temporary object forgets to subtract its bytes", "FinishRead", EvictLRU,
			func(e *invEnv) error {
				_, err := e.m.FinishRead([]int{6}, []Lease{e.r6}, 1)
				return err
			},
			func(e *invEnv) { e.m.held-- },
			"held bytes"},
		{"EvictTo counts a victim's bytes twice", "EvictTo", EvictLRU,
			func(e *invEnv) error { _, err := e.m.EvictTo(0); return err },
			func(e *invEnv) { e.m.held -= invObj },
			"held bytes"},
		{"Close keeps held bytes", "Close", EvictLRU,
			func(e *invEnv) error { return e.m.Close() },
			func(e *invEnv) { e.m.held = invObj },
			"closed holding"},
		{"AbortWrite of a quarantined write keeps its bytes", "AbortWrite", EvictLRU,
			func(e *invEnv) error { _, err := e.m.AbortWrite([]int{8}, []Lease{e.q8}); return err },
			func(e *invEnv) { e.m.qbytes += invObj },
			"quarantined bytes"},
		{"FinishWrite leaves an evictable object out of the eviction set", "FinishWrite", EvictLRU,
			func(e *invEnv) error { _, err := e.m.FinishWrite([]int{5}, []Lease{e.w5}); return err },
			func(e *invEnv) { e.m.ev.leave(e.obj(5)) },
			"evictable true, in the eviction set false"},
		{"ReserveRead leaves a read-locked object evictable", "ReserveRead", EvictLRU,
			func(e *invEnv) error { _, err := e.m.ReserveRead([]int{1}, 1); return err },
			func(e *invEnv) { e.m.ev.enter(e.obj(6)) },
			"evictable false, in the eviction set true"},
		{"ReserveRead takes a read lock out of its expiry queue", "ReserveRead", EvictLRU,
			func(e *invEnv) error { _, err := e.m.ReserveRead([]int{2}, 1); return err },
			func(e *invEnv) { e.m.dequeueLocked(e.obj(2)) },
			"in expiry queue 0, its locks say 3"},
		{"Touch moves a lock's expiry without a new queue entry", "Touch", EvictLRU,
			func(e *invEnv) error { return e.m.Touch([]int{6}) },
			func(e *invEnv) { e.obj(6).read.expiry++ },
			"its lock at"},
		{"ReserveReadPrefix miscounts an expiry queue", "ReserveReadPrefix", EvictLRU,
			func(e *invEnv) error { _, _, err := e.m.ReserveReadPrefix([]int{1, 2}, 1); return err },
			func(e *invEnv) { e.m.queues[readQueue].live++ },
			"expiry queue 3 counts"},
		{"EvictTo leaves a lapsed lock", "EvictTo", EvictLRU,
			func(e *invEnv) error { _, err := e.m.EvictTo(1); return err },
			func(e *invEnv) { e.obj(6).read.expiry = e.m.now },
			"a lapsed lock"},
		{"ReserveWrite forgets a lease in the lease table", "ReserveWrite", EvictLRU,
			func(e *invEnv) error { _, err := e.m.ReserveWrite([]int{21}, nil, invObj, ModeAll); return err },
			func(e *invEnv) { e.m.leaseRecs[e.m.gen&(leaseTable-1)] = 0 },
			"the lease table forgot"},
		{"FinishWriteAndReserveRead gives a write lock a quarantined write's lease", "FinishWriteAndReserveRead", EvictLRU,
			func(e *invEnv) error {
				_, err := e.m.FinishWriteAndReserveRead([]int{3}, []Lease{1}, 1)
				return err
			},
			func(e *invEnv) {
				o := e.obj(5)
				o.wlease = e.q8
				e.m.leaseRecs[uint64(e.q8)&(leaseTable-1)] = o.idx
			},
			"is held twice"},
		{"UnsafeRead leaves a hint past the records", "UnsafeRead", EvictLRU,
			func(e *invEnv) error { _, err := e.m.UnsafeRead([]int{6}); return err },
			func(e *invEnv) { e.m.hints.recs[0] = 1 << 20 },
			"lookup hint 0 names record"},
		{"Delete drops a record from the index but not the store", "Delete", EvictLRU,
			func(e *invEnv) error { _, err := e.m.Delete([]int{99}, false); return err },
			func(e *invEnv) { e.m.objects.remove(e.obj(1)) },
			"neither in the index nor reusable"},
		{"State leaves a record whose hash is not its key's", "State", EvictLRU,
			func(e *invEnv) error { e.m.State(1); return nil },
			func(e *invEnv) {
				o := e.obj(1)
				for i, sl := range e.m.objects.slots {
					if sl.rec == o.idx {
						e.m.objects.slots[i].hash ^= 1
					}
				}
				o.hash ^= 1
			},
			"its key"},
		{"ReserveWrite takes a record and loses it", "ReserveWrite", EvictLRU,
			func(e *invEnv) error { _, err := e.m.ReserveWrite([]int{1}, nil, invObj, ModeNew); return err },
			func(e *invEnv) { e.m.objects.free.take() },
			"neither in the index nor reusable"},
		{"ReserveWriteChain hands out a block another object holds", "ReserveWriteChain", EvictLRU,
			func(e *invEnv) error {
				_, err := e.m.ReserveWriteChain([]int{22}, []uint32{0}, nil, invObj, ModeAll)
				return err
			},
			func(e *invEnv) { e.obj(22).block.Offset = e.obj(1).block.Offset },
			"overlap"},
		{"Snapshot breaks the eviction list's links", "Snapshot", EvictLRU,
			func(e *invEnv) error { e.m.Snapshot(); return nil },
			func(e *invEnv) { e.obj(2).evl.prev = 200 },
			"links back"},
		{"IsEvictable miscounts the eviction set", "IsEvictable", EvictLRU,
			func(e *invEnv) error { e.m.IsEvictable(1); return nil },
			func(e *invEnv) { e.m.ev.n++ },
			"the eviction set counts"},
		{"Len leaves a victim set aside", "Len", EvictLRU,
			func(e *invEnv) error { e.m.Len(); return nil },
			func(e *invEnv) { e.m.ev.aside = append(e.m.ev.aside, e.obj(1).idx) },
			"set aside"},
		{"Clear leaves a removed object's block unfreed", "Clear", EvictLRU,
			func(e *invEnv) error { e.m.Clear(false); return nil },
			func(e *invEnv) { e.m.pending = append(e.m.pending, allocator.Block{Offset: 1 << 40, Size: invObj}) },
			"not freed"},
		{"FinishWrite under the prefix policy loses a ranked entry", "FinishWrite", EvictPrefix,
			func(e *invEnv) error { _, err := e.m.FinishWrite([]int{5}, []Lease{e.w5}); return err },
			func(e *invEnv) { e.obj(5).rank = 0 },
			"without a ranked entry"},
		{"FinishWrite under S3-FIFO miscounts the small queue's bytes", "FinishWrite", EvictS3FIFO,
			func(e *invEnv) error { _, err := e.m.FinishWrite([]int{5}, []Lease{e.w5}); return err },
			func(e *invEnv) { e.m.ev.smallBytes++ },
			"small queue counts"},
		{"EvictTo under S3-FIFO miscounts the ghost queue", "EvictTo", EvictS3FIFO,
			func(e *invEnv) error { _, err := e.m.EvictTo(0); return err },
			func(e *invEnv) {
				for h := range e.m.ev.ghost.count {
					e.m.ev.ghost.count[h]++
					break
				}
			},
			"the ghost queue counts hash"},
	}
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			e := newInvEnv(t, mu.policy)
			armed := true
			mutation = func(op string, _ any) {
				if armed && op == mu.op {
					armed = false
					mu.corrupt(e)
				}
			}
			defer func() { mutation = nil }()
			v := invariants.Catch(func() { _ = mu.call(e) })
			require.NotNil(t, v, "the corrupting call returned")
			assert.False(t, armed)
			assert.Equal(t, "l1."+mu.op, v.Op)
			assert.Contains(t, v.Error(), "invariants: after l1."+mu.op+": ")
			assert.Contains(t, v.Error(), mu.want)
			t.Log(v)
		})
	}
}

// TestInvariantsNameTheCall: the violation names the exported method the
// caller called, for every method that takes the manager lock, including
// one that calls another (ReserveWriteChain calls AppendReserveWriteChain)
// and one called from inside a listener (a Touch from inside FinishWrite's
// delivery is named Touch). The lock is released before the panic: the
// manager answers the next call.
func TestInvariantsNameTheCall(t *testing.T) {
	calls := []struct {
		name, op string
		call     func(e *invEnv)
	}{
		{"ReserveWrite", "ReserveWrite", func(e *invEnv) { e.m.ReserveWrite([]int{30}, nil, invObj, ModeAll) }},
		{"ReserveWriteChain", "ReserveWriteChain", func(e *invEnv) { e.m.ReserveWriteChain([]int{30}, nil, nil, invObj, ModeAll) }},
		{"AppendReserveWriteChain", "AppendReserveWriteChain", func(e *invEnv) { e.m.AppendReserveWriteChain(nil, []int{30}, nil, nil, invObj, ModeAll) }},
		{"FinishWrite", "FinishWrite", func(e *invEnv) { e.m.FinishWrite([]int{5}, []Lease{e.w5}) }},
		{"FinishWriteAndReserveRead", "FinishWriteAndReserveRead", func(e *invEnv) { e.m.FinishWriteAndReserveRead([]int{5}, []Lease{e.w5}, 1) }},
		{"AbortWrite", "AbortWrite", func(e *invEnv) { e.m.AbortWrite([]int{5}, []Lease{e.w5}) }},
		{"ReserveRead", "ReserveRead", func(e *invEnv) { e.m.ReserveRead([]int{1}, 1) }},
		{"AppendReserveRead", "AppendReserveRead", func(e *invEnv) { e.m.AppendReserveRead(nil, []int{1}, 1) }},
		{"ReserveReadPrefix", "ReserveReadPrefix", func(e *invEnv) { e.m.ReserveReadPrefix([]int{1}, 1) }},
		{"AppendReadPrefix", "AppendReadPrefix", func(e *invEnv) { e.m.AppendReadPrefix(nil, []int{1}, 1) }},
		{"UnsafeRead", "UnsafeRead", func(e *invEnv) { e.m.UnsafeRead([]int{6}) }},
		{"FinishRead", "FinishRead", func(e *invEnv) { e.m.FinishRead([]int{6}, []Lease{e.r6}, 1) }},
		{"Delete", "Delete", func(e *invEnv) { e.m.Delete([]int{1}, false) }},
		{"Clear", "Clear", func(e *invEnv) { e.m.Clear(false) }},
		{"Touch", "Touch", func(e *invEnv) { e.m.Touch([]int{1}) }},
		{"EvictTo", "EvictTo", func(e *invEnv) { e.m.EvictTo(0.5) }},
		{"Len", "Len", func(e *invEnv) { e.m.Len() }},
		{"State", "State", func(e *invEnv) { e.m.State(1) }},
		{"Snapshot", "Snapshot", func(e *invEnv) { e.m.Snapshot() }},
		{"IsEvictable", "IsEvictable", func(e *invEnv) { e.m.IsEvictable(1) }},
		{"Close", "Close", func(e *invEnv) { e.m.Close() }},
		{"Touch from a listener", "Touch", func(e *invEnv) {
			e.m.AddListenerFunc(func(ev Event[int]) {
				if ev.Kind == EventWriteFinished {
					e.m.Touch([]int{2})
				}
			})
			e.m.FinishWrite([]int{5}, []Lease{e.w5})
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			e := newInvEnv(t, EvictLRU)
			armed := true
			mutation = func(op string, _ any) {
				if armed && op == c.op {
					armed = false
					e.m.held++
				}
			}
			defer func() { mutation = nil }()
			v := invariants.Catch(func() { c.call(e) })
			require.NotNil(t, v, "the corrupted call returned")
			assert.Equal(t, "l1."+c.op, v.Op)
			e.m.held-- // undo the corruption
			assert.NotPanics(t, func() { e.m.Len() }, "the manager is unlocked and sound again")
		})
	}
}
