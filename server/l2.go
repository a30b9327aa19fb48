//go:build linux

package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// DefaultL2PutBatch and DefaultL2PutWorkers are the shape of the copies to
// L2 unless L2Config says otherwise: puts of 2 objects, 8 at once. On the
// 2-core development VM, loaded, finishes of 8 MiB objects went out at
// 0.53 GB/s so, against 0.27 GB/s with 2 workers of 8 objects.
const (
	DefaultL2PutBatch   = 2
	DefaultL2PutWorkers = 8
)

// DefaultL2PrefetchBytes is the payload bytes up to which a prefetch get
// takes more than PrefetchBatch keys.
const DefaultL2PrefetchBytes = 64 << 20

// L2Config configures the daemon's L2 tier (PROTOCOL.md, "The L2 tier").
type L2Config struct {
	// Store is the tier (l2.NewTier over l2.NewRedis, in kvallocd); nil
	// means none. The daemon closes it on Close.
	Store l2.Store
	// Queue bounds the finished objects waiting to be copied to L2
	// (default 1024); past it a copy is dropped and counted.
	Queue int
	// Batch is the most objects one put carries (default
	// DefaultL2PutBatch), Workers the puts in flight (default
	// DefaultL2PutWorkers): a finish of a few large objects goes out at
	// once, over every master of a cluster.
	Batch, Workers int
	// MaxPrefetch bounds the keys being loaded from L2 at once, over all
	// lookups (default 4096); a lookup past it prefetches fewer.
	MaxPrefetch int
	// PrefetchBatch and PrefetchBytes shape a prefetch's gets: a
	// prefetch loads its keys in order, a get at a time, and finishes
	// each get's keys before the next get. A get carries PrefetchBatch
	// keys (default 8), and more while its payloads stay within
	// PrefetchBytes (default DefaultL2PrefetchBytes, 64 MiB: 8 objects of
	// 8 MiB), so that small objects are not fetched a few at a time.
	PrefetchBatch int
	PrefetchBytes int64
	// MinRate is the break-even of an L2 hit, in bytes per second: while
	// the daemon's estimate of its L2 load rate (L2Estimate) is below
	// it, a lookup counts its L2 hits as misses and prefetches none of
	// them (PROTOCOL.md, "The L2 tier"). 0, the default here, counts
	// every hit; kvallocd's -l2-min-rate defaults to DefaultL2MinRate.
	MinRate float64
	// ProbeInterval is how long a refusal of the rule above stands
	// without a new measure (default 1 s): past it, a refused lookup
	// with the prefetch flag loads its first batch anyway, uncounted, so
	// that a store that became fast is counted again.
	ProbeInterval time.Duration
}

func (c L2Config) withDefaults() (L2Config, error) {
	if c.Queue < 0 || c.Batch < 0 || c.Workers < 0 || c.MaxPrefetch < 0 || c.PrefetchBatch < 0 || c.PrefetchBytes < 0 || c.ProbeInterval < 0 {
		return c, fmt.Errorf("%w: negative L2 bound (%+v)", l1.ErrInvalidArgument, c)
	}
	if !(c.MinRate >= 0) || math.IsInf(c.MinRate, 1) {
		return c, fmt.Errorf("%w: L2 break-even rate %v is not a rate (want 0 or a finite positive number of bytes per second)", l1.ErrInvalidArgument, c.MinRate)
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultL2ProbeInterval
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Queue, 1024)
	def(&c.Batch, DefaultL2PutBatch)
	def(&c.Workers, DefaultL2PutWorkers)
	def(&c.MaxPrefetch, 4096)
	def(&c.PrefetchBatch, 8)
	if c.PrefetchBytes == 0 {
		c.PrefetchBytes = DefaultL2PrefetchBytes
	}
	return c, nil
}

