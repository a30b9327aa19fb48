package l2

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// The value format, version 2: a 104-byte header, the key's bytes, the
// payload. Little-endian.
//
//	offset size field
//	0      4    magic "KVL2"
//	4      2    version (2)
//	6      2    chunk hash length
//	8      2    model length
//	10     2    cache salt length
//	12     4    KV rank
//	16     4    group id
//	20     4    MAC key id (Secret.ID; 0: no MAC)
//	24     8    payload size
//	32     4    CRC32C (Castagnoli) of the payload
//	36     4    CRC32C of bytes [0, 36), bytes [40, 104) and the key
//	40     32   value MAC: HMAC-SHA-256 of bytes [0, 32), the key and the
//	            payload, under the value key derived from the secret
//	72     32   header MAC: HMAC-SHA-256 of bytes [0, 36), bytes [40, 72)
//	            and the key, under the header key derived from the secret
//	104    n    chunk hash, model, cache salt
//	104+n  size payload
//
// Without a secret (key id 0) both MACs are zero. The header MAC lets a
// reader judge a value by its first PrefixLen bytes (Head), and covers
// the value MAC, which covers the payload: a header that passes its MAC
// names the only payload the value may carry. The checksums tell a value
// damaged in the store (ErrCorrupt) from one whose checksums are right
// and whose MACs are not (ErrForged: written by someone without the
// secret).
const (
	// Magic opens every value.
	Magic = "KVL2"
	// Version is the value format's version. Version 1 (a 40-byte header,
	// no MACs) is what kvalloc wrote before: a value of it, or of any
	// other version, is ErrForeign.
	Version = 2
	// HeaderSize is the fixed part of a value's header.
	HeaderSize = 104
	// MaxKeyField is the longest chunk hash, model or salt a value holds.
	MaxKeyField = math.MaxUint16
)

// The fields' offsets.
const (
	offKeyID     = 20
	offSize      = 24
	offCRC       = 32
	offHeaderCRC = 36
	offValueMAC  = 40
	offHeaderMAC = 72
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by the refusals of a value that is damaged or is
// not this key's: a bad magic, length, key, size or checksum, or a
// truncated value.
var ErrCorrupt = errors.New("l2: corrupt value")

// ErrForged is wrapped by the refusal of a value whose checksums are
// right and whose MAC, under a secret the codec holds, is not: a value
// written by someone without the secret.
var ErrForged = errors.New("l2: value fails its MAC")

// ErrForeign is wrapped by the refusal of a value this codec cannot judge:
// of another format version, or authenticated by a secret it does not
// hold, or without a MAC where one is required (or with one where none
// is). Such a value is a miss and is not this node's to delete: another
// node, of another version or with other secrets, may use it.
var ErrForeign = errors.New("l2: value of another version or MAC key")

// ErrSize is returned by DecodeInto for a valid value whose payload is not
// the destination's length: not corrupt, but not the object the caller
// made room for (another node may have stored another size since).
var ErrSize = errors.New("l2: value of another size")

// ErrKeyTooLong is returned by Encode for a key field over MaxKeyField.
var ErrKeyTooLong = errors.New("l2: key field too long")

// Header is a value's decoded header.
type Header struct {
	Key   l1.ObjectKey
	Size  int64  // the payload's size
	CRC   uint32 // the payload's CRC32C
	KeyID uint32 // the MAC's key id; 0 without a MAC
	// MAC is the value MAC (zero without one): HMAC-SHA-256 of the
	// header's first 32 bytes, the key and the payload.
	MAC [MACSize]byte
}

// keyLen is the bytes of k's fields in a value.
func keyLen(k *l1.ObjectKey) int { return len(k.ChunkHash) + len(k.Model) + len(k.CacheSalt) }

// PrefixLen is the length of the header and key of k's value: the bytes
// DecodeHeader needs.
func PrefixLen(k *l1.ObjectKey) int { return HeaderSize + keyLen(k) }

// Checksum is the CRC32C of p.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// Encode appends k's value with payload p, without a MAC, to dst
// (Unauthenticated.Encode).
func Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error) {
	return Unauthenticated.Encode(dst, k, p)
}

