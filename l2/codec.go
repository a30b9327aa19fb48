package l2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// The value format, version 1: a 40-byte header, the key's bytes, the
// payload. Little-endian.
//
//	offset size field
//	0      4    magic "KVL2"
//	4      2    version (1)
//	6      2    chunk hash length
//	8      2    model length
//	10     2    cache salt length
//	12     4    KV rank
//	16     4    group id
//	20     4    CRC32C (Castagnoli) of the payload
//	24     8    payload size
//	32     4    CRC32C of bytes [0, 32) and the key's bytes
//	36     4    reserved, 0
//	40     n    chunk hash, model, cache salt
//	40+n   size payload
const (
	// Magic opens every value.
	Magic = "KVL2"
	// Version is the value format's version.
	Version = 1
	// HeaderSize is the fixed part of a value's header.
	HeaderSize = 40
	// MaxKeyField is the longest chunk hash, model or salt a value holds.
	MaxKeyField = math.MaxUint16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every refusal of Decode and DecodeHeader: the
// value is not one Encode made for the key (a bad magic, version, key,
// size or checksum, or a truncated value).
var ErrCorrupt = errors.New("l2: corrupt value")

// ErrSize is returned by DecodeInto for a valid value whose payload is not
// the destination's length: not corrupt, but not the object the caller
// made room for (another node may have stored another size since).
var ErrSize = errors.New("l2: value of another size")

// ErrKeyTooLong is returned by Encode for a key field over MaxKeyField.
var ErrKeyTooLong = errors.New("l2: key field too long")

// Header is a value's decoded header.
type Header struct {
	Key  l1.ObjectKey
	Size int64  // the payload's size
	CRC  uint32 // the payload's CRC32C
}

// keyLen is the bytes of k's fields in a value.
func keyLen(k *l1.ObjectKey) int { return len(k.ChunkHash) + len(k.Model) + len(k.CacheSalt) }

// PrefixLen is the length of the header and key of k's value: the bytes
// DecodeHeader needs.
func PrefixLen(k *l1.ObjectKey) int { return HeaderSize + keyLen(k) }

// Checksum is the CRC32C of p.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// Encode appends k's value with payload p to dst. The payload's CRC32C
// is computed as p is copied into the value, a chunk at a time from the
// copy while it is in the core's cache: one pass over p's memory.
func Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, PrefixLen(k)+len(p))
	// The header and key with the checksums of an empty payload, then the
	// payload; the size and both checksums are set once its CRC is known.
	dst, err := EncodeSum(dst, k, nil, 0)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst)
	dst = dst[:n+len(p)]
	binary.LittleEndian.PutUint32(dst[start+20:], copySum(dst[n:], p))
	binary.LittleEndian.PutUint64(dst[start+24:], uint64(len(p)))
	binary.LittleEndian.PutUint32(dst[start+32:], crc32.Update(Checksum(dst[start:start+32]), castagnoli, dst[start+HeaderSize:n]))
	return dst, nil
}

// checkChunk is the piece of a payload that Encode and DecodeInto copy
// and then checksum while it is still in the core's cache: one pass over
// memory instead of two (a copy, then a CRC32C of the whole), about the
// cost of a plain copy plus the checksum's arithmetic.
const checkChunk = 256 << 10

// copySum copies src into dst (len(dst) == len(src)) a chunk at a time,
// computing the CRC32C of each chunk from dst right after its copy, and
// returns the CRC32C of the whole.
func copySum(dst, src []byte) uint32 {
	var sum uint32
	for off := 0; off < len(src); off += checkChunk {
		end := min(off+checkChunk, len(src))
		copy(dst[off:end], src[off:end])
		sum = crc32.Update(sum, castagnoli, dst[off:end])
	}
	return sum
}

