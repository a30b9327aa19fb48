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

// TestDecodeIntoRefusesEveryFlip: DecodeInto refuses what Decode refuses
// (every flip of a bit, every truncation, an extension) and loads what
// it accepts, over payloads of several of its chunks, a flip in each.
func TestDecodeIntoRefusesEveryFlip(t *testing.T) {
	p := make([]byte, 2*checkChunk+100)
	rand.NewChaCha8([32]byte{1}).Read(p)
	v, _ := Encode(nil, &testKey, p)
	dst := make([]byte, len(p))
	if err := DecodeInto(&testKey, v, dst); err != nil || !bytes.Equal(dst, p) {
		t.Fatalf("a good value: %v", err)
	}
	n := PrefixLen(&testKey)
	flips := []int{n, n + checkChunk - 1, n + checkChunk, n + 2*checkChunk, len(v) - 1}
	for i := range n {
		flips = append(flips, i)
	}
	for _, i := range flips {
		for bit := range 8 {
			w := bytes.Clone(v)
			w[i] ^= 1 << bit
			if err := DecodeInto(&testKey, w, dst); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip of byte %d bit %d: %v", i, bit, err)
			}
		}
	}
	for _, m := range []int{0, 1, HeaderSize, n, n + 1, len(v) - 1} {
		if err := DecodeInto(&testKey, v[:m], dst[:max(m-n, 0)]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", m, err)
		}
	}
	if err := DecodeInto(&testKey, append(bytes.Clone(v), 0), append(dst, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("one byte too many: %v", err)
	}
	if err := DecodeInto(&testKey, v, dst[:len(p)-1]); !errors.Is(err, ErrSize) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("room for one byte less: %v", err)
	}
	k := testKey
	k.KVRank++
	if err := DecodeInto(&k, v, dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("another key: %v", err)
	}
}

// TestEncodeIsEncodeSum: Encode's one-pass checksum is the payload's
// CRC32C, and its value is byte for byte EncodeSum's, at sizes around its
// chunks.
func TestEncodeIsEncodeSum(t *testing.T) {
	r := rand.NewChaCha8([32]byte{2})
	for _, size := range []int{0, 1, checkChunk - 1, checkChunk, checkChunk + 1, 3*checkChunk + 5} {
		p := make([]byte, size)
		r.Read(p)
		pre := []byte("already there")
		got, err := Encode(bytes.Clone(pre), &testKey, p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := EncodeSum(bytes.Clone(pre), &testKey, p, Checksum(p))
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d: Encode differs from EncodeSum", size)
		}
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
