//go:build linux

package cluster

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// WritePolicy is when a node copies a block it computed to L2.
type WritePolicy uint8

const (
	// WriteThrough puts every block a node computes to L2 when its
	// request finishes (the block becomes readable).
	WriteThrough WritePolicy = iota
	// WriteBack puts a block to L2 when the node's l1 evicts it, if the
	// node computed it (a block loaded from L2 is clean and is not put
	// back).
	WriteBack
	// WriteBoth puts at finish and again at eviction: L2 sees every
	// block as soon as it is readable, and a block an l1 drops becomes
	// most recently used in L2 (a victim cache that also shares).
	WriteBoth
)

// WritePolicies are the two policies the benchmark compares.
var WritePolicies = []WritePolicy{WriteThrough, WriteBack, WriteBoth}

// String returns "write-through" or "write-back".
func (w WritePolicy) String() string {
	switch w {
	case WriteThrough:
		return "write-through"
	case WriteBack:
		return "write-back"
	case WriteBoth:
		return "write-both"
	}
	return fmt.Sprintf("WritePolicy(%d)", uint8(w))
}

// DefaultBlockSize is the bytes per block of the cluster replay: small
// blocks (the 16-64 KiB), so that the real bytes of the daemons'
// replay fit this machine's RAM. The hit rates do not depend on it; the
// bytes moved scale with it.
const DefaultBlockSize = 64 << 10

// Config is one replay of the cluster.
type Config struct {
	// Nodes is N, the nodes (at least 1, at most 256); each serves the
	// requests routed to it from its own l1 of L1 blocks.
	Nodes int
	L1    int64
	// L2 is Q, the shared tier's blocks; 0 means no L2: isolated nodes.
	L2    int64
	Write WritePolicy
	// Touch, when set, makes every l1 hit refresh the block's recency in
	// L2 too, if L2 holds it (a TOUCH the daemon sends asynchronously,
	// moving no bytes): L2's order then follows every node's reads, not
	// only its puts and its own hits.
	Touch bool
	// L2Evict is how L2 picks its victims: exact LRU (the zero value) or
	// Redis's approximation of it.
	L2Evict L2Evict
	// Routing spreads the requests over the nodes (bench/node's).
	Routing node.Routing
	// Options are the replay's: MaxRequests, PrefillRate, Rate,
	// BlockSize (0: DefaultBlockSize). Slots is ignored.
	Options trace.Options
	// Variant, when not the zero value, breaks the model on purpose
	// (internal/reference/mutant), for the tests that must fail.
	Variant Variant
}

// L2Evict is the L2's eviction.
type L2Evict uint8

const (
	// ExactLRU evicts the least recently used block.
	ExactLRU L2Evict = iota
	// RedisLRU is Redis's allkeys-lru: sampled (RedisSamples keys a
	// round, an eviction pool of 16, a one-second access clock, seeded
	// so that replays repeat).
	RedisLRU
	// RandomEvict evicts a block drawn uniformly (Redis's allkeys-random,
	// seeded): what allkeys-lru degrades to when its one-second clock
	// cannot tell the keys' ages apart, as in a replay of an hour of
	// traffic in seconds.
	RandomEvict
)

// String returns "exact LRU", "Redis allkeys-lru" or "random".
func (e L2Evict) String() string {
	switch e {
	case RedisLRU:
		return "Redis allkeys-lru"
	case RandomEvict:
		return "random"
	}
	return "exact LRU"
}

// Variant holds the hooks a deliberately broken model replaces. The zero
// Variant is the model.
type Variant struct {
	// NoTouch, when set, leaves an l1 hit's recency alone.
	NoTouch bool
	// DropPut, when set, is asked for every put and drops those it
	// returns true for.
	DropPut func(block int32) bool
}

// Name is the row's label.
func (c *Config) Name() string {
	if c.L2 == 0 {
		return fmt.Sprintf("%d isolated nodes %s", c.Nodes, c.Routing.Name)
	}
	touch := ""
	if c.Touch {
		touch = "+touch"
	}
	evict := ""
	if c.L2Evict != ExactLRU {
		evict = " (" + c.L2Evict.String() + ")"
	}
	return fmt.Sprintf("%d nodes + L2 %d%s %s%s %s", c.Nodes, c.L2, evict, c.Write, touch, c.Routing.Name)
}

