package l2_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// forgeCounts are what a forging tenant achieved against a tier.
type forgeCounts struct {
	forged, served, head, macRefused, foreign int
}

// forgeValues is a tenant of the Redis Cluster with SCAN, GET and SET and
// nothing else: it finds the values under prefix, reads each one's key
// from its header (the format is public), and writes its own payload in
// its place, as the format says: the size and both CRC32Cs made right,
// the key id and MACs of the authentic value kept (half of them), or a
// value without a MAC, as l2.Encode makes (the other half). It returns
// the names it overwrote and the payload it wrote under each.
func forgeValues(t *testing.T, cc *redis.ClusterClient, prefix string) map[string][]byte {
	t.Helper()
	ctx := t.Context()
	var names []string
	var mu sync.Mutex // ForEachMaster runs f on every master at once
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			names = append(names, it.Val())
			mu.Unlock()
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	cast := crc32.MakeTable(crc32.Castagnoli)
	out := map[string][]byte{}
	for i, name := range names {
		v, err := cc.Get(ctx, name).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		hl, ml, sl := int(le.Uint16(v[6:])), int(le.Uint16(v[8:])), int(le.Uint16(v[10:]))
		n := l2.HeaderSize + hl + ml + sl
		kb := v[l2.HeaderSize:n]
		k := l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml:]),
			KVRank: le.Uint32(v[12:]), GroupID: le.Uint32(v[16:])}
		evil := bytes.Repeat([]byte("forged!!"), (len(v)-n)/8)
		var w []byte
		if i%2 == 0 {
			w = append(bytes.Clone(v[:n]), evil...)
			le.PutUint64(w[24:], uint64(len(evil)))
			le.PutUint32(w[32:], crc32.Checksum(evil, cast))
			le.PutUint32(w[36:], crc32.Update(crc32.Checksum(w[:36], cast), cast, w[40:n]))
		} else if w, err = l2.Encode(nil, &k, evil); err != nil {
			t.Fatal(err)
		}
		if err := cc.Set(ctx, name, w, 0).Err(); err != nil {
			t.Fatal(err)
		}
		out[name] = evil
	}
	return out
}

// forge runs the tenant against values a tier with codec stored, and
// reads them back through a fresh tier with the same codec (a node that
// never had them in its own L1): what its Head, Get and Load served.
func forge(t *testing.T, c *rediscluster.Cluster, codec *l2.Codec, prefix string) forgeCounts {
	t.Helper()
	ctx := t.Context()
	tier, _ := newTier(t, c.URL(), l2.Options{Codec: codec, Prefix: prefix, Timeout: 5 * time.Second})
	keys := keysN("forge", 8)
	vs := make([][]byte, len(keys))
	for i := range keys {
		p := bytes.Repeat([]byte{byte(i)}, 64<<10)
		vs[i], _ = tier.Encode(nil, &keys[i], p)
	}
	if n := tier.Put(ctx, keys, vs); n != len(keys) {
		t.Fatalf("Put stored %d of %d", n, len(keys))
	}
	cc := c.Client()
	defer cc.Close()
	evil := forgeValues(t, cc, prefix)
	reader, _ := newTier(t, c.URL(), l2.Options{Codec: codec, Prefix: prefix, Timeout: 5 * time.Second})
	var fc forgeCounts
	fc.forged = len(evil)
	for _, sz := range reader.Head(ctx, keys) {
		if sz >= 0 {
			fc.head++
		}
	}
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = make([]byte, 64<<10)
	}
	isEvil := func(p []byte) bool { return len(p) > 0 && bytes.HasPrefix(p, []byte("forged!!")) }
	for i, ok := range reader.Load(ctx, keys, dst) {
		if ok && isEvil(dst[i]) {
			fc.served++
		}
	}
	for _, p := range reader.Get(ctx, keys) {
		if isEvil(p) {
			fc.served++
		}
	}
	s := reader.Stats()
	fc.macRefused, fc.foreign = int(s.Forged), int(s.Foreign)
	return fc
}

// TestForgingTenant: a tenant of the Redis Cluster that can SCAN, GET and
// SET but holds no secret overwrites 8 of 8 values a daemon stored with
// its own payload, made as the public format says. Through a tier with
// the secret (a node reading them from L2 alone) none is served by Load
// or Get and Head counts none: the 4 that kept the authentic key id fail
// their MAC (counted, deleted), the 4 without a MAC are foreign (counted,
// left alone). Without a secret, as every daemon was before the MAC, the
// same tenant has every one served; and a codec that skips the MAC check
// (the deliberate bug) serves the forgeries the MAC refused.
func TestForgingTenant(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	secret := make([]byte, 32)
	rand.Read(secret)
	s, _ := l2.NewSecret(secret)
	codec, _ := l2.NewCodec(s)

	fc := forge(t, c, codec, "kvl2:forge-mac:")
	t.Logf("forging tenant, MAC: %d values forged, %d served (Load and Get), %d counted by Head; refused by MAC %d (deleted at their first read), reads of the values without a MAC %d (foreign: refused, left alone)",
		fc.forged, fc.served, fc.head, fc.macRefused, fc.foreign)
	if fc.forged != 8 || fc.served != 0 || fc.head != 0 || fc.macRefused == 0 || fc.foreign == 0 {
		t.Fatalf("with the MAC: %+v", fc)
	}

	open := forge(t, c, l2.Unauthenticated, "kvl2:forge-open:")
	t.Logf("forging tenant, no secret: %d values forged, %d served of %d reads", open.forged, open.served, 2*open.forged)
	if open.served < open.forged/2 {
		t.Fatalf("without a secret the forgery did not take: %+v (the test forges nothing)", open)
	}

	bug := forge(t, c, l2.SkipMAC(codec), "kvl2:forge-bug:")
	t.Logf("forging tenant, MAC check skipped (the deliberate bug): %d values forged, %d served", bug.forged, bug.served)
	if bug.served == 0 {
		t.Fatalf("a codec that skips the MAC served no forgery: the test cannot see the MAC's work (%+v)", bug)
	}
}
