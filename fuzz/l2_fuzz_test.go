package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// fuzzSecret is the MAC secret of FuzzL2Value's authenticated codec: fixed,
// so that the committed seeds made with it stay valid.
var fuzzSecret = []byte("kvalloc FuzzL2Value's MAC secret, 32 bytes and more")

// fuzzCodecs are the codecs FuzzL2Value checks: without a secret, and with
// fuzzSecret.
func fuzzCodecs() []*l2.Codec {
	s, err := l2.NewSecret(fuzzSecret)
	if err != nil {
		panic(err)
	}
	c, err := l2.NewCodec(s)
	if err != nil {
		panic(err)
	}
	return []*l2.Codec{l2.Unauthenticated, c}
}

// FuzzL2Value feeds any bytes to the L2 value decoders, without a secret
// and with one, as the value of the key its header names and of a key one
// field away, and checks that they never panic, that every refusal is
// l2.ErrCorrupt, l2.ErrForged or l2.ErrForeign, and that whatever one
// accepts is exactly what its codec's Encode makes of the key and the
// payload returned: so no changed byte (payload, header, key, length,
// MAC) is ever served, and no value without the secret's MAC is served
// by the codec that holds it. The seeds are valid values of several
// shapes, each with a payload byte, a header byte, a key byte or its
// length changed, values of the codec with a secret whose payload was
// replaced with the checksums made right (a forgery), and a value of
// format version 1.
func FuzzL2Value(f *testing.F) {
	f.Add([]byte{})
	codecs := fuzzCodecs()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range codecs {
			if err := checkL2Value(data, c, c.Decode); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// claimedKey is the key a value's header names, read without any check
// (zero when the value is too short to name one).
func claimedKey(v []byte) l1.ObjectKey {
	if len(v) < l2.HeaderSize {
		return l1.ObjectKey{}
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	kb := v[l2.HeaderSize:]
	if len(kb) < hl+ml+sl {
		return l1.ObjectKey{}
	}
	return l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml : hl+ml+sl]),
		KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])}
}

// checkL2Value is FuzzL2Value's body for codec c, against decode (c's
// Decode, or a broken one: internal/reference/mutant).
func checkL2Value(data []byte, c *l2.Codec, decode func(*l1.ObjectKey, []byte) ([]byte, error)) error {
	k := claimedKey(data)
	other := k
	other.KVRank++
	for _, key := range []l1.ObjectKey{k, other} {
		v := bytes.Clone(data)
		p, err := decode(&key, v)
		if err != nil {
			if !errors.Is(err, l2.ErrCorrupt) && !errors.Is(err, l2.ErrForged) && !errors.Is(err, l2.ErrForeign) {
				return fmt.Errorf("refused with %v, not l2.ErrCorrupt, ErrForged or ErrForeign", err)
			}
			continue
		}
		if key != k {
			return fmt.Errorf("a value of %v was accepted for %v", k, key)
		}
		want, err := c.Encode(nil, &key, p)
		if err != nil {
			return fmt.Errorf("accepted a payload Encode refuses: %v", err)
		}
		if !bytes.Equal(want, data) {
			return fmt.Errorf("accepted a value that is not Encode's for its key and payload (key id %#x, payload checksum %#x, %d bytes)",
				c.KeyID(), l2.Checksum(p), len(p))
		}
	}
	return nil
}

// forgeL2 is v with its payload replaced by p and its size and both
// CRC32Cs made right, as anyone who knows the format can; the MACs are
// v's.
func forgeL2(v, p []byte) []byte {
	k := claimedKey(v)
	n := l2.PrefixLen(&k)
	le := binary.LittleEndian
	w := append(bytes.Clone(v[:n]), p...)
	le.PutUint64(w[24:], uint64(len(p)))
	le.PutUint32(w[32:], l2.Checksum(p))
	le.PutUint32(w[36:], crc32.Update(l2.Checksum(w[:36]), crc32.MakeTable(crc32.Castagnoli), w[40:n]))
	return w
}

func l2Seeds() []seed {
	var out []seed
	add := func(name string, v []byte) { out = append(out, seed{name, v}) }
	mac := fuzzCodecs()[1]
	enc := func(c *l2.Codec, k l1.ObjectKey, p []byte) []byte {
		v, err := c.Encode(nil, &k, p)
		if err != nil {
			panic(err)
		}
		return v
	}
	k := l1.ObjectKey{ChunkHash: "\x00\x01\x02\x03chunk", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}
	p := bytes.Repeat([]byte("kv-bytes"), 64)
	v := enc(l2.Unauthenticated, k, p)
	add("valid", v)
	add("valid-empty-payload", enc(l2.Unauthenticated, k, nil))
	add("valid-empty-key", enc(l2.Unauthenticated, l1.ObjectKey{}, []byte{1, 2, 3}))
	flip := func(name string, v []byte, i int) {
		w := bytes.Clone(v)
		w[i] ^= 0x10
		add(name, w)
	}
	flip("bad-payload-byte", v, len(v)-7)
	flip("bad-magic", v, 1)
	flip("bad-version", v, 4)
	flip("bad-rank", v, 12)
	flip("bad-size", v, 24)
	flip("bad-key-byte", v, l2.HeaderSize+2)
	add("bad-truncated", v[:len(v)-1])
	add("bad-header-only", v[:l2.PrefixLen(&k)])
	m := enc(mac, k, p)
	add("mac-valid", m)
	add("mac-valid-empty-payload", enc(mac, k, nil))
	flip("mac-bad-payload-byte", m, len(m)-7)
	flip("mac-bad-key-id", m, 21)
	flip("mac-bad-value-mac", m, 50)
	flip("mac-bad-header-mac", m, 90)
	add("mac-forged-payload", forgeL2(m, bytes.Repeat([]byte("forged!!"), 64)))
	add("mac-forged-longer", forgeL2(m, bytes.Repeat([]byte("forged!!"), 65)))
	add("unauthenticated-forged", forgeL2(v, bytes.Repeat([]byte("forged!!"), 64)))
	// Format version 1, as kvalloc wrote it before (a 40-byte header).
	v1 := make([]byte, 40)
	copy(v1, "KVL2")
	binary.LittleEndian.PutUint16(v1[4:], 1)
	binary.LittleEndian.PutUint16(v1[6:], 2)
	binary.LittleEndian.PutUint32(v1[20:], l2.Checksum([]byte("x")))
	binary.LittleEndian.PutUint64(v1[24:], 1)
	binary.LittleEndian.PutUint32(v1[32:], l2.Checksum(append(bytes.Clone(v1[:32]), "ab"...)))
	add("version-1", append(v1, "abx"...))
	return out
}

func init() { seedSets["FuzzL2Value"] = l2Seeds() }
