package l2

import (
	"context"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// shardedMem is a memBackend whose names live on two servers, "s0" and
// "s1" (by a hash of the name); the server sick hangs every call until
// its context ends. It counts Suspect's calls per server.
type shardedMem struct {
	*memBackend
	sick string

	mu       sync.Mutex
	suspects map[string]int
}

func server(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return []string{"s0", "s1"}[h.Sum32()%2]
}

func (b *shardedMem) Shards(_ context.Context, names []string) ([]string, [][]int) {
	var ids []string
	var groups [][]int
	at := map[string]int{}
	for i, n := range names {
		id := server(n)
		g, ok := at[id]
		if !ok {
			g = len(groups)
			at[id] = g
			ids, groups = append(ids, id), append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return ids, groups
}

func (b *shardedMem) Suspect(id string, _ error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.suspects[id]++
}

// hang waits for ctx when names are the sick server's.
func (b *shardedMem) hang(ctx context.Context, names []string) error {
	if len(names) > 0 && server(names[0]) == b.sick {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (b *shardedMem) GetPrefix(ctx context.Context, names []string, n []int) ([][]byte, []int64, error) {
	if err := b.hang(ctx, names); err != nil {
		return nil, nil, err
	}
	return b.memBackend.GetPrefix(ctx, names, n)
}

func (b *shardedMem) Get(ctx context.Context, names []string) ([][]byte, error) {
	if err := b.hang(ctx, names); err != nil {
		return nil, err
	}
	return b.memBackend.Get(ctx, names)
}

// split returns keys' indexes by server.
func split(keys []l1.ObjectKey) (s0, s1 []l1.ObjectKey) {
	for i := range keys {
		if server(StoreKey(DefaultPrefix, &keys[i])) == "s0" {
			s0 = append(s0, keys[i])
		} else {
			s1 = append(s1, keys[i])
		}
	}
	return s0, s1
}

// TestTierBreakerPerServer: over a Sharded backend one server that hangs
// costs its own keys, one timeout, and then nothing until its cooldown
// ends, while the other server's keys are served by every call, and
// calls of the other server alone in between do not keep the sick one's
// breaker closed. The sick server is suspected (its map may be stale).
// After the cooldown one call probes it, and only one.
func TestTierBreakerPerServer(t *testing.T) {
	mem := &shardedMem{memBackend: newMem(), suspects: map[string]int{}}
	clk := &fakeClock{now: time.Unix(0, 0)}
	tier, err := NewTier(mem, Options{Timeout: 30 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	keys := testKeys(16)
	putGet(t, tier, keys, 10)
	healthy, sick := split(keys)
	if len(healthy) == 0 || len(sick) == 0 {
		t.Fatalf("%d and %d keys per server: the test needs both", len(healthy), len(sick))
	}
	mem.sick = "s1"
	ctx := context.Background()
	for range 5 {
		for i, sz := range tier.Head(ctx, keys) {
			if want := server(StoreKey(DefaultPrefix, &keys[i])) == "s0"; (sz >= 0) != want {
				t.Fatalf("key %d: size %d; served %v wanted", i, sz, want)
			}
		}
		for _, sz := range tier.Head(ctx, healthy) {
			if sz < 0 {
				t.Fatal("the healthy server's key missed")
			}
		}
	}
	s := tier.Stats()
	if s.Timeouts != 1 || s.BreakerOpens != 1 || s.Breaker != Open {
		t.Fatalf("after 5 calls touching a hung server: %+v", s)
	}
	for _, sb := range s.Servers {
		if (sb.ID == "s1") != (sb.State == Open) {
			t.Fatalf("server %s's breaker %v", sb.ID, sb.State)
		}
	}
	if mem.suspects["s1"] < 5 || mem.suspects["s0"] != 0 {
		t.Fatalf("suspected %v", mem.suspects)
	}
	clk.add(time.Second)
	tier.Head(ctx, keys) // the probe: one more timeout
	tier.Head(ctx, keys) // open again: skipped
	if s := tier.Stats(); s.Timeouts != 2 || s.BreakerOpens != 2 {
		t.Fatalf("after the probe: %+v", s)
	}
}

// TestTierCallerDeadlineNoVerdict: a call cut short by its caller's own
// deadline (shorter than the tier's timeout) counts neither way: it does
// not open a breaker, and does not close a half-open one.
func TestTierCallerDeadlineNoVerdict(t *testing.T) {
	mem := &shardedMem{memBackend: newMem(), suspects: map[string]int{}}
	tier, _ := NewTier(mem, Options{Timeout: time.Second, BreakerFailures: 1, BreakerCooldown: time.Hour})
	keys := testKeys(8)
	putGet(t, tier, keys, 10)
	mem.sick = "s1"
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		tier.Head(ctx, keys)
		cancel()
	}
	if s := tier.Stats(); s.Cut < 3 || s.BreakerOpens != 0 || s.Errors != 0 {
		t.Fatalf("after 3 calls cut by their caller's deadline: %+v", s)
	}
}

// TestBreakerTripRelease: Trip opens a closed or half-open breaker at
// once, and leaves an open one as it is; Release frees a half-open
// breaker's probe without a verdict.
func TestBreakerTripRelease(t *testing.T) {
	clk := &fakeClock{now: time.Unix(0, 0)}
	b := NewBreaker(5, time.Second, clk)
	if !b.Allow() {
		t.Fatal("closed refused")
	}
	b.Trip()
	if b.State() != Open || b.Opens() != 1 {
		t.Fatalf("%v, %d opens after a trip", b.State(), b.Opens())
	}
	b.Trip()
	if b.Opens() != 1 {
		t.Fatal("a trip of an open breaker opened it again")
	}
	clk.add(time.Second)
	if !b.Allow() || b.Allow() {
		t.Fatal("half-open: want one probe")
	}
	b.Release()
	if b.State() != HalfOpen || !b.Allow() {
		t.Fatalf("after a release: %v, no probe", b.State())
	}
	b.Trip()
	if b.State() != Open || b.Opens() != 2 {
		t.Fatalf("a tripped probe: %v, %d opens", b.State(), b.Opens())
	}
}
