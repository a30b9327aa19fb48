package l2

import (
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kvalloc/kvalloc/l1"
)

// The piece format, version 5: an object stored as pieces of PieceSize
// bytes (the last shorter), each its own value under its own name
// (PieceName), spread over the cluster's hash slots. Every piece names
// its key and its place in the object and carries its own MACs, so a
// piece answers for itself as it arrives: a 120-byte header, the key's
// bytes, the piece's payload. Little-endian.
//
//	offset size field
//	0      4    magic "KVL2"
//	4      2    version (5; 4 is read too)
//	6      2    chunk hash length
//	8      2    model length
//	10     2    cache salt length
//	12     4    KV rank
//	16     4    group id
//	20     4    MAC key id (Secret.ID; 0: no MAC)
//	24     8    the object's payload size
//	32     4    piece size: every piece's payload but the last's
//	36     4    this piece's index
//	40     8    object id: one random number per put, in all its pieces
//	48     4    CRC32C of this piece's payload without a MAC (key id 0);
//	            0 under one, whose piece MAC alone judges the payload
//	52     4    CRC32C of bytes [0, 52), bytes [56, 120) and the key
//	56     32   piece MAC: AES-256-GMAC of the payload (a GCM that
//	            encrypts nothing, the payload its additional data) under
//	            the piece's own key, HMAC-SHA-256 of bytes [0, 48) and the
//	            key under the piece key derived from the secret: its
//	            random nonce (12 bytes), its tag (16), 4 zero bytes
//	88     32   header MAC: HMAC-SHA-256 of bytes [0, 52), bytes [56, 88)
//	            and the key, under the header key derived from the secret
//	120    n    chunk hash, model, cache salt
//	120+n  len  the piece's payload
//
// The header MAC is the whole values' (codec.go); the piece MAC is a
// GMAC, not their HMAC-SHA-256, for its cost: 1.2 ms of a core per 8 MiB
// against 5.4 ms with the SHA instructions (l2/DESIGN.md, "The MAC on
// the piece path"), paid by every writer and every reader of every
// byte. A GMAC is forgeable once its key has served two payloads under
// one nonce; each piece's key is its own (its header's fields, the
// random object id of its put among them, and its key), and its nonce
// random, so a key serves two payloads only if one key's put drew
// another's object id. The MACs are per piece: a piece is judged alone,
// as it arrives, in any order, on any master, and the object id, the
// index and the sizes under every piece's MACs make a mix of pieces (of
// two puts, two layouts, two objects) a miss. A MAC over the whole
// object would need every piece, in order, before the first byte could
// be judged.
//
// Under a MAC a payload has no CRC32C (version 5). The piece MAC refuses
// every change the CRC would; the CRC's one other use was to tell, of a
// payload the MAC refused, damage from a forgery, and taking it was a
// quarter of a writer's checks, on the put's critical resource, a core
// (l2/DESIGN.md, "The put's checks"). A payload its MAC refuses counts
// as a MAC failure, whatever changed it; a damaged header is still told
// by its own CRC32C. Version 4 differs only there: its writers took the
// payload's CRC32C under a MAC too, and some of its readers check it on
// every piece, so version 5 is foreign to them (left alone, never
// deleted as damaged), while version 5's readers read version 4, never
// looking at a CRC32C under a MAC. Version 3 (its piece MAC an
// HMAC-SHA-256) is foreign.
const (
	// PieceVersion is the piece format's version, the one written.
	PieceVersion = 5
	// PieceVersionRead is the older version read too: version 5 but for
	// a payload CRC32C under a MAC, which no reader of version 5 reads.
	PieceVersionRead = 4
	// PieceHeaderSize is the fixed part of a piece's header.
	PieceHeaderSize = 120
	// DefaultPieceSize is Options.PieceSize's default where pieces are
	// on: the value size bench/cluster's replay loaded fastest.
	DefaultPieceSize = 256 << 10
	// MaxPieces bounds an object's pieces (PieceCount), so that no
	// header makes a reader ask for more names than that.
	MaxPieces = 1 << 16
)

// The piece header's fields' offsets.
const (
	pOffKeyID     = 20
	pOffSize      = 24
	pOffPieceSize = 32
	pOffIndex     = 36
	pOffID        = 40
	pOffCRC       = 48
	pOffHeaderCRC = 52
	pOffValueMAC  = 56
	pOffHeaderMAC = 88
)

