package l2

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// Defaults of Options.
const (
	DefaultTimeout         = 2 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 2 * time.Second
	DefaultPrefix          = "kvl2:"
)

// Options configures a Tier.
type Options struct {
	// Timeout bounds each batched call to each server of the store
	// (default 2 s; a daemon's at most MaxTimeout).
	Timeout time.Duration
	// BreakerFailures is how many failed calls in a row open a server's
	// breaker (default 5); a call that runs out its whole Timeout opens
	// it at once. BreakerCooldown is how long it stays open (default 2 s).
	BreakerFailures int
	BreakerCooldown time.Duration
	// Clock is the breaker's clock (default the wall clock).
	Clock Clock
	// Prefix opens every name in the store (default "kvl2:"): tiers with
	// different prefixes share a store without sharing values.
	Prefix string
	// Codec encodes (Tier.Encode) and checks the values: with a secret,
	// values with MACs (NewCodec); nil is Unauthenticated, values
	// without MACs, which anyone who can write to the store can forge.
	Codec *Codec
	// Decode checks a value against its key and returns its payload; nil
	// is Codec's Decode. Tests set broken ones (mutants).
	Decode func(k *l1.ObjectKey, v []byte) ([]byte, error)
	// DecodeInto is Load's Decode: it checks a value and copies its
	// payload into dst; nil is Codec's DecodeInto. Tests set broken
	// ones (mutants).
	DecodeInto func(k *l1.ObjectKey, v, dst []byte) error
	// PieceSize, when not 0, stores each object as pieces of that many
	// bytes (the last shorter), spread over the cluster's masters, read
	// and written over connections of the tier's own (piecetier.go,
	// DESIGN.md "Pieces"); 0 stores whole values (Encode). Pieces need
	// the Redis backend. Every daemon of one store must use one size: a
	// piece of another layout is a miss.
	PieceSize int64
	// PieceConns bounds the piece path's connections per master
	// (default 32).
	PieceConns int
}

// MaxTimeout is the most Options.Timeout a daemon takes (kvallocd
// refuses a longer -l2-timeout). A lookup waits for L2 at most one
// timeout (its header reads, one call per server, all at once), and
// must answer within a client's deadline: 10 s by default
// (client.DefaultTimeout, the Python client's timeout), of which this
// leaves half to the rest of the lookup and to the machine's load. A
// Tier outside a daemon (a benchmark's) may wait longer.
const MaxTimeout = 5 * time.Second

// Tier is a Store over a Backend: names from StoreKey, values checked
// with Decode, timeouts, circuit breakers (one per server of a Sharded
// backend: a Redis Cluster's masters) and counters. It is a
// prometheus.Collector of its metrics (kvallocd_l2_*).
type Tier struct {
	b    Backend
	opts Options
	brs  breakers // by server (masters.go)
	c    *counters
	p    *pieceNet // the piece path; nil for whole values

	// bugs are deliberate bugs of the piece path, set by the tests'
	// mutants only (export_test.go).
	bugs pieceBugs
}

var _ Store = (*Tier)(nil)

