package l2_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// corruptServed stores values in a real Redis, changes one payload byte
// of each in Redis directly, reads them back through a tier with decode,
// and returns how many wrong payloads the tier served.
func corruptServed(t *testing.T, url string, decode func(*l1.ObjectKey, []byte) ([]byte, error)) int {
	t.Helper()
	tier, r := newTier(t, url, l2.Options{Decode: decode})
	keys := keysN("bite", 8)
	ps, vs := payloads(keys, 4096)
	ctx := context.Background()
	if n := tier.Put(ctx, keys, vs); n != len(keys) {
		t.Fatalf("Put stored %d", n)
	}
	for i := range keys {
		name := l2.StoreKey(l2.DefaultPrefix, &keys[i])
		if err := r.Client().SetRange(ctx, name, int64(l2.PrefixLen(&keys[i])+i*100), "\xa5").Err(); err != nil {
			t.Fatal(err)
		}
	}
	wrong := 0
	for i, p := range tier.Get(ctx, keys) {
		if p != nil && !bytes.Equal(p, ps[i]) {
			wrong++
		}
	}
	return wrong
}

// TestCorruptValueBites: values corrupted in Redis are never served by the
// real decoder, and the check that says so catches a decoder that skips
// the payload checksum (mutant.L2SkipChecksum).
func TestCorruptValueBites(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	if n := corruptServed(t, srv.URL(), nil); n != 0 {
		t.Fatalf("the real decoder served %d wrong payloads", n)
	}
	if n := corruptServed(t, srv.URL(), mutant.L2SkipChecksum); n == 0 {
		t.Fatal("the check missed a decoder that skips the checksum")
	} else {
		t.Logf("caught: the mutant served %d wrong payloads of 8", n)
	}
}
