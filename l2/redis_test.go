package l2_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

func keysN(prefix string, n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%s-%04d", prefix, i), Model: "llama", CacheSalt: "s", KVRank: uint32(i % 4)}
	}
	return ks
}

func payloads(keys []l1.ObjectKey, size int) ([][]byte, [][]byte) {
	ps, vs := make([][]byte, len(keys)), make([][]byte, len(keys))
	for i := range keys {
		p := make([]byte, size)
		for j := 0; j < size; j += 4096 {
			p[j] = byte(i + j>>12)
		}
		ps[i] = p
		vs[i], _ = l2.Encode(nil, &keys[i], p)
	}
	return ps, vs
}

func newTier(t *testing.T, url string, opts l2.Options) (*l2.Tier, *l2.Redis) {
	t.Helper()
	r, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{Timeout: opts.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l2.NewTier(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	return tier, r
}

// roundTrip puts values for keys and reads them back with Get and Head.
func roundTrip(t *testing.T, tier *l2.Tier, keys []l1.ObjectKey, size int) {
	t.Helper()
	ctx := context.Background()
	ps, vs := payloads(keys, size)
	if n := tier.Put(ctx, keys, vs); n != len(keys) {
		t.Fatalf("Put stored %d of %d (%+v)", n, len(keys), tier.Stats())
	}
	got := tier.Get(ctx, keys)
	for i := range keys {
		if !bytes.Equal(got[i], ps[i]) {
			t.Fatalf("Get %v: wrong bytes (%d, want %d)", keys[i], len(got[i]), size)
		}
	}
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = make([]byte, size)
	}
	for i, ok := range tier.Load(ctx, keys, dst) {
		if !ok || !bytes.Equal(dst[i], ps[i]) {
			t.Fatalf("Load %v: %v, wrong bytes", keys[i], ok)
		}
	}
	for i, s := range tier.Head(ctx, keys) {
		if s != int64(size) {
			t.Fatalf("Head %v = %d, want %d", keys[i], s, size)
		}
	}
}

// TestRedisPlain: one plain redis-server: 8 MiB and 64 KiB values round
// trip; a value corrupted in Redis directly is a miss, counted, deleted.
func TestRedisPlain(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	tier, r := newTier(t, srv.URL(), l2.Options{})
	if _, ok := r.Client().(*redis.Client); !ok {
		t.Fatalf("one plain server got a %T", r.Client())
	}
	roundTrip(t, tier, keysN("big", 3), 8<<20)
	keys := keysN("small", 50)
	roundTrip(t, tier, keys, 64<<10)

	rc := srv.Client()
	defer rc.Close()
	ctx := context.Background()
	name := l2.StoreKey(l2.DefaultPrefix, &keys[7])
	if err := rc.SetRange(ctx, name, int64(l2.PrefixLen(&keys[7])+100), "X").Err(); err != nil {
		t.Fatal(err)
	}
	got := tier.Get(ctx, keys[5:10])
	if got[2] != nil {
		t.Fatal("a value corrupted in Redis was served")
	}
	if n, _ := rc.Exists(ctx, name).Result(); n != 0 {
		t.Fatal("the corrupt value is still in Redis")
	}
	if s := tier.Stats(); s.Corrupt != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRedisCluster: 3 masters and 3 replicas: values spread over the
// masters round trip, through all seeds or one; a stopped master costs
// at most the timeout per call, opens the breaker, serves no wrong byte,
// and once continued the breaker closes.
func TestRedisCluster(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{})
	const timeout = 300 * time.Millisecond
	tier, r := newTier(t, c.URL(), l2.Options{Timeout: timeout, BreakerFailures: 2, BreakerCooldown: 200 * time.Millisecond})
	if _, ok := r.Client().(*redis.ClusterClient); !ok {
		t.Fatalf("a cluster got a %T", r.Client())
	}
	keys := keysN("cl", 60)
	roundTrip(t, tier, keys, 64<<10)
	one, r1 := newTier(t, "redis://"+c.Nodes[0].Addr(), l2.Options{})
	if _, ok := r1.Client().(*redis.ClusterClient); !ok {
		t.Fatalf("one seed of a cluster got a %T", r1.Client())
	}
	roundTrip(t, one, keysN("one", 20), 1000)
	// One value a pipeline: every value of every master once, in parts.
	rs, err := l2.NewRedis(context.Background(), c.URL(), l2.RedisOptions{StreamBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	streamed, _ := l2.NewTier(rs, l2.Options{})
	defer streamed.Close()
	roundTrip(t, streamed, keysN("streamed", 30), 10<<10)

	ps, _ := payloads(keys, 64<<10)
	masters, err := c.Masters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	victim := masters[0]
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	hits, loaded := 0, 0
	for range 4 {
		start := time.Now()
		got := tier.Get(context.Background(), keys)
		if el := time.Since(start); el > timeout+500*time.Millisecond {
			t.Fatalf("a get with a stopped master took %v (timeout %v)", el, timeout)
		}
		for i := range keys {
			if got[i] != nil {
				hits++
				if !bytes.Equal(got[i], ps[i]) {
					t.Fatalf("wrong bytes for %v", keys[i])
				}
			}
		}
		start = time.Now()
		dst := make([][]byte, len(keys))
		for i := range dst {
			dst[i] = make([]byte, 64<<10)
		}
		ok := tier.Load(context.Background(), keys, dst)
		if el := time.Since(start); el > timeout+500*time.Millisecond {
			t.Fatalf("a load with a stopped master took %v (timeout %v)", el, timeout)
		}
		for i := range keys {
			if ok[i] {
				loaded++
				if !bytes.Equal(dst[i], ps[i]) {
					t.Fatalf("Load: wrong bytes for %v", keys[i])
				}
			}
		}
	}
	s := tier.Stats()
	if s.BreakerOpens == 0 || s.Skipped == 0 {
		t.Fatalf("the breaker never opened: %+v", s)
	}
	if err := victim.Cont(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := tier.Get(context.Background(), keys)
		n := 0
		for i := range got {
			if got[i] != nil {
				n++
			}
		}
		if n == len(keys) && tier.Stats().Breaker == l2.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGCONT: %d of %d hits, breakers %+v", n, len(keys), tier.Stats().Servers)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("stopped master: %d hits in 4 gets and %d in 4 loads of %d keys; %+v", hits, loaded, len(keys), tier.Stats())
}