// l2tier is the daemon's side of the L2 tier: the put queue and its
// workers, the prefetches in flight, and the locks the daemon holds for
// them, in a ledger of its own that Check counts like a connection's.
//
// Every l1 call it makes and the ledger's record of it happen together
// under the server's gate (shared), so Check sees them in step; no
// network call is ever made under the gate.
type l2tier struct {
	s     *Server
	store l2.Store
	cfg   L2Config
	queue chan l1.ObjectKey

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	own      *ledger                   // the daemon's holds: prefetch writes, put reads
	pending  map[l1.ObjectKey]*loading // keys being loaded from L2
	inflight int                       // len(pending)
	closed   bool

	// The pause of a handoff (pause, unpause): while paused no prefetch
	// and no copy starts. run is the context of the loads and copies:
	// a child of ctx, cancelled by the pause, new at the unpause. busy
	// counts the loads and copies running (under mu); idle, on mu, is
	// signalled when busy drops to 0, and at the unpause and the close
	// (for the putters waiting out a pause).
	paused  bool
	run     context.Context
	stopRun context.CancelFunc
	busy    int
	idle    *sync.Cond

	rate loadRate // the estimate of the L2 load rate (l2rate.go)

	queued atomic.Int64 // keys queued for, or in, their copy to L2

	// beforeRelease, when set (tests), runs in each copy between its
	// encode (or, for a PayloadStore, its send) and the release of its
	// read locks; sendLapsed is a deliberate bug: a copy sends values
	// whose read lock lapsed (or, sent, leaves them in the store).
	beforeRelease atomic.Pointer[func()]
	sendLapsed    atomic.Bool
}

// loading is one key's prefetch: done closes once it is finished or
// aborted.
type loading struct{ done chan struct{} }

