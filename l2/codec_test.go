package l2

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

var testKey = l1.ObjectKey{ChunkHash: "\x00\x01hash\xff", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}

func TestCodecRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 1 << 20} {
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(i * 7)
		}
		v, err := Encode(nil, &testKey, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != PrefixLen(&testKey)+size {
			t.Fatalf("value of %d bytes for a payload of %d", len(v), size)
		}
		got, err := Decode(&testKey, v)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("size %d: %v", size, err)
		}
		h, err := DecodeHeader(&testKey, v[:PrefixLen(&testKey)])
		if err != nil || h.Size != int64(size) || h.CRC != Checksum(p) || h.Key != testKey {
			t.Fatalf("header %+v, %v", h, err)
		}
	}
}

// TestCodecRefusesEveryFlip: a flip of any bit of a value, header, key or
// payload, is ErrCorrupt.
func TestCodecRefusesEveryFlip(t *testing.T) {
	p := []byte("some kv bytes, enough to have a few words in them")
	v, _ := Encode(nil, &testKey, p)
	for i := range v {
		for bit := range 8 {
			w := bytes.Clone(v)
			w[i] ^= 1 << bit
			if _, err := Decode(&testKey, w); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip of byte %d bit %d: %v", i, bit, err)
			}
		}
	}
	for n := range v {
		if _, err := Decode(&testKey, v[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	if _, err := Decode(&testKey, append(bytes.Clone(v), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("one byte too many: %v", err)
	}
}

// TestCodecKeyMismatch: a value is refused for a key that differs in any
// field, even when the checksums are right for the value's own key.
func TestCodecKeyMismatch(t *testing.T) {
	v, _ := Encode(nil, &testKey, []byte("x"))
	for _, k := range otherKeys(testKey) {
		if _, err := Decode(&k, v); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v read %v's value: %v", k, testKey, err)
		}
	}
}

func otherKeys(k l1.ObjectKey) []l1.ObjectKey {
	var out []l1.ObjectKey
	for i := range 5 {
		o := k
		switch i {
		case 0:
			o.ChunkHash += "!"
		case 1:
			o.Model = "other"
		case 2:
			o.CacheSalt = ""
		case 3:
			o.KVRank++
		case 4:
			o.GroupID++
		}
		out = append(out, o)
	}
	return out
}

// TestStoreKeyDistinct: keys that differ in any field, or split the same
// bytes differently between fields, get different names.
func TestStoreKeyDistinct(t *testing.T) {
	keys := append(otherKeys(testKey), testKey,
		l1.ObjectKey{Model: "ab", CacheSalt: ""}, l1.ObjectKey{Model: "a", CacheSalt: "b"},
		l1.ObjectKey{Model: "a", ChunkHash: "b"}, l1.ObjectKey{CacheSalt: "a", ChunkHash: "b"})
	seen := map[string]l1.ObjectKey{}
	for _, k := range keys {
		n := StoreKey(DefaultPrefix, &k)
		if o, ok := seen[n]; ok {
			t.Fatalf("%v and %v share the name %q", o, k, n)
		}
		seen[n] = k
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var b [3]byte
		for i := range b {
			b[i] = byte(rng.IntN(3))
		}
		k := l1.ObjectKey{ChunkHash: string(b[:rng.IntN(2)]), Model: string(b[:rng.IntN(3)]), CacheSalt: string(b[1:][:rng.IntN(2)])}
		n := StoreKey("", &k)
		if o, ok := seen[n]; ok && o != k {
			t.Fatalf("%v and %v share a name", o, k)
		}
		seen[n] = k
	}
}

func TestEncodeRefusesLongFields(t *testing.T) {
	k := testKey
	k.Model = string(make([]byte, MaxKeyField+1))
	if _, err := Encode(nil, &k, nil); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("Encode: %v", err)
	}
}
