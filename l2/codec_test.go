package l2

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

var testKey = l1.ObjectKey{ChunkHash: "\x00\x01hash\xff", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}

// testCodecs are the unauthenticated codec and one with a secret.
func testCodecs(t testing.TB) map[string]*Codec {
	return map[string]*Codec{"unauthenticated": Unauthenticated, "mac": testCodec(t, 1)}
}

// testSecret is a secret of 32 bytes made of seed.
func testSecret(t testing.TB, seed byte) *Secret {
	b := make([]byte, MinSecret)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	s, err := NewSecret(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCodec(t testing.TB, seed byte, old ...*Secret) *Codec {
	c, err := NewCodec(testSecret(t, seed), old...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCodecRoundTrip(t *testing.T) {
	for name, c := range testCodecs(t) {
		for _, size := range []int{0, 1, 4095, 1 << 20} {
			p := make([]byte, size)
			for i := range p {
				p[i] = byte(i * 7)
			}
			v, err := c.Encode(nil, &testKey, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) != PrefixLen(&testKey)+size {
				t.Fatalf("value of %d bytes for a payload of %d", len(v), size)
			}
			got, err := c.Decode(&testKey, v)
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("%s, size %d: %v", name, size, err)
			}
			h, err := c.DecodeHeader(&testKey, v[:PrefixLen(&testKey)])
			if err != nil || h.Size != int64(size) || h.CRC != Checksum(p) || h.Key != testKey || h.KeyID != c.KeyID() {
				t.Fatalf("%s: header %+v, %v", name, h, err)
			}
		}
	}
}

// refusal is nil when err refuses a value as the codec must refuse a
// changed one: ErrCorrupt, ErrForged, or ErrForeign for a change of the
// version (off 4, 5) or the key id (off 20 to 23).
func refusal(err error, off int) error {
	switch {
	case err == nil:
		return errors.New("accepted")
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrForged):
		return nil
	case errors.Is(err, ErrForeign) && (off == 4 || off == 5 || off >= offKeyID && off < offKeyID+4):
		return nil
	}
	return err
}

// TestCodecRefusesEveryFlip: a flip of any bit of a value, header, key or
// payload, is refused, with and without a MAC; so is every truncation
// and an extension.
func TestCodecRefusesEveryFlip(t *testing.T) {
	p := []byte("some kv bytes, enough to have a few words in them")
	for name, c := range testCodecs(t) {
		v, _ := c.Encode(nil, &testKey, p)
		for i := range v {
			for bit := range 8 {
				w := bytes.Clone(v)
				w[i] ^= 1 << bit
				if _, err := c.Decode(&testKey, w); refusal(err, i) != nil {
					t.Fatalf("%s: flip of byte %d bit %d: %v", name, i, bit, refusal(err, i))
				}
			}
		}
		for n := range v {
			if _, err := c.Decode(&testKey, v[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: truncated to %d bytes: %v", name, n, err)
			}
		}
		if _, err := c.Decode(&testKey, append(bytes.Clone(v), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: one byte too many: %v", name, err)
		}
	}
}

// TestDecodeIntoRefusesEveryFlip: DecodeInto refuses what Decode refuses
// (every flip of a bit, every truncation, an extension) and loads what
// it accepts, over payloads of several of its chunks, a flip in each.
func TestDecodeIntoRefusesEveryFlip(t *testing.T) {
	p := make([]byte, 2*checkChunk+100)
	rand.NewChaCha8([32]byte{1}).Read(p)
	for name, c := range testCodecs(t) {
		v, _ := c.Encode(nil, &testKey, p)
		dst := make([]byte, len(p))
		if err := c.DecodeInto(&testKey, v, dst); err != nil || !bytes.Equal(dst, p) {
			t.Fatalf("%s: a good value: %v", name, err)
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
				if err := c.DecodeInto(&testKey, w, dst); refusal(err, i) != nil {
					t.Fatalf("%s: flip of byte %d bit %d: %v", name, i, bit, refusal(err, i))
				}
			}
		}
		for _, m := range []int{0, 1, HeaderSize, n, n + 1, len(v) - 1} {
			if err := c.DecodeInto(&testKey, v[:m], dst[:max(m-n, 0)]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: truncated to %d bytes: %v", name, m, err)
			}
		}
		if err := c.DecodeInto(&testKey, append(bytes.Clone(v), 0), append(dst, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: one byte too many: %v", name, err)
		}
		if err := c.DecodeInto(&testKey, v, dst[:len(p)-1]); !errors.Is(err, ErrSize) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: room for one byte less: %v", name, err)
		}
		k := testKey
		k.KVRank++
		if err := c.DecodeInto(&k, v, dst); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: another key: %v", name, err)
		}
	}
}

// refEncode is the value format of codec.go's table, written out field
// by field and pass by pass (the CRC32Cs and MACs each over its own
// bytes), with the derived keys of the secret b (nil: no MAC).
func refEncode(k *l1.ObjectKey, p, b []byte) []byte {
	le := binary.LittleEndian
	kb := []byte(k.ChunkHash + k.Model + k.CacheSalt)
	h := make([]byte, 104)
	copy(h, "KVL2")
	le.PutUint16(h[4:], 2)
	le.PutUint16(h[6:], uint16(len(k.ChunkHash)))
	le.PutUint16(h[8:], uint16(len(k.Model)))
	le.PutUint16(h[10:], uint16(len(k.CacheSalt)))
	le.PutUint32(h[12:], k.KVRank)
	le.PutUint32(h[16:], k.GroupID)
	le.PutUint64(h[24:], uint64(len(p)))
	le.PutUint32(h[32:], crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	derive := func(label string) []byte {
		d := hmac.New(sha256.New, b)
		d.Write([]byte(label))
		return d.Sum(nil)
	}
	mac := func(label string, parts ...[]byte) []byte {
		m := hmac.New(sha256.New, derive(label))
		for _, x := range parts {
			m.Write(x)
		}
		return m.Sum(nil)
	}
	if b != nil {
		id := le.Uint32(derive("kvl2 key id"))
		if id == 0 {
			id = 1
		}
		le.PutUint32(h[20:], id)
		copy(h[40:], mac("kvl2 value mac", h[:32], kb, p))
		copy(h[72:], mac("kvl2 header mac", h[:36], h[40:72], kb))
	}
	hc := append(append(append([]byte{}, h[:36]...), h[40:]...), kb...)
	le.PutUint32(h[36:], crc32.Checksum(hc, crc32.MakeTable(crc32.Castagnoli)))
	return append(append(h, kb...), p...)
}

// TestEncodeIsTheFormat: Encode's one pass (the copy, the CRC32C and the
// MAC a chunk at a time) makes byte for byte the format of codec.go's
// table, appended to what dst held, at sizes around its chunks.
func TestEncodeIsTheFormat(t *testing.T) {
	r := rand.NewChaCha8([32]byte{2})
	secret := make([]byte, 40)
	r.Read(secret)
	s, _ := NewSecret(secret)
	mac, _ := NewCodec(s)
	for _, size := range []int{0, 1, checkChunk - 1, checkChunk, checkChunk + 1, 3*checkChunk + 5} {
		p := make([]byte, size)
		r.Read(p)
		for _, c := range []struct {
			codec  *Codec
			secret []byte
		}{{Unauthenticated, nil}, {mac, secret}} {
			pre := []byte("already there")
			got, err := c.codec.Encode(bytes.Clone(pre), &testKey, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := append(bytes.Clone(pre), refEncode(&testKey, p, c.secret)...); !bytes.Equal(got, want) {
				t.Fatalf("size %d, MAC %v: Encode differs from the format", size, c.secret != nil)
			}
		}
	}
}

// TestForgedValueRefused: a value a forger made, who knows the format and
// the key but not the secret, is ErrForged (its checksums right, its MAC
// not: Head's DecodeHeader refuses it too), whether the forger copies an
// authentic value's key id or not; under a key id the reader holds no
// secret of, or without a MAC, it is ErrForeign; never accepted.
func TestForgedValueRefused(t *testing.T) {
	c := testCodec(t, 1)
	p := []byte("the engine's kv bytes")
	evil := []byte("the forger's bytes!!!")
	good, _ := c.Encode(nil, &testKey, p)
	// The forger's value: the format, the authentic key id, its payload,
	// the MACs copied from the authentic value, the checksums made right.
	forge := func(v []byte, payload []byte) []byte {
		w := append(bytes.Clone(v[:PrefixLen(&testKey)]), payload...)
		binary.LittleEndian.PutUint64(w[offSize:], uint64(len(payload)))
		binary.LittleEndian.PutUint32(w[offCRC:], Checksum(payload))
		binary.LittleEndian.PutUint32(w[offHeaderCRC:], headerCRC(w, PrefixLen(&testKey)))
		return w
	}
	f := forge(good, evil)
	if _, err := c.Decode(&testKey, f); !errors.Is(err, ErrForged) {
		t.Fatalf("a forged payload under the authentic key id: %v", err)
	}
	if _, err := c.DecodeHeader(&testKey, f[:PrefixLen(&testKey)]); !errors.Is(err, ErrForged) {
		t.Fatalf("its header: %v", err)
	}
	// The same payload, the header MAC left right: the value MAC refuses.
	w := bytes.Clone(good)
	copy(w[PrefixLen(&testKey):], "THE")
	binary.LittleEndian.PutUint32(w[offCRC:], Checksum(w[PrefixLen(&testKey):]))
	binary.LittleEndian.PutUint32(w[offHeaderCRC:], headerCRC(w, PrefixLen(&testKey)))
	if _, err := c.Decode(&testKey, w); err == nil {
		t.Fatal("a changed payload with its checksums made right was accepted")
	}
	plain, _ := Encode(nil, &testKey, evil)
	other, _ := testCodec(t, 9).Encode(nil, &testKey, evil)
	for name, v := range map[string][]byte{"without a MAC": plain, "under another secret": other} {
		if _, err := c.Decode(&testKey, v); !errors.Is(err, ErrForeign) {
			t.Fatalf("a value %s: %v", name, err)
		}
	}
	if _, err := Decode(&testKey, good); !errors.Is(err, ErrForeign) {
		t.Fatalf("the unauthenticated codec read a value with a MAC: %v", err)
	}
	// The deliberate bug skips the MACs: the forgery passes.
	bug := *c
	bug.skipMAC = true
	if got, err := bug.Decode(&testKey, f); err != nil || !bytes.Equal(got, evil) {
		t.Fatalf("the codec without its MAC check: %q, %v", got, err)
	}
}

// TestCodecRotation: a codec that writes with a new secret reads the old
// secret's values too; one with the old secret alone does not read the
// new one's (ErrForeign, left alone), and two secrets of one id are
// refused.
func TestCodecRotation(t *testing.T) {
	old, cur := testSecret(t, 1), testSecret(t, 2)
	if old.ID() == cur.ID() || old.ID() == 0 || cur.ID() == 0 {
		t.Fatalf("ids %#x, %#x", old.ID(), cur.ID())
	}
	oc, _ := NewCodec(old)
	nc, err := NewCodec(cur, old)
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("kv")
	ov, _ := oc.Encode(nil, &testKey, p)
	nv, _ := nc.Encode(nil, &testKey, p)
	if nc.KeyID() != cur.ID() || binary.LittleEndian.Uint32(nv[offKeyID:]) != cur.ID() {
		t.Fatalf("the new codec writes key id %#x", binary.LittleEndian.Uint32(nv[offKeyID:]))
	}
	for name, v := range map[string][]byte{"old": ov, "new": nv} {
		if got, err := nc.Decode(&testKey, v); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("the rotated codec on the %s secret's value: %v", name, err)
		}
	}
	if _, err := oc.Decode(&testKey, nv); !errors.Is(err, ErrForeign) {
		t.Fatalf("the old codec on the new secret's value: %v", err)
	}
	if _, err := NewCodec(cur, testSecret(t, 2)); err == nil {
		t.Fatal("two secrets of one id accepted")
	}
	if _, err := NewSecret(make([]byte, MinSecret-1)); err == nil {
		t.Fatal("a short secret accepted")
	}
}

// TestCodecOtherVersionsForeign: a value of format version 1 (what
// kvalloc wrote before: a 40-byte header, no MAC) or of any version but
// this one is ErrForeign, never ErrCorrupt, so that a tier leaves it to
// the nodes that read it; an empty value is ErrCorrupt.
func TestCodecOtherVersionsForeign(t *testing.T) {
	// Version 1 of testKey with payload "x", as version 1's Encode made it.
	le := binary.LittleEndian
	kb := testKey.ChunkHash + testKey.Model + testKey.CacheSalt
	v1 := make([]byte, 40)
	copy(v1, "KVL2")
	le.PutUint16(v1[4:], 1)
	le.PutUint16(v1[6:], uint16(len(testKey.ChunkHash)))
	le.PutUint16(v1[8:], uint16(len(testKey.Model)))
	le.PutUint16(v1[10:], uint16(len(testKey.CacheSalt)))
	le.PutUint32(v1[12:], testKey.KVRank)
	le.PutUint32(v1[16:], testKey.GroupID)
	le.PutUint32(v1[20:], Checksum([]byte("x")))
	le.PutUint64(v1[24:], 1)
	le.PutUint32(v1[32:], crc32.Update(Checksum(v1[:32]), castagnoli, []byte(kb)))
	v1 = append(append(v1, kb...), 'x')
	v3, _ := Encode(nil, &testKey, []byte("x"))
	le.PutUint16(v3[4:], 3)
	for name, c := range testCodecs(t) {
		for _, v := range [][]byte{v1, v3} {
			if _, err := c.Decode(&testKey, v); !errors.Is(err, ErrForeign) {
				t.Fatalf("%s: version %d: %v", name, le.Uint16(v[4:]), err)
			}
			if _, err := c.DecodeHeader(&testKey, v[:min(len(v), PrefixLen(&testKey))]); !errors.Is(err, ErrForeign) {
				t.Fatalf("%s: version %d's header: %v", name, le.Uint16(v[4:]), err)
			}
		}
		if _, err := c.Decode(&testKey, []byte{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: an empty value: %v", name, err)
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