// startL2 starts the tier's workers, when the config has a store.
func (s *Server) startL2() error {
	cfg, err := s.cfg.L2.withDefaults()
	if err != nil {
		return err
	}
	if cfg.Store == nil {
		return nil
	}
	t := &l2tier{s: s, store: cfg.Store, cfg: cfg, queue: make(chan l1.ObjectKey, cfg.Queue),
		own: newLedger(), pending: map[l1.ObjectKey]*loading{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.run, t.stopRun = context.WithCancel(t.ctx)
	t.idle = sync.NewCond(&t.mu)
	for range cfg.Workers {
		t.wg.Add(1)
		go t.putter()
	}
	s.l2 = t
	return nil
}

// stopL2 stops the tier: no new work, the workers and prefetches end (a
// prefetch in flight is aborted), every lock the daemon held is given
// back, and the store is closed. It runs after every connection ended.
func (s *Server) stopL2() {
	t := s.l2
	if t == nil {
		return
	}
	t.mu.Lock()
	t.closed = true
	t.idle.Broadcast() // a putter waiting out a pause drains the queue
	t.mu.Unlock()
	t.cancel()
	close(t.queue)
	t.wg.Wait()
	if err := t.store.Close(); err != nil {
		s.log.Warn("l2: close", "err", err)
	}
}

// finished queues the keys a finish_write (sts) or
// finish_write_and_reserve_read (res) finished for their copy to L2,
// without blocking: past the queue's bound a copy is dropped and
// counted. The keys may alias the request's frame: they are copied.
func (t *l2tier) finished(keys []l1.ObjectKey, sts []l1.Status, res []l1.Result) {
	if t == nil {
		return
	}
	for i := range keys {
		if (sts != nil && sts[i] != l1.OK) || (res != nil && res[i].Status != l1.OK) {
			continue
		}
		t.queued.Add(1)
		select {
		case t.queue <- cloneKey(&keys[i]):
		default:
			t.queued.Add(-1)
			t.store.Drop(1)
		}
	}
}

func cloneKey(k *l1.ObjectKey) l1.ObjectKey {
	return l1.ObjectKey{ChunkHash: strings.Clone(k.ChunkHash), Model: strings.Clone(k.Model),
		CacheSalt: strings.Clone(k.CacheSalt), KVRank: k.KVRank, GroupID: k.GroupID}
}

// putter copies queued objects to L2, a batch at a time: it read-locks
// them (the daemon's own locks, so no writer can reuse their blocks),
// encodes their bytes out of the daemon's mapping of the pool, releases
// the locks, and sends only the values whose lock was still valid when
// released (a lock that lapsed could have let the block be reused).
func (t *l2tier) putter() {
	defer t.wg.Done()
	bufs := make([][]byte, t.cfg.Batch)
	keys := make([]l1.ObjectKey, 0, t.cfg.Batch)
	for k := range t.queue {
		keys = append(keys[:0], k)
	fill:
		for len(keys) < t.cfg.Batch {
			select {
			case k, ok := <-t.queue:
				if !ok {
					break fill
				}
				keys = append(keys, k)
			default:
				break fill
			}
		}
		if ctx, ok := t.enter(); ok { // closing: drain without work
			t.put(ctx, keys, bufs)
			t.leave()
		}
		t.queued.Add(-int64(len(keys)))
	}
}

// enter starts a copy to L2: it waits out a pause, and returns the
// context the copy runs under (cancelled by the next pause); false when
// the tier is closing.
func (t *l2tier) enter() (context.Context, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.paused && !t.closed {
		t.idle.Wait()
	}
	if t.closed || t.ctx.Err() != nil {
		return nil, false
	}
	t.busy++
	return t.run, true
}

// leave ends a load or a copy that enter (or prefetch) started.
func (t *l2tier) leave() {
	t.mu.Lock()
	t.busy--
	if t.busy == 0 {
		t.idle.Broadcast()
	}
	t.mu.Unlock()
}

// put is one batch of putter, under ctx.
func (t *l2tier) put(ctx context.Context, keys []l1.ObjectKey, bufs [][]byte) {
	s := t.s
	s.gate.RLock()
	// A temporary object goes with its last read lock: the copy's would
	// consume it before its reader came. It is not copied. (An object
	// rewritten as temporary between this look and the lock below is
	// consumed all the same: a miss for its reader, never a wrong byte.)
	keep := keys[:0]
	for _, k := range keys {
		if st, ok := s.mgr.State(k); ok && !st.Temporary {
			keep = append(keep, k)
		}
	}
	keys = keep
	if len(keys) == 0 {
		s.gate.RUnlock()
		return
	}
	locked := time.Now()                            // at or before the locks' start: their lapse is later than locked+TTL
	res, err := s.mgr.ReserveReadUntracked(keys, 1) // a copy is no reader: no use recorded
	sizes := make([]int64, len(keys))
	if err == nil {
		t.mu.Lock()
		t.own.reads.addAll(keys, res, 1)
		t.mu.Unlock()
		for i := range keys {
			// The object's own size; its block is rounded up.
			st, ok := s.mgr.State(keys[i])
			sizes[i] = st.Size
			if !ok || res[i].Status != l1.OK || st.ReadLease != res[i].Lease || st.Size < 0 || st.Size > res[i].Block.Size {
				sizes[i] = -1 // not the object we locked: release, send nothing
			}
		}
	}
	s.gate.RUnlock()
	if err != nil {
		return // the manager is closed
	}
	if ps, ok := t.store.(l2.PayloadStore); ok {
		t.putPayloads(ctx, ps, keys, res, sizes, locked)
		return
	}
	pool := s.pool.Bytes()
	var lk []l1.ObjectKey
	var leases []l1.Lease
	var vals [][]byte
	for i := range keys {
		if res[i].Status != l1.OK {
			continue // deleted, evicted or rewritten since: nothing to copy
		}
		b, size := res[i].Block, sizes[i]
		j := len(lk)
		lk, leases = append(lk, keys[i]), append(leases, res[i].Lease)
		if size < 0 {
			vals = append(vals, nil)
			continue
		}
		v, err := t.store.Encode(bufs[j][:0], &keys[i], pool[b.Offset:b.Offset+size])
		if err != nil {
			v = nil // a key field too long for a value: never stored
		}
		bufs[j] = v
		vals = append(vals, v)
	}
	if len(lk) == 0 {
		return
	}
	if s.l2PutKeepsRead.Load() {
		// The deliberate bug: the lock is never released; the ledger
		// keeps its record, so Check agrees with l1.
		t.store.Put(ctx, lk, vals)
		return
	}
	if f := t.beforeRelease.Load(); f != nil {
		(*f)()
	}
	s.gate.RLock()
	sts, err := s.mgr.FinishReadUntracked(lk, leases, 1)
	t.mu.Lock()
	for j := range lk {
		t.own.subRead(leases[j], 1)
		if err != nil || sts[j] != l1.OK {
			t.own.dropRead(leases[j])
			if !t.sendLapsed.Load() {
				vals[j] = nil // the lock lapsed: the block may have been reused mid-copy
			}
		}
	}
	t.mu.Unlock()
	s.gate.RUnlock()
	sk, sv := lk[:0], vals[:0]
	for j := range lk {
		if vals[j] != nil {
			sk, sv = append(sk, lk[j]), append(sv, vals[j])
		}
	}
	if n := len(lk) - len(sk); n > 0 {
		t.store.Drop(n)
	}
	t.store.Put(ctx, sk, sv)
}

// putPayloads is put's send for a store that takes payloads: each
// object's bytes go to the store straight from the daemon's mapping of
// the pool, under the read lock, which is released after the send (no
// copy of the object first; the lock is held for the network). An
// object whose lock the release found lapsed may have been reused
// while it was sent, so its value is deleted from the store, and the
// copy counted as dropped.
//
// A pause cancels ctx: the send is cut (a piece connection at once; a
// whole value's call at the latest at the tier's timeout) and the locks
// released, the copy abandoned or done.
//
// The send must not read the pool after the locks could lapse, or it
// may send another object's bytes, with a valid MAC, for as long as the
// delete after the release takes: so it is cut at half the read TTL
// from locked (taken before the locks), whatever the store's own
// timeouts. With the default TTL (5 min) against an L2 timeout of at
// most 5 s this never binds; with a read TTL near the L2 timeout it
// drops copies rather than send bytes no lock holds.
func (t *l2tier) putPayloads(ctx context.Context, ps l2.PayloadStore, keys []l1.ObjectKey, res []l1.Result, sizes []int64, locked time.Time) {
	s := t.s
	if ttl := copyReadTTL(s.cfg); ttl != l1.NoExpiry {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, locked.Add(ttl/2))
		defer cancel()
	}
	pool := s.pool.Bytes()
	var lk, sk []l1.ObjectKey
	var leases []l1.Lease
	var payloads [][]byte
	for i := range keys {
		if res[i].Status != l1.OK {
			continue // deleted, evicted or rewritten since: nothing to copy
		}
		lk, leases = append(lk, keys[i]), append(leases, res[i].Lease)
		if b, size := res[i].Block, sizes[i]; size >= 0 {
			sk, payloads = append(sk, keys[i]), append(payloads, pool[b.Offset:b.Offset+size])
		}
	}
	if len(lk) == 0 {
		return
	}
	if n := len(lk) - len(sk); n > 0 {
		t.store.Drop(n)
	}
	if len(sk) > 0 {
		ps.PutPayloads(ctx, sk, payloads)
	}
	if s.l2PutKeepsRead.Load() {
		return // the deliberate bug: the lock is never released
	}
	if f := t.beforeRelease.Load(); f != nil {
		(*f)()
	}
	s.gate.RLock()
	sts, err := s.mgr.FinishReadUntracked(lk, leases, 1)
	var lapsed []l1.ObjectKey
	t.mu.Lock()
	for j := range lk {
		t.own.subRead(leases[j], 1)
		if err != nil || sts[j] != l1.OK {
			t.own.dropRead(leases[j])
			lapsed = append(lapsed, lk[j])
		}
	}
	t.mu.Unlock()
	s.gate.RUnlock()
	if len(lapsed) > 0 && !t.sendLapsed.Load() { // sendLapsed: the deliberate bug, lapsed copies kept
		t.store.Delete(t.ctx, lapsed)
		t.store.Drop(len(lapsed))
	}
}

// holds adds the daemon's own locks to Check's maps of writers and
// readers, as one more holder beside the connections.
func (t *l2tier) holds(writers map[l1.Lease][]l1.ObjectKey, readers map[l1.Lease]map[l1.ObjectKey]int64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.own.writes.all() {
		writers[h.lease] = append(writers[h.lease], h.key)
	}
	for _, h := range t.own.reads.all() {
		if readers[h.lease] == nil {
			readers[h.lease] = map[l1.ObjectKey]int64{}
		}
		readers[h.lease][h.key] += h.n
	}
}

// L2Work is what the daemon's L2 tier has in hand.
type L2Work struct {
	// Queued is the finished keys waiting for, or in, their copy to L2.
	Queued int
	// Loading is the keys prefetches are loading from L2.
	Loading int
	// Writes and Reads are the locks the daemon holds of its own: a write
	// lock per key loading, a read lock per object being copied.
	Writes int
	Reads  int64
	// Paused: a handoff paused the tier (no prefetch or copy runs).
	Paused bool
}

// L2Work returns what the daemon's L2 tier has in hand; the zero L2Work
// without one.
func (s *Server) L2Work() L2Work {
	t := s.l2
	if t == nil {
		return L2Work{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := L2Work{Queued: int(t.queued.Load()), Loading: t.inflight, Writes: len(t.own.writes.all()), Paused: t.paused}
	for _, h := range t.own.reads.all() {
		w.Reads += h.n
	}
	return w
}

// verifyOwn checks the daemon's own locks against the work they are for,
// for Check: every write lock is a key being loaded, and there are no
// more read locks than objects queued for, or in, their copy to L2 (a
// copy's lock lives for the copy only).
func (t *l2tier) verifyOwn(bad func(format string, a ...any)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.own.writes.all()
	for _, h := range ws {
		if _, ok := t.pending[h.key]; !ok {
			bad("the daemon write-locks %v under lease %d for no prefetch", h.key, h.lease)
		}
	}
	if len(ws) != len(t.pending) {
		bad("the daemon holds %d write locks for %d keys being loaded", len(ws), len(t.pending))
	}
	var reads int64
	for _, h := range t.own.reads.all() {
		reads += h.n
	}
	if q := t.queued.Load(); reads > q {
		bad("the daemon holds %d read locks of its own with %d objects queued for, or in, their copy to L2", reads, q)
	}
}

// pause stops the tier's work on the pool, for a handoff's export: no
// prefetch or copy starts from then on (a lookup prefetches nothing, the
// finished keys wait in the queue) and the ones running are cancelled;
// the returned wait returns once every one has ended: a load has
// finished or aborted its keys (a get cut by the cancel, as a failed
// one, aborts its keys; one that arrived whole finishes them), a copy
// has released its read locks (its send cut, or done). The daemon then
// holds no lock of its own, and nothing of the tier touches the pool
// until unpause. running is how many loads and copies were cancelled. A
// store call that ignores its context's cancel (go-redis's reads heed
// only a deadline) is waited for, up to the tier's timeout.
func (t *l2tier) pause() (running int, wait func()) {
	t.mu.Lock()
	t.paused = true
	t.stopRun()
	running = t.busy
	t.mu.Unlock()
	return running, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for t.busy > 0 {
			t.idle.Wait()
		}
	}
}

// unpause lets the tier work again after a pause (a handoff that
// failed): the putters take up the queue, lookups prefetch. It reports
// whether the tier was paused.
func (t *l2tier) unpause() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.paused {
		return false
	}
	t.paused = false
	t.run, t.stopRun = context.WithCancel(t.ctx)
	t.idle.Broadcast()
	return true
}

// l2PauseSkipBite and l2ResumeSkipBite are deliberate bugs, set only by
// the L2 restart tests' bites (export_test.go): a handoff exports while
// the L2 tier works on (no pause), and a failed one leaves it paused.
var l2PauseSkipBite, l2ResumeSkipBite bool

// copyReadTTL is the read TTL of the copies' locks: the manager's
// (cfg.L1.ReadTTL, its default when 0).
func copyReadTTL(cfg Config) time.Duration {
	if cfg.L1.ReadTTL == 0 {
		return l1.DefaultReadTTL
	}
	return cfg.L1.ReadTTL
}