// DecodeHeader is Unauthenticated.DecodeHeader.
func DecodeHeader(k *l1.ObjectKey, v []byte) (Header, error) {
	return Unauthenticated.DecodeHeader(k, v)
}

// Decode is Unauthenticated.Decode.
func Decode(k *l1.ObjectKey, v []byte) ([]byte, error) { return Unauthenticated.Decode(k, v) }

// DecodeInto is Unauthenticated.DecodeInto.
func DecodeInto(k *l1.ObjectKey, v, dst []byte) error {
	return Unauthenticated.DecodeInto(k, v, dst)
}

// headerCRC is the header checksum of v, whose header and key are v[:n].
func headerCRC(v []byte, n int) uint32 {
	return crc32.Update(Checksum(v[:offHeaderCRC]), castagnoli, v[offValueMAC:n])
}

// headerMAC writes the header MAC of v (header and key v[:n]) into out.
func (s *Secret) headerMAC(v []byte, n int, out []byte) {
	m := s.get(&s.header)
	m.h.Write(v[:offHeaderCRC])
	m.h.Write(v[offValueMAC:offHeaderMAC])
	m.h.Write(v[HeaderSize:n])
	copy(out, m.h.Sum(m.sum[:0]))
	s.header.Put(m)
}

// Encode appends k's value with payload p to dst, with c's MACs. The
// payload's CRC32C and value MAC are computed as p is copied into the
// value, a chunk at a time from the copy while it is in the core's cache:
// one pass over p's memory.
func (c *Codec) Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error) {
	if len(k.ChunkHash) > MaxKeyField || len(k.Model) > MaxKeyField || len(k.CacheSalt) > MaxKeyField {
		return dst, fmt.Errorf("%w: %d, %d and %d bytes (at most %d each)", ErrKeyTooLong,
			len(k.ChunkHash), len(k.Model), len(k.CacheSalt), MaxKeyField)
	}
	start, n := len(dst), PrefixLen(k)
	dst = slices.Grow(dst, n+len(p))[:start+n+len(p)]
	v := dst[start:]
	clear(v[:HeaderSize])
	copy(v[0:], Magic)
	binary.LittleEndian.PutUint16(v[4:], Version)
	binary.LittleEndian.PutUint16(v[6:], uint16(len(k.ChunkHash)))
	binary.LittleEndian.PutUint16(v[8:], uint16(len(k.Model)))
	binary.LittleEndian.PutUint16(v[10:], uint16(len(k.CacheSalt)))
	binary.LittleEndian.PutUint32(v[12:], k.KVRank)
	binary.LittleEndian.PutUint32(v[16:], k.GroupID)
	binary.LittleEndian.PutUint32(v[offKeyID:], c.KeyID())
	binary.LittleEndian.PutUint64(v[offSize:], uint64(len(p)))
	kb := v[HeaderSize:n]
	copy(kb, k.ChunkHash)
	copy(kb[len(k.ChunkHash):], k.Model)
	copy(kb[len(k.ChunkHash)+len(k.Model):], k.CacheSalt)
	var vm *macHash
	if s := c.write; s != nil {
		vm = s.get(&s.value)
		vm.h.Write(v[:offCRC])
		vm.h.Write(kb)
	}
	binary.LittleEndian.PutUint32(v[offCRC:], copySum(v[n:], p, vm))
	if s := c.write; s != nil {
		copy(v[offValueMAC:], vm.h.Sum(vm.sum[:0]))
		s.value.Put(vm)
		s.headerMAC(v, n, v[offHeaderMAC:HeaderSize])
	}
	binary.LittleEndian.PutUint32(v[offHeaderCRC:], headerCRC(v, n))
	return dst, nil
}