// PieceHeader is a piece's decoded header.
type PieceHeader struct {
	Key       l1.ObjectKey
	Size      int64  // the object's payload size
	PieceSize int64  // every piece's payload size but the last's
	Index     int    // this piece's index
	ID        uint64 // the put's object id
	CRC       uint32 // this piece's payload's CRC32C (0 under a MAC since version 5)
	KeyID     uint32 // the MAC's key id; 0 without a MAC
	MAC       [MACSize]byte
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

// PiecePrefixLen is the length of a piece's header and key: what
// precedes its payload.
func PiecePrefixLen(k *l1.ObjectKey) int { return PieceHeaderSize + keyLen(k) }

func pieceHeaderCRC(v []byte, n int) uint32 {
	return crc32.Update(Checksum(v[:pOffHeaderCRC]), castagnoli, v[pOffValueMAC:n])
}

// AppendPieceHeader appends the header and key of piece index of k's
// object of size bytes, in pieces of pieceSize, put with object id id,
// whose payload is p, with c's MACs; p is not copied. Its one pass over
// p is the piece MAC under a MAC, else the CRC32C.
func (c *Codec) AppendPieceHeader(dst []byte, k *l1.ObjectKey, size, pieceSize int64, index int, id uint64, p []byte) ([]byte, error) {
	if len(k.ChunkHash) > MaxKeyField || len(k.Model) > MaxKeyField || len(k.CacheSalt) > MaxKeyField {
		return dst, fmt.Errorf("%w: %d, %d and %d bytes (at most %d each)", ErrKeyTooLong,
			len(k.ChunkHash), len(k.Model), len(k.CacheSalt), MaxKeyField)
	}
	if pieceSize <= 0 || pieceSize > math.MaxUint32 || size < 0 || PieceCount(size, pieceSize) > MaxPieces || index < 0 || index >= PieceCount(size, pieceSize) {
		return dst, fmt.Errorf("%w: piece %d of %d bytes in pieces of %d", l1.ErrInvalidArgument, index, size, pieceSize)
	}
	if off, end := pieceSpan(size, pieceSize, index); int64(len(p)) != end-off {
		return dst, fmt.Errorf("%w: a payload of %d bytes for piece %d, [%d, %d)", l1.ErrInvalidArgument, len(p), index, off, end)
	}
	start, n := len(dst), PiecePrefixLen(k)
	dst = slices.Grow(dst, n)[:start+n]
	v := dst[start:]
	clear(v[:PieceHeaderSize])
	copy(v[0:], Magic)
	binary.LittleEndian.PutUint16(v[4:], PieceVersion)
	binary.LittleEndian.PutUint16(v[6:], uint16(len(k.ChunkHash)))
	binary.LittleEndian.PutUint16(v[8:], uint16(len(k.Model)))
	binary.LittleEndian.PutUint16(v[10:], uint16(len(k.CacheSalt)))
	binary.LittleEndian.PutUint32(v[12:], k.KVRank)
	binary.LittleEndian.PutUint32(v[16:], k.GroupID)
	binary.LittleEndian.PutUint32(v[pOffKeyID:], c.KeyID())
	binary.LittleEndian.PutUint64(v[pOffSize:], uint64(size))
	binary.LittleEndian.PutUint32(v[pOffPieceSize:], uint32(pieceSize))
	binary.LittleEndian.PutUint32(v[pOffIndex:], uint32(index))
	binary.LittleEndian.PutUint64(v[pOffID:], id)
	kb := v[PieceHeaderSize:n]
	copy(kb, k.ChunkHash)
	copy(kb[len(k.ChunkHash):], k.Model)
	copy(kb[len(k.ChunkHash)+len(k.Model):], k.CacheSalt)
	if s := c.write; s != nil {
		if err := s.pieceMAC(v[:pOffCRC], kb, p, v[pOffValueMAC:pOffHeaderMAC]); err != nil {
			return dst[:start], err
		}
		s.pieceHeaderMAC(v, n, v[pOffHeaderMAC:PieceHeaderSize]) // the CRC32C field left 0
	} else {
		binary.LittleEndian.PutUint32(v[pOffCRC:], Checksum(p))
	}
	binary.LittleEndian.PutUint32(v[pOffHeaderCRC:], pieceHeaderCRC(v, n))
	return dst, nil
}

// pieceHeaderMAC writes the header MAC of the piece whose header and key
// are v[:n] into out.
func (s *Secret) pieceHeaderMAC(v []byte, n int, out []byte) {
	m := s.get(&s.header)
	m.h.Write(v[:pOffHeaderCRC])
	m.h.Write(v[pOffValueMAC:pOffHeaderMAC])
	m.h.Write(v[PieceHeaderSize:n])
	copy(out, m.h.Sum(m.sum[:0]))
	s.header.Put(m)
}

// DecodePieceHeader checks the header and key at the start of v
// (PiecePrefixLen bytes at least; v may be the whole piece or only its
// prefix) against k, and its header MAC, and returns the header. A
// damaged piece, another key's or a layout no writer makes is
// ErrCorrupt; a header MAC that fails is ErrForged; a piece of another
// version or key id (a whole value among them) is ErrForeign.
func (c *Codec) DecodePieceHeader(k *l1.ObjectKey, v []byte) (PieceHeader, error) {
	if len(v) < 6 {
		return PieceHeader{}, fmt.Errorf("%w: %d bytes, under the %d of a piece header", ErrCorrupt, len(v), PieceHeaderSize)
	}
	if string(v[:4]) != Magic {
		return PieceHeader{}, fmt.Errorf("%w: magic %q", ErrCorrupt, v[:4])
	}
	if ver := binary.LittleEndian.Uint16(v[4:]); ver != PieceVersion && ver != PieceVersionRead {
		return PieceHeader{}, fmt.Errorf("%w: format version %d, not a piece (%d or %d)", ErrForeign, ver, PieceVersion, PieceVersionRead)
	}
	if len(v) < PieceHeaderSize {
		return PieceHeader{}, fmt.Errorf("%w: %d bytes, under the %d of a piece header", ErrCorrupt, len(v), PieceHeaderSize)
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	n := PieceHeaderSize + hl + ml + sl
	if len(v) < n {
		return PieceHeader{}, fmt.Errorf("%w: %d bytes, under the %d of header and key", ErrCorrupt, len(v), n)
	}
	if got, want := pieceHeaderCRC(v, n), binary.LittleEndian.Uint32(v[pOffHeaderCRC:]); got != want {
		return PieceHeader{}, fmt.Errorf("%w: header checksum %#x, the header says %#x", ErrCorrupt, got, want)
	}
	kb := v[PieceHeaderSize:n]
	h := PieceHeader{
		Key: l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml:]),
			KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])},
		CRC:       binary.LittleEndian.Uint32(v[pOffCRC:]),
		KeyID:     binary.LittleEndian.Uint32(v[pOffKeyID:]),
		PieceSize: int64(binary.LittleEndian.Uint32(v[pOffPieceSize:])),
		Index:     int(binary.LittleEndian.Uint32(v[pOffIndex:])),
		ID:        binary.LittleEndian.Uint64(v[pOffID:]),
	}
	copy(h.MAC[:], v[pOffValueMAC:])
	size := binary.LittleEndian.Uint64(v[pOffSize:])
	if size > math.MaxInt64/2 || h.PieceSize == 0 || PieceCount(int64(size), h.PieceSize) > MaxPieces || h.Index >= PieceCount(int64(size), h.PieceSize) {
		return PieceHeader{}, fmt.Errorf("%w: piece %d of %d bytes in pieces of %d", ErrCorrupt, h.Index, size, h.PieceSize)
	}
	h.Size = int64(size)
	if h.Key != *k {
		return PieceHeader{}, fmt.Errorf("%w: the piece is %v's, not %v's", ErrCorrupt, h.Key, *k)
	}
	switch {
	case h.KeyID == 0 && c.write != nil:
		return PieceHeader{}, fmt.Errorf("%w: a piece without a MAC; this node requires one", ErrForeign)
	case h.KeyID == 0:
		for _, b := range v[pOffValueMAC:PieceHeaderSize] {
			if b != 0 {
				return PieceHeader{}, fmt.Errorf("%w: MAC bytes in a piece of key id 0", ErrCorrupt)
			}
		}
	default:
		s := c.secret(h.KeyID)
		if s == nil {
			return PieceHeader{}, fmt.Errorf("%w: MAC key id %#x, a secret this node does not hold", ErrForeign, h.KeyID)
		}
		var mac [MACSize]byte
		s.pieceHeaderMAC(v, n, mac[:])
		if !c.skipMAC && !hmac.Equal(mac[:], v[pOffHeaderMAC:PieceHeaderSize]) {
			return PieceHeader{}, fmt.Errorf("%w: header MAC under key id %#x", ErrForged, h.KeyID)
		}
	}
	return h, nil
}

