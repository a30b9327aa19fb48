package wire_test

import (
	"encoding/binary"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// benchKeys returns n distinct keys of one model and salt, with 32-byte
// chunk hashes: a serving engine's batch.
func benchKeys(n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		var h [32]byte
		binary.LittleEndian.PutUint64(h[:], uint64(i)*0x9e3779b97f4a7c15)
		binary.LittleEndian.PutUint64(h[8:], uint64(i))
		ks[i] = l1.ObjectKey{ChunkHash: string(h[:]), Model: "llama-3.1-70b", KVRank: 3}
	}
	return ks
}

// BenchmarkEncodeKeys encodes a 5700-key delete, the keys block and
// nothing else, into a reused buffer: the client's per-key encoding cost
// (ns/key).
func BenchmarkEncodeKeys(b *testing.B) {
	keys := benchKeys(5700)
	var e wire.Encoder
	q := &wire.Request{Type: wire.TypeDelete, Keys: keys, ID: 1, Epoch: 1}
	buf, err := e.AppendRequest(nil, q)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = e.AppendRequest(buf[:0], q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(keys)), "ns/key")
}

// BenchmarkDecodeKeys decodes that frame with a borrowing decoder, as the
// daemon does: its per-key decoding cost (ns/key).
func BenchmarkDecodeKeys(b *testing.B) {
	keys := benchKeys(5700)
	var e wire.Encoder
	frame, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeDelete, Keys: keys, ID: 1, Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	d := wire.Decoder{Borrow: true}
	var q wire.Request
	b.ReportAllocs()
	for b.Loop() {
		if err := d.DecodeRequest(frame, &q); err != nil {
			b.Fatal(err)
		}
	}
	if len(q.Keys) != len(keys) || q.Keys[5699] != keys[5699] {
		b.Fatalf("decoded %d keys, last %v", len(q.Keys), q.Keys[len(q.Keys)-1])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(keys)), "ns/key")
}