// checkChunk is the piece of a payload that Encode and DecodeInto copy
// and then checksum while it is still in the core's cache: one pass over
// memory instead of two (a copy, then a CRC32C of the whole), about the
// cost of a plain copy plus the checksum's arithmetic.
const checkChunk = 256 << 10

// copySum copies src into dst (len(dst) == len(src)) a chunk at a time,
// computing the CRC32C of each chunk from dst right after its copy, and
// adding it to m when m is not nil; it returns the CRC32C of the whole.
// With dst nil it copies nothing and sums src.
func copySum(dst, src []byte, m *macHash) uint32 {
	var sum uint32
	for off := 0; off < len(src); off += checkChunk {
		end := min(off+checkChunk, len(src))
		b := src[off:end]
		if dst != nil {
			copy(dst[off:end], b)
			b = dst[off:end]
		}
		sum = crc32.Update(sum, castagnoli, b)
		if m != nil {
			m.h.Write(b)
		}
	}
	return sum
}

// DecodeHeader checks the header and key at the start of v (PrefixLen(k)
// bytes at least; v may be the whole value or only its prefix) against k,
// and its header MAC, and returns the header. A damaged value or another
// key's is ErrCorrupt; a header MAC that fails is ErrForged; a value of
// another version or key id is ErrForeign.
func (c *Codec) DecodeHeader(k *l1.ObjectKey, v []byte) (Header, error) {
	if len(v) < 6 {
		return Header{}, fmt.Errorf("%w: %d bytes, under the %d of a header", ErrCorrupt, len(v), HeaderSize)
	}
	if string(v[:4]) != Magic {
		return Header{}, fmt.Errorf("%w: magic %q", ErrCorrupt, v[:4])
	}
	if ver := binary.LittleEndian.Uint16(v[4:]); ver != Version {
		return Header{}, fmt.Errorf("%w: format version %d, this node's is %d", ErrForeign, ver, Version)
	}
	if len(v) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, under the %d of a header", ErrCorrupt, len(v), HeaderSize)
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	n := HeaderSize + hl + ml + sl
	if len(v) < n {
		return Header{}, fmt.Errorf("%w: %d bytes, under the %d of header and key", ErrCorrupt, len(v), n)
	}
	if got, want := headerCRC(v, n), binary.LittleEndian.Uint32(v[offHeaderCRC:]); got != want {
		return Header{}, fmt.Errorf("%w: header checksum %#x, the header says %#x", ErrCorrupt, got, want)
	}
	kb := v[HeaderSize:n]
	h := Header{
		Key: l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml:]),
			KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])},
		CRC:   binary.LittleEndian.Uint32(v[offCRC:]),
		KeyID: binary.LittleEndian.Uint32(v[offKeyID:]),
	}
	copy(h.MAC[:], v[offValueMAC:])
	size := binary.LittleEndian.Uint64(v[offSize:])
	if size > math.MaxInt64-uint64(n) {
		return Header{}, fmt.Errorf("%w: payload size %d", ErrCorrupt, size)
	}
	h.Size = int64(size)
	if h.Key != *k {
		return Header{}, fmt.Errorf("%w: the value is %v's, not %v's", ErrCorrupt, h.Key, *k)
	}
	switch {
	case h.KeyID == 0 && c.write != nil:
		return Header{}, fmt.Errorf("%w: a value without a MAC; this node requires one", ErrForeign)
	case h.KeyID == 0:
		for _, b := range v[offValueMAC:HeaderSize] {
			if b != 0 {
				return Header{}, fmt.Errorf("%w: MAC bytes in a value of key id 0", ErrCorrupt)
			}
		}
	default:
		s := c.secret(h.KeyID)
		if s == nil {
			return Header{}, fmt.Errorf("%w: MAC key id %#x, a secret this node does not hold", ErrForeign, h.KeyID)
		}
		var mac [MACSize]byte
		s.headerMAC(v, n, mac[:])
		if !c.skipMAC && !hmac.Equal(mac[:], v[offHeaderMAC:HeaderSize]) {
			return Header{}, fmt.Errorf("%w: header MAC under key id %#x", ErrForged, h.KeyID)
		}
	}
	return h, nil
}

