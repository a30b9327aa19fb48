//go:build linux

package cluster

import (
	"math/rand/v2"
	"time"
)

// Redis's approximated LRU (maxmemory-policy allkeys-lru), as Redis 7
// runs it: every key carries an access clock of one-second resolution;
// to evict, Redis samples maxmemory-samples keys at random, merges them
// into an eviction pool of the 16 most idle keys seen (by the idle time
// computed when sampled), and evicts the pool's most idle key that still
// exists.
const (
	RedisSamples  = 5
	redisPoolSize = 16
	redisClockRes = time.Second
)

// l2Store is the L2's cache: exact LRU (lru) or Redis's approximation.
type l2Store interface {
	readable(b int32) bool
	touch(b int32)
	insert(b int32, dirty bool) victim
	evicted() int64
	// each calls f for every block held.
	each(f func(int32))
}

func (c *lru) evicted() int64 { return c.evictions }

func (c *lru) each(f func(int32)) {
	for b := range c.index {
		f(b)
	}
}

func (c *redisLRU) each(f func(int32)) {
	for _, b := range c.keys {
		f(b)
	}
}

// redisLRU is Redis's approximated LRU over at most cap keys, its random
// samples drawn from a seeded PCG so that a replay is deterministic.
type redisLRU struct {
	cap   int
	keys  []int32         // the keys, in no order
	pos   map[int32]int32 // key → index in keys and stamps
	stamp []int64         // each key's access clock (seconds)
	pool  []poolEntry     // ascending idle time
	rng   *rand.Rand
	now   func() time.Duration
	evict int64
	// random evicts a key drawn uniformly (Redis's allkeys-random), not
	// by sampled idle time.
	random bool
}

type poolEntry struct {
	block int32
	idle  int64
}

func newRedisLRU(capacity int64, now func() time.Duration, seed uint64) *redisLRU {
	return &redisLRU{cap: int(capacity), pos: make(map[int32]int32), rng: rand.New(rand.NewPCG(seed, 0x72656469)), now: now}
}

func (c *redisLRU) clock() int64 { return int64(c.now() / redisClockRes) }

func (c *redisLRU) readable(b int32) bool { _, ok := c.pos[b]; return ok }

func (c *redisLRU) touch(b int32) { c.stamp[c.pos[b]] = c.clock() }

func (c *redisLRU) evicted() int64 { return c.evict }

func (c *redisLRU) insert(b int32, _ bool) victim {
	if i, ok := c.pos[b]; ok {
		c.stamp[i] = c.clock()
		return victim{}
	}
	var v victim
	if len(c.keys) >= c.cap && len(c.keys) > 0 {
		v = c.evictOne()
	}
	c.pos[b] = int32(len(c.keys))
	c.keys = append(c.keys, b)
	c.stamp = append(c.stamp, c.clock())
	return v
}

// evictOne is Redis's performEvictions for one key: populate the pool
// from a sample, then evict its most idle live entry.
func (c *redisLRU) evictOne() victim {
	if c.random {
		b := c.keys[c.rng.IntN(len(c.keys))]
		c.remove(b)
		c.evict++
		return victim{block: b, ok: true}
	}
	now := c.clock()
	for {
		for range RedisSamples {
			i := c.rng.IntN(len(c.keys))
			c.poolInsert(c.keys[i], now-c.stamp[i])
		}
		for j := len(c.pool) - 1; j >= 0; j-- {
			e := c.pool[j]
			c.pool = append(c.pool[:j], c.pool[j+1:]...)
			if _, ok := c.pos[e.block]; ok {
				c.remove(e.block)
				c.evict++
				return victim{block: e.block, ok: true}
			}
		}
	}
}

// poolInsert is evictionPoolPopulate's insertion: keep the pool sorted by
// ascending idle time, at most redisPoolSize entries, a key at most once;
// a key less idle than all of a full pool's is not inserted.
func (c *redisLRU) poolInsert(b int32, idle int64) {
	for _, e := range c.pool {
		if e.block == b {
			return
		}
	}
	k := 0
	for k < len(c.pool) && c.pool[k].idle < idle {
		k++
	}
	if len(c.pool) == redisPoolSize {
		if k == 0 {
			return
		}
		// Drop the least idle entry to make room, as Redis shifts left.
		c.pool = append(c.pool[:0], c.pool[1:]...)
		k--
	}
	c.pool = append(c.pool, poolEntry{})
	copy(c.pool[k+1:], c.pool[k:])
	c.pool[k] = poolEntry{block: b, idle: idle}
}

func (c *redisLRU) remove(b int32) {
	i := c.pos[b]
	last := int32(len(c.keys) - 1)
	c.keys[i], c.stamp[i] = c.keys[last], c.stamp[last]
	c.pos[c.keys[i]] = i
	c.keys, c.stamp = c.keys[:last], c.stamp[:last]
	delete(c.pos, b)
}
