package fuzz

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// FuzzL2Value feeds any bytes to the L2 value decoder, as the value of
// the key its header names and of a key one field away, and checks that
// it never panics, that every refusal is l2.ErrCorrupt, and that whatever
// it accepts is exactly what l2.Encode makes of the key and the payload
// returned: so no changed byte (payload, header, key, length) is ever
// served. The seeds are valid values of several shapes and each with a
// payload byte, a header byte, a key byte or its length changed.
func FuzzL2Value(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkL2Value(data, l2.Decode); err != nil {
			t.Fatal(err)
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

// checkL2Value is FuzzL2Value's body, against decode (l2.Decode, or a
// broken one: internal/reference/mutant).
func checkL2Value(data []byte, decode func(*l1.ObjectKey, []byte) ([]byte, error)) error {
	k := claimedKey(data)
	other := k
	other.KVRank++
	for _, key := range []l1.ObjectKey{k, other} {
		v := bytes.Clone(data)
		p, err := decode(&key, v)
		if err != nil {
			if !l2.IsCorrupt(err) {
				return fmt.Errorf("refused with %v, not l2.ErrCorrupt", err)
			}
			continue
		}
		if key != k {
			return fmt.Errorf("a value of %v was accepted for %v", k, key)
		}
		want, err := l2.Encode(nil, &key, p)
		if err != nil {
			return fmt.Errorf("accepted a payload Encode refuses: %v", err)
		}
		if !bytes.Equal(want, data) {
			return fmt.Errorf("accepted a value that is not Encode's for its key and payload (payload checksum %#x, %d bytes)",
				l2.Checksum(p), len(p))
		}
	}
	return nil
}

func l2Seeds() []seed {
	var out []seed
	add := func(name string, v []byte) { out = append(out, seed{name, v}) }
	enc := func(k l1.ObjectKey, p []byte) []byte {
		v, err := l2.Encode(nil, &k, p)
		if err != nil {
			panic(err)
		}
		return v
	}
	k := l1.ObjectKey{ChunkHash: "\x00\x01\x02\x03chunk", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}
	p := bytes.Repeat([]byte("kv-bytes"), 64)
	v := enc(k, p)
	add("valid", v)
	add("valid-empty-payload", enc(k, nil))
	add("valid-empty-key", enc(l1.ObjectKey{}, []byte{1, 2, 3}))
	flip := func(name string, i int) {
		w := bytes.Clone(v)
		w[i] ^= 0x10
		add(name, w)
	}
	flip("bad-payload-byte", len(v)-7)
	flip("bad-magic", 1)
	flip("bad-version", 4)
	flip("bad-rank", 12)
	flip("bad-size", 24)
	flip("bad-key-byte", l2.HeaderSize+2)
	add("bad-truncated", v[:len(v)-1])
	add("bad-header-only", v[:l2.PrefixLen(&k)])
	return out
}

func init() { seedSets["FuzzL2Value"] = l2Seeds() }