// Result is one replay of the cluster: the trace replay's figures (hits
// over all the nodes, tokens, cold misses; EvictPrefill counts every other
// miss) and the tiers'.
type Result struct {
	trace.Result
	Config Config
	// L1Hits and L2Hits split Hits: the blocks of each request's hit
	// prefix found in its node's l1, and those after them found in L2 and
	// loaded into the node's l1 (the prefetch).
	L1Hits, L2Hits int64
	// Puts is the blocks written to L2; L2Evictions the blocks L2 evicted.
	Puts, L2Evictions int64
	// Touches counts the l1 hits that refreshed L2 (Config.Touch).
	Touches int64
	// Drops and Unsettled are the daemons' replay's (RunDaemons): copies
	// to L2 the daemons' bounded queues dropped, and finishes whose
	// copies were not all handed to L2 within SettleTimeout.
	Drops, Unsettled int64
	// L2Keys is the values the Redis Cluster held at the end of the
	// daemons' replay (against the model's Config.L2).
	L2Keys int64
	// Held is the distinct blocks the l1s and L2 held together at the
	// end of the replay, and Places their places (N × L1 + L2): Held ÷
	// Places is how much of the cluster's memory holds distinct data,
	// where the ideal bound's one pool holds Places distinct blocks.
	Held, Places int64
	// BlockBytes is the bytes per block (Options.BlockSize).
	BlockBytes int64
	// Load is the requests each node served.
	Load []int
}

// BytesToL2 and BytesFromL2 are the bytes moved each way.
func (r *Result) BytesToL2() int64   { return r.Puts * r.BlockBytes }
func (r *Result) BytesFromL2() int64 { return r.L2Hits * r.BlockBytes }

// PerHit returns x ÷ Hits (0 without hits).
func (r *Result) PerHit(x int64) float64 {
	if r.Hits == 0 {
		return 0
	}
	return float64(x) / float64(r.Hits)
}

// PrefillTokens is the input tokens the nodes computed: the tokens that
// missed.
func (r *Result) PrefillTokens() int64 { return r.Tokens - r.HitTokens }

// ErrConfig wraps every rejection of a Config.
var ErrConfig = errors.New("cluster: invalid configuration")