// checkPayload checks the payload p of the value v whose header is h:
// its CRC32C and, with a MAC, its value MAC, in one pass over p, copying
// it into dst on the way when dst is not nil.
func (c *Codec) checkPayload(h *Header, v, p, dst []byte, n int) error {
	var vm *macHash
	var s *Secret
	if h.KeyID != 0 {
		s = c.secret(h.KeyID) // not nil: DecodeHeader checked
		vm = s.get(&s.value)
		vm.h.Write(v[:offCRC])
		vm.h.Write(v[HeaderSize:n])
		defer s.value.Put(vm)
	}
	if got := copySum(dst, p, vm); got != h.CRC {
		return fmt.Errorf("%w: payload checksum %#x, the header says %#x", ErrCorrupt, got, h.CRC)
	}
	if vm != nil && !c.skipMAC && !hmac.Equal(vm.h.Sum(vm.sum[:0]), h.MAC[:]) {
		return fmt.Errorf("%w: value MAC under key id %#x", ErrForged, h.KeyID)
	}
	return nil
}

// Decode checks v, a whole value, against k: its header (DecodeHeader),
// its length, its payload's checksum and its value MAC. It returns the
// payload, which aliases v. Refusals are as DecodeHeader's.
func (c *Codec) Decode(k *l1.ObjectKey, v []byte) ([]byte, error) {
	h, err := c.DecodeHeader(k, v)
	if err != nil {
		return nil, err
	}
	n := PrefixLen(k)
	if int64(len(v)-n) != h.Size {
		return nil, fmt.Errorf("%w: payload of %d bytes, the header says %d", ErrCorrupt, len(v)-n, h.Size)
	}
	if err := c.checkPayload(&h, v, v[n:], nil, n); err != nil {
		return nil, err
	}
	return v[n:], nil
}

// DecodeInto is Decode that copies the payload into dst, which must be
// exactly the payload's length, checking its CRC32C and MAC as it copies
// (one pass over v). It returns nil only when v passed every check Decode
// makes; then dst holds the payload. On a refusal (Decode's, or ErrSize
// for a valid value of another length than dst, left in dst untouched)
// dst may hold some of v's bytes, which the caller must not serve.
func (c *Codec) DecodeInto(k *l1.ObjectKey, v, dst []byte) error {
	h, err := c.DecodeHeader(k, v)
	if err != nil {
		return err
	}
	n := PrefixLen(k)
	if int64(len(v)-n) != h.Size {
		return fmt.Errorf("%w: payload of %d bytes, the header says %d", ErrCorrupt, len(v)-n, h.Size)
	}
	if h.Size != int64(len(dst)) {
		return fmt.Errorf("%w: payload of %d bytes, room for %d", ErrSize, h.Size, len(dst))
	}
	return c.checkPayload(&h, v, v[n:], dst, n)
}

// StoreKey is the store's name for k's value: a prefix, then every field
// of k, length-prefixed, so that two keys that differ in any field never
// share a name.
func StoreKey(prefix string, k *l1.ObjectKey) string {
	b := make([]byte, 0, len(prefix)+keyLen(k)+20)
	b = append(b, prefix...)
	b = binary.AppendUvarint(b, uint64(len(k.Model)))
	b = append(b, k.Model...)
	b = binary.AppendUvarint(b, uint64(len(k.CacheSalt)))
	b = append(b, k.CacheSalt...)
	b = binary.LittleEndian.AppendUint32(b, k.KVRank)
	b = binary.LittleEndian.AppendUint32(b, k.GroupID)
	b = append(b, k.ChunkHash...)
	return string(b)
}
