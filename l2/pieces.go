package l2

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"

	"github.com/kvalloc/kvalloc/l1"
)

// The piece format, version 2: an object stored as pieces of PieceSize
// bytes (the last shorter), each its own value under its own name
// (PieceName), spread over the cluster's hash slots. Every piece names
// its key and its place in the object, so a piece answers for itself:
// a 56-byte header, the key's bytes, a tag (a MAC; none yet: its length
// is 0), the piece's payload. Little-endian.
//
//	offset size field
//	0      4    magic "KVL2"
//	4      2    version (2)
//	6      2    chunk hash length
//	8      2    model length
//	10     2    cache salt length
//	12     4    KV rank
//	16     4    group id
//	20     4    CRC32C of this piece's payload
//	24     8    the object's payload size
//	32     4    piece size: every piece's payload but the last's
//	36     4    this piece's index
//	40     8    object id: one random number per put, in all its pieces
//	48     2    tag length
//	50     2    reserved, 0
//	52     4    CRC32C of bytes [0, 52), the key's bytes and the tag
//	56     n    chunk hash, model, cache salt, tag
//	56+n   len  the piece's payload
const (
	// PieceVersion is the piece format's version.
	PieceVersion = 2
	// PieceHeaderSize is the fixed part of a piece's header.
	PieceHeaderSize = 56
	// DefaultPieceSize is Options.PieceSize's default where pieces are
	// on: the value size bench/cluster's replay loaded fastest.
	DefaultPieceSize = 256 << 10
	// MaxPieces bounds an object's pieces (PieceCount), so that no
	// header makes a reader ask for more names than that.
	MaxPieces = 1 << 16
)

// PieceHeader is a piece's decoded header.
type PieceHeader struct {
	Key       l1.ObjectKey
	Size      int64  // the object's payload size
	PieceSize int64  // every piece's payload size but the last's
	Index     int    // this piece's index
	ID        uint64 // the put's object id
	CRC       uint32 // this piece's payload's CRC32C
	TagLen    int    // the tag's length (0: none)
}

// PieceCount is the number of pieces of an object of size bytes in
// pieces of pieceSize: one at least (an empty object is one empty piece).
func PieceCount(size, pieceSize int64) int {
	if size <= 0 {
		return 1
	}
	return int((size + pieceSize - 1) / pieceSize)
}

// pieceSpan is piece i's payload, [off, end), in an object of size.
func pieceSpan(size, pieceSize int64, i int) (off, end int64) {
	off = int64(i) * pieceSize
	return off, min(off+pieceSize, size)
}

// PiecePrefixLen is the length of a piece's header, key and tag: what
// precedes its payload.
func PiecePrefixLen(k *l1.ObjectKey, tagLen int) int { return PieceHeaderSize + keyLen(k) + tagLen }

// AppendPieceHeader appends the header, key and tag (none) of piece
// index of k's object of size bytes, in pieces of pieceSize, with object
// id id and payload CRC32C sum.
func AppendPieceHeader(dst []byte, k *l1.ObjectKey, size, pieceSize int64, index int, id uint64, sum uint32) ([]byte, error) {
	if len(k.ChunkHash) > MaxKeyField || len(k.Model) > MaxKeyField || len(k.CacheSalt) > MaxKeyField {
		return dst, fmt.Errorf("%w: %d, %d and %d bytes (at most %d each)", ErrKeyTooLong,
			len(k.ChunkHash), len(k.Model), len(k.CacheSalt), MaxKeyField)
	}
	if pieceSize <= 0 || pieceSize > math.MaxUint32 || size < 0 || PieceCount(size, pieceSize) > MaxPieces || index < 0 || index >= PieceCount(size, pieceSize) {
		return dst, fmt.Errorf("%w: piece %d of %d bytes in pieces of %d", l1.ErrInvalidArgument, index, size, pieceSize)
	}
	start := len(dst)
	var h [PieceHeaderSize]byte
	copy(h[0:], Magic)
	binary.LittleEndian.PutUint16(h[4:], PieceVersion)
	binary.LittleEndian.PutUint16(h[6:], uint16(len(k.ChunkHash)))
	binary.LittleEndian.PutUint16(h[8:], uint16(len(k.Model)))
	binary.LittleEndian.PutUint16(h[10:], uint16(len(k.CacheSalt)))
	binary.LittleEndian.PutUint32(h[12:], k.KVRank)
	binary.LittleEndian.PutUint32(h[16:], k.GroupID)
	binary.LittleEndian.PutUint32(h[20:], sum)
	binary.LittleEndian.PutUint64(h[24:], uint64(size))
	binary.LittleEndian.PutUint32(h[32:], uint32(pieceSize))
	binary.LittleEndian.PutUint32(h[36:], uint32(index))
	binary.LittleEndian.PutUint64(h[40:], id)
	dst = append(dst, h[:]...)
	dst = append(dst, k.ChunkHash...)
	dst = append(dst, k.Model...)
	dst = append(dst, k.CacheSalt...)
	hs := crc32.Update(Checksum(dst[start:start+52]), castagnoli, dst[start+PieceHeaderSize:])
	binary.LittleEndian.PutUint32(dst[start+52:], hs)
	return dst, nil
}