// pieceCheck checks a piece's payload: without a MAC, its CRC32C as it
// arrives, a chunk at a time; with one, its piece MAC once it is whole.
type pieceCheck struct {
	c       *Codec
	h       *PieceHeader
	hk      []byte // the header and key
	payload []byte // where the payload arrives
	sum     uint32
}

// checkPiece starts the check of the payload of the piece whose header
// is h and whose header and key are hk, arriving into payload.
func (c *Codec) checkPiece(h *PieceHeader, hk, payload []byte) *pieceCheck {
	return &pieceCheck{c: c, h: h, hk: hk, payload: payload}
}

// macs reports whether the piece's MAC judges its payload: it has one
// (a key id) and the codec checks MACs.
func (pc *pieceCheck) macs() bool { return pc.h.KeyID != 0 && !pc.c.skipMAC }

// add takes the next chunk of the payload: its CRC32C, where no MAC
// judges the payload (a payload under a MAC has none since version 5).
func (pc *pieceCheck) add(b []byte) {
	if !pc.macs() {
		pc.sum = crc32.Update(pc.sum, castagnoli, b)
	}
}

// done judges the whole payload: ErrCorrupt for a CRC32C that differs,
// ErrForged for a MAC that does (damaged or replaced: under a MAC the
// two are not told apart).
func (pc *pieceCheck) done() error {
	if !pc.macs() {
		if pc.h.KeyID == 0 && pc.sum != pc.h.CRC {
			return fmt.Errorf("%w: piece checksum %#x, the header says %#x", ErrCorrupt, pc.sum, pc.h.CRC)
		}
		return nil
	}
	s := pc.c.secret(pc.h.KeyID) // not nil: DecodePieceHeader checked
	if !s.pieceMACOK(pc.hk[:pOffCRC], pc.hk[PieceHeaderSize:], pc.payload, pc.h.MAC[:]) {
		return fmt.Errorf("%w: piece MAC under key id %#x (the payload damaged or replaced)", ErrForged, pc.h.KeyID)
	}
	return nil
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

// PieceSlot is the hash slot of piece index of k's object under
// prefix: the slot of the object's whole value name (StoreKey) for piece
// 0, then pieceStride slots further for each piece. It depends on the
// names alone, never on the cluster's layout, so a resharding moves
// pieces and renames none.
func PieceSlot(prefix string, k *l1.ObjectKey, index int) int {
	return pieceSlot(StoreKey(prefix, k), index)
}

func pieceSlot(base string, index int) int {
	return (Slot(base) + index*pieceStride) % numSlots
}

// PieceName is the store's name for piece index of k's object under
// prefix: the prefix (so that ACL key patterns by prefix hold), a hash
// tag that puts it in PieceSlot, the rest of the whole value's name
// (StoreKey), then the index, 4 bytes. The prefix must hold no '{' or
// '}' (ValidPiecePrefix): the tag must be the name's first.
func PieceName(prefix string, k *l1.ObjectKey, index int) string {
	return pieceName(prefix, StoreKey(prefix, k), index)
}

func pieceName(prefix, base string, index int) string {
	tag := slotTags[pieceSlot(base, index)]
	b := make([]byte, 0, len(base)+len(tag)+6)
	b = append(b, prefix...)
	b = append(b, '{')
	b = append(b, tag...)
	b = append(b, '}')
	b = append(b, base[len(prefix):]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(index))
	return string(b)
}

// ValidPiecePrefix reports whether prefix can open piece names: no '{'
// or '}' in it.
func ValidPiecePrefix(prefix string) bool { return !strings.ContainsAny(prefix, "{}") }
