package l2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// memBackend is a Backend in memory that can fail or hang on demand.
type memBackend struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error         // every call fails with it
	hang chan struct{} // every call waits for it or its context
}

func newMem() *memBackend { return &memBackend{m: map[string][]byte{}} }

func (b *memBackend) enter(ctx context.Context) error {
	b.mu.Lock()
	fail, hang := b.fail, b.hang
	b.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fail
}

func (b *memBackend) Get(ctx context.Context, names []string) ([][]byte, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = bytes.Clone(b.m[n])
	}
	return out, nil
}

// GetEach hands the values over from two goroutines, the odd names'
// and the even ones', as a cluster's masters would.
func (b *memBackend) GetEach(ctx context.Context, names []string, _ []int, f func(i int, v []byte)) error {
	vs, err := b.Get(ctx, names)
	var wg sync.WaitGroup
	for half := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := half; i < len(names); i += 2 {
				var v []byte
				if i < len(vs) {
					v = vs[i]
				}
				f(i, v)
			}
		}()
	}
	wg.Wait()
	return err
}

func (b *memBackend) GetPrefix(ctx context.Context, names []string, n []int) ([][]byte, []int64, error) {
	if err := b.enter(ctx); err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out, lens := make([][]byte, len(names)), make([]int64, len(names))
	for i, name := range names {
		v, ok := b.m[name]
		if !ok {
			lens[i] = -1
			continue
		}
		out[i], lens[i] = bytes.Clone(v[:min(n[i], len(v))]), int64(len(v))
	}
	return out, lens, nil
}

func (b *memBackend) Set(ctx context.Context, names []string, values [][]byte) ([]bool, error) {
	if err := b.enter(ctx); err != nil {
		return make([]bool, len(names)), err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ok := make([]bool, len(names))
	for i, n := range names {
		b.m[n], ok[i] = bytes.Clone(values[i]), true
	}
	return ok, nil
}

func (b *memBackend) Del(ctx context.Context, names []string) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		delete(b.m, n)
	}
	return nil
}

func (b *memBackend) Close() error { return nil }

func testKeys(n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("h%03d", i), Model: "m", KVRank: 1}
	}
	return ks
}

func values(t testing.TB, keys []l1.ObjectKey, size int) ([][]byte, [][]byte) {
	t.Helper()
	ps, vs := make([][]byte, len(keys)), make([][]byte, len(keys))
	for i := range keys {
		ps[i] = bytes.Repeat([]byte{byte(i + 1)}, size)
		v, err := Encode(nil, &keys[i], ps[i])
		if err != nil {
			t.Fatal(err)
		}
		vs[i] = v
	}
	return ps, vs
}

// putGet stores values for keys through t and checks that Get and Head
// give them back.
func putGet(t *testing.T, tier Store, keys []l1.ObjectKey, size int) [][]byte {
	t.Helper()
	ctx := context.Background()
	ps, vs := values(t, keys, size)
	if n := tier.Put(ctx, keys, vs); n != len(keys) {
		t.Fatalf("Put stored %d of %d", n, len(keys))
	}
	got := tier.Get(ctx, keys)
	for i := range keys {
		if !bytes.Equal(got[i], ps[i]) {
			t.Fatalf("Get %v: %d bytes, want %d", keys[i], len(got[i]), len(ps[i]))
		}
	}
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = bytes.Repeat([]byte{0xee}, size)
	}
	for i, ok := range tier.Load(ctx, keys, dst) {
		if !ok || !bytes.Equal(dst[i], ps[i]) {
			t.Fatalf("Load %v: %v, %d bytes", keys[i], ok, len(dst[i]))
		}
	}
	for i, s := range tier.Head(ctx, keys) {
		if s != int64(size) {
			t.Fatalf("Head %v = %d, want %d", keys[i], s, size)
		}
	}
	return ps
}