// Run replays tr through the in-process model of the cluster of cfg: each
// node an ideal LRU l1 of cfg.L1 blocks (bench/trace's bound's rules), the
// L2 an LRU of cfg.L2 blocks (Redis's allkeys-lru approximates it), on
// bench/trace's request model, clock and prefill model (trace.RunDriver).
// A request's lookup on its node takes the longest prefix readable in the
// node's l1, then the blocks after it that L2 holds (each read from L2 and
// inserted into the l1, most recently used); its store claims the missing
// blocks in the l1; its finish commits them, and under WriteThrough puts
// each to L2. Under WriteBack the l1's evictions put the evicted block to
// L2 if the node computed it.
func Run(tr *trace.Trace, cfg Config) (*Result, error) {
	if cfg.Nodes < 1 || cfg.Nodes > 256 || cfg.L1 < 1 || cfg.L2 < 0 {
		return nil, fmt.Errorf("%w: %d nodes of %d blocks, L2 of %d: need 1-256 nodes of at least 1 block and an L2 of at least 0", ErrConfig, cfg.Nodes, cfg.L1, cfg.L2)
	}
	if cfg.Write > WriteBoth || cfg.L2Evict > RandomEvict {
		return nil, fmt.Errorf("%w: %v", ErrConfig, cfg.Write)
	}
	if cfg.Routing.Assign == nil {
		return nil, fmt.Errorf("%w: no routing", ErrConfig)
	}
	o := cfg.Options
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	o.Slots = int64(cfg.Nodes)*cfg.L1 + cfg.L2
	reqs := tr.Requests
	if o.MaxRequests > 0 && o.MaxRequests < len(reqs) {
		reqs = reqs[:o.MaxRequests]
	}
	at, err := cfg.Routing.Assign(reqs, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	if len(at) != len(reqs) {
		return nil, fmt.Errorf("cluster: routing %s assigned %d of %d requests", cfg.Routing.Name, len(at), len(reqs))
	}
	d := &model{cfg: &cfg, at: at, granted: make([][]int32, len(reqs)),
		res: &Result{Config: cfg, BlockBytes: o.BlockSize, Load: make([]int, cfg.Nodes)}}
	for range cfg.Nodes {
		d.l1 = append(d.l1, newLRU(cfg.L1))
	}
	var clock sim.Clock
	switch {
	case cfg.L2 > 0 && cfg.L2Evict != ExactLRU:
		r := newRedisLRU(cfg.L2, clock.Now, uint64(cfg.Nodes)<<32|uint64(cfg.L2))
		r.random = cfg.L2Evict == RandomEvict
		d.l2 = r
	case cfg.L2 > 0:
		d.l2 = newLRU(cfg.L2)
	}
	tres, err := trace.RunDriver(tr, cfg.Name(), d, o, &clock)
	if err != nil {
		return nil, err
	}
	d.res.Result = *tres
	return d.res, nil
}

// model is the cluster as a trace.Driver.
type model struct {
	cfg     *Config
	at      []uint8 // each request's node
	l1      []*lru
	l2      l2Store
	granted [][]int32 // each in-flight request's claimed blocks
	res     *Result
}

func (m *model) put(b int32) {
	if m.l2 == nil || m.cfg.Variant.DropPut != nil && m.cfg.Variant.DropPut(b) {
		return
	}
	m.res.Puts++
	m.l2.insert(b, false)
}

// evicted handles a block a node's l1 evicted.
func (m *model) evicted(v victim) {
	if v.ok && (v.dirty && m.cfg.Write == WriteBack || m.cfg.Write == WriteBoth) {
		m.put(v.block)
	}
}

// Lookup implements trace.Driver.
func (m *model) Lookup(i int, r *trace.Request) (int, error) {
	n := int(m.at[i])
	if n >= len(m.l1) {
		return 0, fmt.Errorf("cluster: request %d routed to node %d of %d", i, n, len(m.l1))
	}
	m.res.Load[n]++
	c := m.l1[n]
	h := 0
	for ; h < len(r.Blocks) && c.readable(r.Blocks[h]); h++ {
		if !m.cfg.Variant.NoTouch {
			c.touch(r.Blocks[h])
		}
		if m.cfg.Touch && m.l2 != nil && m.l2.readable(r.Blocks[h]) {
			m.l2.touch(r.Blocks[h])
			m.res.Touches++
		}
	}
	m.res.L1Hits += int64(h)
	if m.l2 == nil {
		return h, nil
	}
	for ; h < len(r.Blocks); h++ {
		b := r.Blocks[h]
		if c.present(b) || !m.l2.readable(b) {
			break
		}
		m.l2.touch(b)
		m.res.L2Hits++
		m.evicted(c.insert(b, false))
	}
	return h, nil
}

// Store implements trace.Driver.
func (m *model) Store(i int, r *trace.Request, hits int) error {
	c := m.l1[m.at[i]]
	g := m.granted[i][:0]
	for _, b := range r.Blocks[hits:] {
		if !c.present(b) {
			c.claim(b)
			g = append(g, b)
		}
	}
	m.granted[i] = g
	return nil
}

// Finish implements trace.Driver.
func (m *model) Finish(i int, r *trace.Request, hits int) ([]int32, error) {
	c := m.l1[m.at[i]]
	g := m.granted[i]
	m.granted[i] = nil
	for _, b := range g {
		m.evicted(c.commit(b, m.cfg.Write == WriteBack))
		if m.cfg.Write != WriteBack {
			m.put(b)
		}
	}
	return g, nil
}

// Close implements trace.Driver.
func (m *model) Close(res *trace.Result) error {
	for _, c := range m.l1 {
		res.Evictions += uint64(c.evictions)
		if len(c.index) != c.n {
			return fmt.Errorf("cluster: an l1 holds %d blocks in flight after the replay", len(c.index)-c.n)
		}
	}
	held := map[int32]struct{}{}
	for _, c := range m.l1 {
		for b := range c.index {
			held[b] = struct{}{}
		}
	}
	m.res.Places = int64(len(m.l1)) * m.cfg.L1
	if m.l2 != nil {
		m.res.L2Evictions = m.l2.evicted()
		m.l2.each(func(b int32) { held[b] = struct{}{} })
		m.res.Places += m.cfg.L2
	}
	m.res.Held = int64(len(held))
	return nil
}