// NewTier returns a tier over b with opts.
func NewTier(b Backend, opts Options) (*Tier, error) {
	if opts.Timeout < 0 || opts.BreakerCooldown < 0 || opts.BreakerFailures < 0 {
		return nil, fmt.Errorf("%w: negative option (timeout %v, breaker %d failures, cooldown %v)",
			l1.ErrInvalidArgument, opts.Timeout, opts.BreakerFailures, opts.BreakerCooldown)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.BreakerFailures == 0 {
		opts.BreakerFailures = DefaultBreakerFailures
	}
	if opts.BreakerCooldown == 0 {
		opts.BreakerCooldown = DefaultBreakerCooldown
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Codec == nil {
		opts.Codec = Unauthenticated
	}
	if opts.Decode == nil {
		opts.Decode = opts.Codec.Decode
	}
	if opts.DecodeInto == nil {
		opts.DecodeInto = opts.Codec.DecodeInto
	}
	t := &Tier{b: b, opts: opts, brs: breakers{m: map[string]*serverBreaker{}}, c: newCounters()}
	if err := t.pieces(); err != nil {
		return nil, err
	}
	return t, nil
}

// Options returns the tier's options, defaults filled in.
func (t *Tier) Options() Options { return t.opts }

// Breaker returns the circuit breaker of the calls routed to no server:
// every call to a Backend that is not Sharded (one plain Redis), and a
// Sharded one's calls while it has no map of its servers. Stats has
// every server's.
func (t *Tier) Breaker() *Breaker { return t.breaker("") }

func (t *Tier) names(keys []l1.ObjectKey) []string {
	names := make([]string, len(keys))
	for i := range keys {
		names[i] = StoreKey(t.opts.Prefix, &keys[i])
	}
	return names
}

// Head implements Store: a value's header and key are read (not its
// payload) and checked, and its length must be the header's.
func (t *Tier) Head(ctx context.Context, keys []l1.ObjectKey) []int64 {
	if t.p != nil {
		return t.headPieces(ctx, keys)
	}
	sizes := make([]int64, len(keys))
	for i := range sizes {
		sizes[i] = -1
	}
	if len(keys) == 0 {
		return sizes
	}
	names := t.names(keys)
	n := make([]int, len(keys))
	for i := range keys {
		n[i] = PrefixLen(&keys[i])
	}
	pre := make([][]byte, len(keys))
	lens := make([]int64, len(keys))
	start := time.Now()
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		p, l, err := t.b.GetPrefix(ctx, pick(names, idx), pick(n, idx))
		for j, i := range idx {
			if j < len(p) && j < len(l) {
				pre[i], lens[i] = p[j], l[j]
			}
		}
		return err
	})
	since(t.c.headLatency, start)
	var bad []int
	for i := range keys {
		if pre[i] == nil || lens[i] < 0 {
			continue
		}
		h, err := t.opts.Codec.DecodeHeader(&keys[i], pre[i])
		if err == nil && lens[i] != int64(n[i])+h.Size {
			err = fmt.Errorf("%w: value of %d bytes, the header says %d", ErrCorrupt, lens[i], int64(n[i])+h.Size)
		}
		if err != nil {
			if t.refused(err) {
				bad = append(bad, i)
			}
			continue
		}
		sizes[i] = h.Size
	}
	// A lookup waits for Head: the deletions share its one timeout.
	dctx, cancel := context.WithDeadline(ctx, start.Add(t.opts.Timeout))
	t.corrupt(dctx, keys, names, bad)
	cancel()
	hits := 0
	for _, s := range sizes {
		if s >= 0 {
			hits++
		}
	}
	t.c.headHits.Add(uint64(hits))
	t.c.headMisses.Add(uint64(len(keys) - hits))
	return sizes
}

// Get implements Store.
func (t *Tier) Get(ctx context.Context, keys []l1.ObjectKey) [][]byte {
	if t.p != nil {
		return t.getPieces(ctx, keys)
	}
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out
	}
	names := t.names(keys)
	vals := make([][]byte, len(keys))
	start := time.Now()
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		v, err := t.b.Get(ctx, pick(names, idx))
		for j, i := range idx {
			if j < len(v) {
				vals[i] = v[j]
			}
		}
		return err
	})
	since(t.c.getLatency, start)
	var bad []int
	hits := 0
	for i := range keys {
		if vals[i] == nil {
			continue
		}
		t.c.bytesIn.Add(uint64(len(vals[i])))
		p, err := t.opts.Decode(&keys[i], vals[i])
		if err != nil {
			if t.refused(err) {
				bad = append(bad, i)
			}
			continue
		}
		out[i] = p
		hits++
	}
	t.corrupt(ctx, keys, names, bad)
	t.c.hits.Add(uint64(hits))
	t.c.misses.Add(uint64(len(keys) - hits))
	return out
}

// Load implements Store: the values arrive a node's batch at a time
// (Backend.GetEach), at most one byte past the header, key and dst each
// (a longer value is a miss, and corrupt when its header says dst's
// size), and each is checked as it is copied into its dst
// (Options.DecodeInto), so the checks and copies overlap the transfers
// still in flight.
func (t *Tier) Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	if len(keys) != len(dst) {
		panic(fmt.Sprintf("l2: Load of %d keys into %d buffers", len(keys), len(dst)))
	}
	if t.p != nil {
		return t.loadPieces(ctx, keys, dst)
	}
	ok := make([]bool, len(keys))
	if len(keys) == 0 {
		return ok
	}
	names := t.names(keys)
	sizes := make([]int, len(keys))
	for i := range keys {
		sizes[i] = PrefixLen(&keys[i]) + len(dst[i])
	}
	bad := make([]bool, len(keys))
	var in atomic.Uint64
	start := time.Now()
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		return t.b.GetEach(ctx, pick(names, idx), pick(sizes, idx), func(j int, v []byte) {
			i := idx[j]
			if v == nil {
				return
			}
			in.Add(uint64(len(v)))
			if len(v) > sizes[i] {
				// Cut at one byte past what dst expects (GetEach): the
				// value is longer. A valid header of another size is
				// another object's value, a miss; one of dst's size
				// says the value grew past its header: corrupt.
				switch h, err := t.opts.Codec.DecodeHeader(&keys[i], v); {
				case err != nil:
					bad[i] = t.refused(err)
				case h.Size == int64(len(dst[i])):
					t.c.corrupt.Add(1)
					bad[i] = true
				}
				return
			}
			switch err := t.opts.DecodeInto(&keys[i], v, dst[i]); {
			case err == nil:
				ok[i] = true
			case !errors.Is(err, ErrSize):
				bad[i] = t.refused(err)
			}
		})
	})
	since(t.c.getLatency, start)
	t.c.bytesIn.Add(in.Load())
	var idx []int
	hits := 0
	for i := range keys {
		if bad[i] {
			idx = append(idx, i)
		}
		if ok[i] {
			hits++
		}
	}
	t.corrupt(ctx, keys, names, idx)
	t.c.hits.Add(uint64(hits))
	t.c.misses.Add(uint64(len(keys) - hits))
	return ok
}

