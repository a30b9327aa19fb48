package l2_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// onePiece is piece 1 of an object of 1000 bytes in pieces of 256, made
// by c: its header, key and payload.
func onePiece(t *testing.T, c *l2.Codec, k *l1.ObjectKey) []byte {
	t.Helper()
	p := bytes.Repeat([]byte{0x5a}, 256)
	h, err := c.AppendPieceHeader(nil, k, 1000, 256, 1, 42, p)
	if err != nil {
		t.Fatal(err)
	}
	return append(h, p...)
}

// TestPieceVersions: a piece under a MAC is version 5 with no payload
// CRC32C, and any change to its payload is refused by its MAC
// (ErrForged); without a MAC it carries the CRC32C, which refuses the
// change (ErrCorrupt). A version 4 piece, as its writers made it (the
// CRC32C under a MAC too), is read with and without a MAC; a piece of a
// version neither is foreign.
func TestPieceVersions(t *testing.T) {
	k := l1.ObjectKey{ChunkHash: "versions", Model: "m"}
	for _, c := range []struct {
		name    string
		codec   *l2.Codec
		changed error
	}{{"mac", macCodec(t, 1), l2.ErrForged}, {"nomac", l2.Unauthenticated, l2.ErrCorrupt}} {
		t.Run(c.name, func(t *testing.T) {
			v5 := onePiece(t, c.codec, &k)
			v4 := bytes.Clone(v5)
			if err := l2.PieceV4(c.codec, &k, v4); err != nil {
				t.Fatal(err)
			}
			n := l2.PiecePrefixLen(&k)
			crc := binary.LittleEndian.Uint32(v5[48:])
			if got := binary.LittleEndian.Uint16(v5[4:]); got != 5 {
				t.Fatalf("written as version %d", got)
			}
			if c.codec.Authenticated() != (crc == 0) || crc != 0 && crc != l2.Checksum(v5[n:]) {
				t.Fatalf("payload CRC32C field %#x (under a MAC: %v)", crc, c.codec.Authenticated())
			}
			for ver, v := range map[int][]byte{5: v5, 4: v4} {
				if err := l2.CheckPiece(c.codec, &k, v); err != nil {
					t.Fatalf("version %d: %v", ver, err)
				}
				for _, at := range []int{n, n + 100, len(v) - 1} {
					w := bytes.Clone(v)
					w[at] ^= 0x10
					if err := l2.CheckPiece(c.codec, &k, w); !errors.Is(err, c.changed) {
						t.Fatalf("version %d, payload byte %d changed: %v, want %v", ver, at-n, err, c.changed)
					}
				}
			}
			for _, ver := range []uint16{3, 6} {
				w := bytes.Clone(v5)
				binary.LittleEndian.PutUint16(w[4:], ver)
				if err := l2.CheckPiece(c.codec, &k, w); !errors.Is(err, l2.ErrForeign) {
					t.Fatalf("version %d: %v", ver, err)
				}
			}
		})
	}
}

// TestPiecesVersion4Load: on a real cluster, objects whose pieces a
// version 4 writer made (each piece rewritten in the store as version 4)
// load byte for byte through a tier of version 5, with and without a
// MAC: a rolling upgrade keeps the older daemons' values.
func TestPiecesVersion4Load(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	const size, piece = 20000, 4096 // 5 pieces
	ctx := context.Background()
	cl := c.Client()
	for _, codec := range []struct {
		name  string
		codec *l2.Codec
	}{{"mac", macCodec(t, 1)}, {"nomac", l2.Unauthenticated}} {
		t.Run(codec.name, func(t *testing.T) {
			tier := codecTier(t, c.URL(), piece, 10*time.Second, codec.codec)
			keys := keysN("v4-"+codec.name, 3)
			ps, _ := payloads(keys, size)
			if n := tier.PutPayloads(ctx, keys, ps); n != len(keys) {
				t.Fatalf("PutPayloads stored %d", n)
			}
			for i := range keys {
				for j := range l2.PieceCount(size, piece) {
					name := l2.PieceName("pieces:", &keys[i], j)
					v, err := cl.Get(ctx, name).Bytes()
					if err != nil {
						t.Fatal(err)
					}
					if err := l2.PieceV4(codec.codec, &keys[i], v); err != nil {
						t.Fatal(err)
					}
					if err := cl.Set(ctx, name, v, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			dst, ok := loadAll(tier, keys, size)
			for i := range keys {
				if !ok[i] || !bytes.Equal(dst[i], ps[i]) {
					t.Fatalf("object %d of version 4: loaded %v, equal %v (%+v)", i, ok[i], bytes.Equal(dst[i], ps[i]), tier.Stats())
				}
			}
		})
	}
}
