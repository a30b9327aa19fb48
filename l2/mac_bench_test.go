package l2

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// BenchmarkMACCost is the cost of the MAC per value of 8 MiB against the
// CRC32C pass it joins, each alone over bytes in memory (HMAC-SHA-256,
// the whole values' MAC; AES-256-GMAC, the pieces'), inside the codec's
// one pass (Encode, DecodeInto), and over every piece's header of an
// object in pieces: l2/DESIGN.md quotes the ratios.
func BenchmarkMACCost(b *testing.B) {
	const size = 8 << 20
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(i * 31)
	}
	mac := testCodec(b, 1)
	dst := make([]byte, size)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"crc32c", func() { Checksum(p) }},
		{"hmac-sha256", func() {
			m := hmac.New(sha256.New, p[:32])
			m.Write(p)
			m.Sum(nil)
		}},
		{"gmac-aes256", func() {
			blk, _ := aes.NewCipher(p[:32])
			g, _ := cipher.NewGCMWithRandomNonce(blk)
			g.Seal(nil, nil, nil, p)
		}},
		// The piece path's header and MAC of every piece of an 8 MiB
		// object in pieces of 256 KiB: without a secret the CRC32C, with
		// one the piece MAC alone (a GMAC under a key of its own since
		// version 4, without the CRC32C since version 5).
		{"pieces/unauthenticated", func() { pieceHeaders(Unauthenticated, p) }},
		{"pieces/mac", func() { pieceHeaders(mac, p) }},
		{"encode/unauthenticated", func() { Encode(dst[:0:0], &testKey, p) }},
		{"encode/mac", func() { mac.Encode(dst[:0:0], &testKey, p) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				c.f()
			}
		})
	}
	plain, _ := Encode(nil, &testKey, p)
	authed, _ := mac.Encode(nil, &testKey, p)
	for _, c := range []struct {
		name  string
		codec *Codec
		v     []byte
	}{{"decodeinto/unauthenticated", Unauthenticated, plain}, {"decodeinto/mac", mac, authed}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := c.codec.DecodeInto(&testKey, c.v, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// pieceHeaders makes the header of every piece of p in pieces of
// DefaultPieceSize.
func pieceHeaders(c *Codec, p []byte) {
	var h []byte
	size := int64(len(p))
	for i := range PieceCount(size, DefaultPieceSize) {
		off, end := pieceSpan(size, DefaultPieceSize, i)
		h, _ = c.AppendPieceHeader(h[:0], &testKey, size, DefaultPieceSize, i, 7, p[off:end])
	}
}
