package wire_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// TestKeysBlockRuns: batches made of runs of keys sharing a model and
// salt (a batch's usual shape, which the encoder writes without per-key
// indices until the first key that differs) decode to the same keys, and
// encode to the same bytes when the strings are equal but not the same
// memory.
func TestKeysBlockRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pairs := [][2]string{{"m", "m"}, {"m", ""}, {"", ""}, {"llama", "tenant-a"}, {"qwen", "qwen"}, {"tenant-a", "llama"}}
	var e wire.Encoder
	var d wire.Decoder
	var got wire.Request
	var buf, copyBuf []byte
	for trial := range 3000 {
		var keys []l1.ObjectKey
		for len(keys) < 40 && (len(keys) == 0 || rng.IntN(4) > 0) {
			p := pairs[rng.IntN(len(pairs))]
			for range 1 + rng.IntN(6) {
				h := make([]byte, rng.IntN(40))
				for j := range h {
					h[j] = byte(rng.Uint32())
				}
				keys = append(keys, l1.ObjectKey{ChunkHash: string(h), Model: p[0], CacheSalt: p[1], KVRank: rng.Uint32(), GroupID: rng.Uint32()})
			}
		}
		q := wire.Request{Type: wire.TypeDelete, Keys: keys, ID: 1, Epoch: 1}
		var err error
		if buf, err = e.AppendRequest(buf[:0], &q); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := d.DecodeRequest(buf, &got); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !q.Equal(&got) {
			t.Fatalf("trial %d: decoded\n%+v\nwant\n%+v", trial, got.Keys, keys)
		}
		// The same keys with every model and salt a copy of its own.
		cp := make([]l1.ObjectKey, len(keys))
		for i, k := range keys {
			cp[i] = k
			cp[i].Model, cp[i].CacheSalt = strings.Clone(k.Model), strings.Clone(k.CacheSalt)
		}
		q.Keys = cp
		if copyBuf, err = e.AppendRequest(copyBuf[:0], &q); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !bytes.Equal(buf, copyBuf) {
			t.Fatalf("trial %d: equal strings in other memory encode otherwise", trial)
		}
	}
}