// DecodePieceHeader checks the header, key and tag at the start of v
// (PiecePrefixLen bytes at least; v may be the whole piece or only its
// prefix) against k and returns the header. Any mismatch (magic,
// version, reserved field, header checksum, key, a layout no writer
// makes) is ErrCorrupt. A piece with a tag is refused: this build checks
// no MAC, so it serves no piece whose writer meant one to be checked.
func DecodePieceHeader(k *l1.ObjectKey, v []byte) (PieceHeader, error) {
	if len(v) < PieceHeaderSize {
		return PieceHeader{}, fmt.Errorf("%w: %d bytes, under the %d of a piece header", ErrCorrupt, len(v), PieceHeaderSize)
	}
	if string(v[:4]) != Magic {
		return PieceHeader{}, fmt.Errorf("%w: magic %q", ErrCorrupt, v[:4])
	}
	if ver := binary.LittleEndian.Uint16(v[4:]); ver != PieceVersion {
		return PieceHeader{}, fmt.Errorf("%w: version %d, not a piece", ErrCorrupt, ver)
	}
	if r := binary.LittleEndian.Uint16(v[50:]); r != 0 {
		return PieceHeader{}, fmt.Errorf("%w: reserved field %#x", ErrCorrupt, r)
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	tl := int(binary.LittleEndian.Uint16(v[48:]))
	n := PieceHeaderSize + hl + ml + sl + tl
	if len(v) < n {
		return PieceHeader{}, fmt.Errorf("%w: %d bytes, under the %d of header, key and tag", ErrCorrupt, len(v), n)
	}
	want := binary.LittleEndian.Uint32(v[52:])
	if got := crc32.Update(Checksum(v[:52]), castagnoli, v[PieceHeaderSize:n]); got != want {
		return PieceHeader{}, fmt.Errorf("%w: header checksum %#x, the header says %#x", ErrCorrupt, got, want)
	}
	if tl != 0 {
		return PieceHeader{}, fmt.Errorf("%w: a tag of %d bytes, and no key to check it", ErrCorrupt, tl)
	}
	kb := v[PieceHeaderSize:n]
	h := PieceHeader{
		Key: l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml : hl+ml+sl]),
			KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])},
		CRC:       binary.LittleEndian.Uint32(v[20:]),
		PieceSize: int64(binary.LittleEndian.Uint32(v[32:])),
		Index:     int(binary.LittleEndian.Uint32(v[36:])),
		ID:        binary.LittleEndian.Uint64(v[40:]),
	}
	size := binary.LittleEndian.Uint64(v[24:])
	if size > math.MaxInt64/2 || h.PieceSize == 0 || PieceCount(int64(size), h.PieceSize) > MaxPieces || h.Index >= PieceCount(int64(size), h.PieceSize) {
		return PieceHeader{}, fmt.Errorf("%w: piece %d of %d bytes in pieces of %d", ErrCorrupt, h.Index, size, h.PieceSize)
	}
	h.Size = int64(size)
	if h.Key != *k {
		return PieceHeader{}, fmt.Errorf("%w: the piece is %v's, not %v's", ErrCorrupt, h.Key, *k)
	}
	return h, nil
}

// The hash slots of Redis Cluster: a name's slot is the CRC16 (XMODEM)
// of its hash tag (the bytes between its first '{' and the next '}',
// when not empty) or of the whole name, modulo 16384.
const numSlots = 16384

var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crc16tab[byte(c>>8)^s[i]]
	}
	return c
}

// Slot is Redis Cluster's hash slot of name.
func Slot(name string) int {
	for i := 0; i < len(name); i++ {
		if name[i] == '{' {
			for j := i + 1; j < len(name); j++ {
				if name[j] == '}' {
					if j > i+1 {
						name = name[i+1 : j]
					}
					return int(crc16(name)) % numSlots
				}
			}
			break
		}
	}
	return int(crc16(name)) % numSlots
}

// slotTags[s] is a short hash tag whose slot is s: the first of the
// strings "0", "1", ... (base 36) that hashes there.
var slotTags = func() []string {
	tags := make([]string, numSlots)
	left := numSlots
	for n := uint64(0); left > 0; n++ {
		s := strconv.FormatUint(n, 36)
		if sl := int(crc16(s)) % numSlots; tags[sl] == "" {
			tags[sl] = s
			left--
		}
	}
	return tags
}()

// pieceStride is how many slots apart an object's consecutive pieces
// lie: about 16384 ÷ φ, so that any run of pieces spreads evenly over
// the slot space, and consecutive ones fall on different masters of any
// cluster whose masters hold equal runs of slots fewer than 6257 (three
// masters or more, as redis-cli --cluster create deals them).
const pieceStride = 10127

// PieceSlot is the hash slot of piece index of an object whose whole
// value name is base: the base name's own slot for piece 0, then
// pieceStride slots further for each piece. It depends on the names
// alone, never on the cluster's layout, so a resharding moves pieces and
// renames none.
func PieceSlot(base string, index int) int {
	return (Slot(base) + index*pieceStride) % numSlots
}

// PieceName is the store's name for piece index of the object whose
// whole value name is base (StoreKey): a hash tag that puts it in
// PieceSlot, then base, then the index, 4 bytes. The tag opens the name,
// so that no '{' in the prefix or the key's fields is taken for it.
func PieceName(base string, index int) string {
	tag := slotTags[PieceSlot(base, index)]
	b := make([]byte, 0, len(tag)+2+len(base)+4)
	b = append(b, '{')
	b = append(b, tag...)
	b = append(b, '}')
	b = append(b, base...)
	b = binary.LittleEndian.AppendUint32(b, uint32(index))
	return string(b)
}