// TestTierCorruptIsMissAndDeleted: a value whose payload, header or key
// was changed in the store is a miss for Get and Head, is counted and is
// gone from the store afterwards; the others are served.
func TestTierCorruptIsMissAndDeleted(t *testing.T) {
	mem := newMem()
	tier, err := NewTier(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := testKeys(4)
	putGet(t, tier, keys, 100)
	name := func(i int) string { return StoreKey(DefaultPrefix, &keys[i]) }
	mem.m[name(0)][len(mem.m[name(0)])-1] ^= 1                   // payload
	mem.m[name(1)][24]++                                         // header: size
	v2, _ := Encode(nil, &keys[3], bytes.Repeat([]byte{9}, 100)) // another key's value
	mem.m[name(2)] = v2
	got := tier.Get(context.Background(), keys)
	for i := range 3 {
		if got[i] != nil {
			t.Fatalf("a corrupt value of %v was served", keys[i])
		}
		if _, ok := mem.m[name(i)]; ok {
			t.Fatalf("the corrupt value of %v is still in the store", keys[i])
		}
	}
	if got[3] == nil {
		t.Fatal("the good value was not served")
	}
	if s := tier.Stats(); s.Corrupt != 3 || s.Hits != 9 || s.Misses != 3 {
		t.Fatalf("stats %+v", s)
	}
	mem.m[name(3)][7]++ // the header's hash length: Head sees it
	if sz := tier.Head(context.Background(), keys[3:]); sz[0] != -1 {
		t.Fatalf("Head of a corrupt header = %d", sz[0])
	}
	if _, ok := mem.m[name(3)]; ok || tier.Stats().Corrupt != 4 {
		t.Fatal("Head left a corrupt value, or did not count it")
	}
}

// TestTierLoadChecksEveryByte: Load copies a payload into its buffer only
// with every check passed. A value whose payload, header or key was
// changed in the store, or another key's value, is a miss, counted and
// deleted; a valid value of another size than the buffer is a miss, left
// in the store; a missing one is a miss; the others are loaded whole.
func TestTierLoadChecksEveryByte(t *testing.T) {
	mem := newMem()
	tier, err := NewTier(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 3*checkChunk + 17 // several chunks of the fused copy and check
	keys := testKeys(7)
	ps := putGet(t, tier, keys, size)
	name := func(i int) string { return StoreKey(DefaultPrefix, &keys[i]) }
	mem.m[name(0)][len(mem.m[name(0)])-1] ^= 1       // the payload's last byte
	mem.m[name(1)][PrefixLen(&keys[1])+checkChunk]++ // the first byte of a later chunk
	mem.m[name(2)][24]++                             // header: size
	mem.m[name(3)] = bytes.Clone(mem.m[name(6)])     // another key's value
	delete(mem.m, name(4))                           // absent
	before := tier.Stats()
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = make([]byte, size)
	}
	dst[5] = make([]byte, size-1) // room for another size
	ok := tier.Load(context.Background(), keys, dst)
	for i := range 6 {
		if ok[i] {
			t.Fatalf("key %d: a bad, absent or other-sized value was loaded", i)
		}
	}
	if !ok[6] || !bytes.Equal(dst[6], ps[6]) {
		t.Fatal("the good value was not loaded whole")
	}
	for i := range 4 {
		if _, in := mem.m[name(i)]; in {
			t.Fatalf("the corrupt value of key %d is still in the store", i)
		}
	}
	if _, in := mem.m[name(5)]; !in {
		t.Fatal("a valid value of another size was deleted")
	}
	s := tier.Stats()
	if s.Corrupt-before.Corrupt != 4 || s.Hits-before.Hits != 1 || s.Misses-before.Misses != 6 {
		t.Fatalf("stats %+v, before %+v", s, before)
	}
}

// TestTierLoadBites: the check above fails for a DecodeInto that copies
// without checking the payload's checksum.
func TestTierLoadBites(t *testing.T) {
	mem := newMem()
	skip := func(k *l1.ObjectKey, v, dst []byte) error {
		if _, err := DecodeHeader(k, v); err != nil {
			return err
		}
		copy(dst, v[PrefixLen(k):])
		return nil
	}
	tier, _ := NewTier(mem, Options{DecodeInto: skip})
	keys := testKeys(2)
	putGet(t, tier, keys, 1000)
	mem.m[StoreKey(DefaultPrefix, &keys[0])][PrefixLen(&keys[0])+500] ^= 0x40
	dst := [][]byte{make([]byte, 1000), make([]byte, 1000)}
	if ok := tier.Load(context.Background(), keys, dst); !ok[0] {
		t.Fatal("the mutant refused the corrupt value: the check cannot tell")
	}
}

// TestTierFailsOpen: a failing store is a miss and a put not made, never
// an error; the breaker opens after BreakerFailures and then skips the
// store; once the store is back a probe closes it.
func TestTierFailsOpen(t *testing.T) {
	mem := newMem()
	clk := &fakeClock{now: time.Unix(0, 0)}
	tier, _ := NewTier(mem, Options{BreakerFailures: 2, BreakerCooldown: time.Second, Clock: clk})
	keys := testKeys(2)
	putGet(t, tier, keys, 10)
	mem.fail = errors.New("connection refused")
	ctx := context.Background()
	for range 2 {
		if got := tier.Get(ctx, keys); got[0] != nil || got[1] != nil {
			t.Fatal("served from a failing store")
		}
	}
	if tier.Breaker().State() != Open {
		t.Fatalf("breaker %v after 2 failures", tier.Breaker().State())
	}
	_, vs := values(t, keys, 10)
	if n := tier.Put(ctx, keys, vs); n != 0 {
		t.Fatal("Put stored through an open breaker")
	}
	s := tier.Stats()
	if s.Errors != 2 || s.Skipped != 1 || s.Drops != 2 {
		t.Fatalf("stats %+v", s)
	}
	mem.fail = nil
	clk.add(time.Second)
	if got := tier.Get(ctx, keys); got[0] == nil {
		t.Fatal("the probe after the cooldown missed")
	}
	if tier.Breaker().State() != Closed {
		t.Fatalf("breaker %v after a good probe", tier.Breaker().State())
	}
}

// TestTierTimeout: a store that hangs costs one timeout, which opens the
// breaker at once (BreakerFailures is for failures that cost less than a
// whole deadline); then the breaker stops the calls.
func TestTierTimeout(t *testing.T) {
	mem := newMem()
	tier, _ := NewTier(mem, Options{Timeout: 50 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: time.Hour})
	keys := testKeys(3)
	putGet(t, tier, keys, 10)
	mem.hang = make(chan struct{})
	defer close(mem.hang)
	start := time.Now()
	for range 5 {
		if got := tier.Get(context.Background(), keys); got[0] != nil {
			t.Fatal("served from a hung store")
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("5 gets of a hung store took %v; 1 timeout of 50ms is due", el)
	}
	if s := tier.Stats(); s.Errors != 1 || s.Timeouts != 1 || s.Skipped != 4 || s.BreakerOpens != 1 {
		t.Fatalf("stats %+v", s)
	}
}