// EncodeSum is Encode with the payload's CRC32C already computed.
func EncodeSum(dst []byte, k *l1.ObjectKey, p []byte, sum uint32) ([]byte, error) {
	if len(k.ChunkHash) > MaxKeyField || len(k.Model) > MaxKeyField || len(k.CacheSalt) > MaxKeyField {
		return dst, fmt.Errorf("%w: %d, %d and %d bytes (at most %d each)", ErrKeyTooLong,
			len(k.ChunkHash), len(k.Model), len(k.CacheSalt), MaxKeyField)
	}
	start := len(dst)
	var h [HeaderSize]byte
	copy(h[0:], Magic)
	binary.LittleEndian.PutUint16(h[4:], Version)
	binary.LittleEndian.PutUint16(h[6:], uint16(len(k.ChunkHash)))
	binary.LittleEndian.PutUint16(h[8:], uint16(len(k.Model)))
	binary.LittleEndian.PutUint16(h[10:], uint16(len(k.CacheSalt)))
	binary.LittleEndian.PutUint32(h[12:], k.KVRank)
	binary.LittleEndian.PutUint32(h[16:], k.GroupID)
	binary.LittleEndian.PutUint32(h[20:], sum)
	binary.LittleEndian.PutUint64(h[24:], uint64(len(p)))
	dst = append(dst, h[:]...)
	dst = append(dst, k.ChunkHash...)
	dst = append(dst, k.Model...)
	dst = append(dst, k.CacheSalt...)
	hs := crc32.Update(Checksum(dst[start:start+32]), castagnoli, dst[start+HeaderSize:])
	binary.LittleEndian.PutUint32(dst[start+32:], hs)
	return append(dst, p...), nil
}

// DecodeHeader checks the header and key at the start of v (PrefixLen(k)
// bytes at least; v may be the whole value or only its prefix) against k,
// and returns the header. Any mismatch is ErrCorrupt.
func DecodeHeader(k *l1.ObjectKey, v []byte) (Header, error) {
	if len(v) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, under the %d of a header", ErrCorrupt, len(v), HeaderSize)
	}
	if string(v[:4]) != Magic {
		return Header{}, fmt.Errorf("%w: magic %q", ErrCorrupt, v[:4])
	}
	if ver := binary.LittleEndian.Uint16(v[4:]); ver != Version {
		return Header{}, fmt.Errorf("%w: version %d", ErrCorrupt, ver)
	}
	if r := binary.LittleEndian.Uint32(v[36:]); r != 0 {
		return Header{}, fmt.Errorf("%w: reserved field %#x", ErrCorrupt, r)
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	n := HeaderSize + hl + ml + sl
	if len(v) < n {
		return Header{}, fmt.Errorf("%w: %d bytes, under the %d of header and key", ErrCorrupt, len(v), n)
	}
	want := binary.LittleEndian.Uint32(v[32:])
	if got := crc32.Update(Checksum(v[:32]), castagnoli, v[HeaderSize:n]); got != want {
		return Header{}, fmt.Errorf("%w: header checksum %#x, the header says %#x", ErrCorrupt, got, want)
	}
	kb := v[HeaderSize:n]
	h := Header{
		Key: l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml:]),
			KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])},
		CRC: binary.LittleEndian.Uint32(v[20:]),
	}
	size := binary.LittleEndian.Uint64(v[24:])
	if size > math.MaxInt64-uint64(n) {
		return Header{}, fmt.Errorf("%w: payload size %d", ErrCorrupt, size)
	}
	h.Size = int64(size)
	if h.Key != *k {
		return Header{}, fmt.Errorf("%w: the value is %v's, not %v's", ErrCorrupt, h.Key, *k)
	}
	return h, nil
}

// Decode checks v, a whole value, against k: its header (DecodeHeader),
// its length and its payload's checksum. It returns the payload, which
// aliases v. Any mismatch is ErrCorrupt.
func Decode(k *l1.ObjectKey, v []byte) ([]byte, error) {
	h, err := DecodeHeader(k, v)
	if err != nil {
		return nil, err
	}
	n := PrefixLen(k)
	if int64(len(v)-n) != h.Size {
		return nil, fmt.Errorf("%w: payload of %d bytes, the header says %d", ErrCorrupt, len(v)-n, h.Size)
	}
	p := v[n:]
	if got := Checksum(p); got != h.CRC {
		return nil, fmt.Errorf("%w: payload checksum %#x, the header says %#x", ErrCorrupt, got, h.CRC)
	}
	return p, nil
}

// DecodeInto is Decode that copies the payload into dst, which must be
// exactly the payload's length, checking its CRC32C as it copies (one
// pass over v). It returns nil only when v passed every check Decode
// makes; then dst holds the payload. On a refusal (ErrCorrupt, or ErrSize
// for a valid value of another length than dst, left in dst untouched)
// dst may hold some of v's bytes, which the caller must not serve.
func DecodeInto(k *l1.ObjectKey, v, dst []byte) error {
	h, err := DecodeHeader(k, v)
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
	if got := copySum(dst, v[n:]); got != h.CRC {
		return fmt.Errorf("%w: payload checksum %#x, the header says %#x", ErrCorrupt, got, h.CRC)
	}
	return nil
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