// corrupt deletes the values at idx, which failed a check (counted by
// refused).
// (Another node may have stored a good value since the read; deleting it
// costs that node a miss, never a wrong byte.)
func (t *Tier) corrupt(ctx context.Context, keys []l1.ObjectKey, names []string, idx []int) {
	if len(idx) == 0 {
		return
	}
	del := make([]string, len(idx))
	for j, i := range idx {
		del[j] = names[i]
	}
	t.each(ctx, del, func(ctx context.Context, idx []int) error { return t.b.Del(ctx, pick(del, idx)) })
}

// Put implements Store.
func (t *Tier) Put(ctx context.Context, keys []l1.ObjectKey, values [][]byte) int {
	if len(keys) != len(values) {
		panic(fmt.Sprintf("l2: Put of %d keys with %d values", len(keys), len(values)))
	}
	if t.p != nil {
		// In pieces: each value's checked payload, aliased, not copied.
		ps := make([][]byte, len(keys))
		var ks []l1.ObjectKey
		for i := range keys {
			if p, err := t.opts.Codec.Decode(&keys[i], values[i]); err == nil {
				ks, ps = append(ks, keys[i]), append(ps[:len(ks)], p)
			}
		}
		t.c.putFailures.Add(uint64(len(keys) - len(ks)))
		return t.putPieces(ctx, ks, ps[:len(ks)])
	}
	if len(keys) == 0 {
		return 0
	}
	names := t.names(keys)
	ok := make([]bool, len(keys))
	start := time.Now()
	skipped := t.each(ctx, names, func(ctx context.Context, idx []int) error {
		got, err := t.b.Set(ctx, pick(names, idx), pick(values, idx))
		for j, i := range idx {
			ok[i] = j < len(got) && got[j]
		}
		return err
	})
	t.c.drops.Add(uint64(len(skipped)))
	if len(skipped) == len(keys) {
		return 0
	}
	since(t.c.putLatency, start)
	stored := 0
	for i := range keys {
		if ok[i] {
			stored++
			t.c.bytesOut.Add(uint64(len(values[i])))
		}
	}
	t.c.puts.Add(uint64(stored))
	t.c.putFailures.Add(uint64(len(keys) - stored - len(skipped)))
	return stored
}

// Drop implements Store.
func (t *Tier) Drop(n int) { t.c.drops.Add(uint64(n)) }

// Delete implements Store.
func (t *Tier) Delete(ctx context.Context, keys []l1.ObjectKey) {
	if t.p != nil {
		t.deletePieces(ctx, keys)
		return
	}
	if len(keys) == 0 {
		return
	}
	names := t.names(keys)
	t.each(ctx, names, func(ctx context.Context, idx []int) error { return t.b.Del(ctx, pick(names, idx)) })
}

// Stats implements Store.
func (t *Tier) Stats() Stats {
	c := t.c
	servers, opens := t.serverBreakers()
	state := Closed
	for _, sb := range servers {
		opens += sb.Opens
		// The worst state of the servers that still hold names: open,
		// then half-open.
		if sb.Live && (sb.State == Open || (sb.State == HalfOpen && state == Closed)) {
			state = sb.State
		}
	}
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), HeadHits: c.headHits.Load(), HeadMisses: c.headMisses.Load(),
		Puts: c.puts.Load(), PutFailures: c.putFailures.Load(), Drops: c.drops.Load(),
		BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(), Corrupt: c.corrupt.Load(), Partial: c.partial.Load(),
		Forged: c.forged.Load(), Foreign: c.foreign.Load(), AuthFailures: t.authFailures(),
		Errors: c.errors.Load(), Timeouts: c.timeouts.Load(), Cut: c.cut.Load(), Skipped: c.skipped.Load(),
		Breaker: state, BreakerOpens: opens, Servers: servers,
	}
}

// Close implements Store: it closes the backend.
func (t *Tier) Close() error {
	if t.p != nil {
		t.p.close()
	}
	return t.b.Close()
}

// IsCorrupt reports whether err is a refusal of Decode or DecodeHeader.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
