package l2

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// BenchmarkMACCost is the cost of the MAC per value of 8 MiB against the
// CRC32C pass it joins, each alone over bytes in memory and inside the
// codec's one pass (Encode, DecodeInto): l2/DESIGN.md quotes the ratios.
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
