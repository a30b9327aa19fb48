package l2_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// TestLoadReadsAtMostExpected: Load never moves more of a value than its
// header, key and the payload it expects, plus one byte, whatever Redis
// holds. On a real redis-server, four 64 KiB values: one grown in Redis
// past 16 MiB (SETRANGE), one replaced by another node's valid 1 MiB
// value, one by a valid 32 KiB value, one left alone. Load into 64 KiB
// each reads about 4 × 64 KiB, not 17 MiB; the grown value is corrupt,
// counted and deleted; the other sizes are misses, left in Redis for
// their readers; the untouched one is a hit with its exact payload.
func TestLoadReadsAtMostExpected(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	tier, r := newTier(t, srv.URL(), l2.Options{})
	ctx := context.Background()
	const size = 64 << 10
	keys := keysN("bound", 4)
	ps, vs := payloads(keys, size)
	if n := tier.Put(ctx, keys, vs); n != len(keys) {
		t.Fatalf("Put stored %d of %d", n, len(keys))
	}
	rc := r.Client()
	name := func(i int) string { return l2.StoreKey(l2.DefaultPrefix, &keys[i]) }
	if err := rc.SetRange(ctx, name(0), 16<<20, "grown").Err(); err != nil {
		t.Fatal(err)
	}
	for i, other := range map[int]int{1: 1 << 20, 2: 32 << 10} {
		v, err := l2.Encode(nil, &keys[i], bytes.Repeat([]byte{byte(i)}, other))
		if err != nil {
			t.Fatal(err)
		}
		if n := tier.Put(ctx, keys[i:i+1], [][]byte{v}); n != 1 {
			t.Fatalf("Put of key %d's other value failed", i)
		}
	}
	before := tier.Stats()
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = make([]byte, size)
	}
	ok := tier.Load(ctx, keys, dst)
	st := tier.Stats()
	in := st.BytesIn - before.BytesIn
	var bound uint64
	for i := range keys {
		bound += uint64(l2.PrefixLen(&keys[i]) + size + 1)
	}
	t.Logf("Load of 4 values into %d bytes each: %d bytes read (bound %d); ok %v; %+v", size, in, bound, ok, st)
	if in > bound {
		t.Fatalf("Load read %d bytes of values, over the %d their expected sizes allow", in, bound)
	}
	if !ok[3] || ok[0] || ok[1] || ok[2] || !bytes.Equal(dst[3], ps[3]) {
		t.Fatalf("Load: ok %v, want only key 3, with its payload", ok)
	}
	if c := st.Corrupt - before.Corrupt; c != 1 {
		t.Fatalf("%d values counted corrupt, want the grown one", c)
	}
	for i, want := range []int64{0, 1, 1, 1} {
		if n, err := rc.Exists(ctx, name(i)).Result(); err != nil || n != want {
			t.Errorf("key %d: exists %d (%v), want %d", i, n, err, want)
		}
	}
	// The other sizes stay whole for readers that expect them.
	got := make([][]byte, 2)
	got[0], got[1] = make([]byte, 1<<20), make([]byte, 32<<10)
	if ok := tier.Load(ctx, []l1.ObjectKey{keys[1], keys[2]}, got); !ok[0] || !ok[1] {
		t.Fatalf("the other sizes' own readers: %v", ok)
	}
}
