//go:build linux

package cluster

import (
	"testing"
	"time"
)

// TestRedisLRUEvictsIdleKeys: Redis's approximation holds at most its
// capacity, counts its evictions, and evicts keys that are idle: filling
// 1000 keys one second apart and then 200 more, the evicted keys are the
// old ones (their mean insertion second well below the 500 of random
// eviction), and a key touched just before is never the victim.
func TestRedisLRUEvictsIdleKeys(t *testing.T) {
	var now time.Duration
	c := newRedisLRU(1000, func() time.Duration { return now }, 1)
	for b := range int32(1000) {
		now = time.Duration(b) * time.Second
		if v := c.insert(b, false); v.ok {
			t.Fatalf("evicted %d before the cache was full", v.block)
		}
	}
	sum := 0
	for b := int32(1000); b < 1200; b++ {
		now = time.Duration(b) * time.Second
		c.touch(b - 1) // the newest key is fresh
		v := c.insert(b, false)
		if !v.ok {
			t.Fatalf("no eviction inserting %d into a full cache", b)
		}
		if v.block == b-1 {
			t.Fatalf("evicted %d, touched a moment before", v.block)
		}
		sum += int(v.block)
	}
	if len(c.keys) != 1000 || len(c.pos) != 1000 || c.evicted() != 200 {
		t.Fatalf("%d keys, %d indexed, %d evictions; want 1000, 1000, 200", len(c.keys), len(c.pos), c.evicted())
	}
	if mean := sum / 200; mean > 250 {
		t.Fatalf("the evicted keys' mean insertion second is %d: not least recently used", mean)
	}
	for i, b := range c.keys {
		if c.pos[b] != int32(i) {
			t.Fatalf("key %d at %d indexed at %d", b, i, c.pos[b])
		}
	}
}
