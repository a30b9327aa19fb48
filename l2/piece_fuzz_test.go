package l2

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// This file holds FuzzPiece and everything it uses beside the package's
// non-test files: the libFuzzer build compiles it alone
// (.clusterfuzzlite/build.sh).

// fuzzPieceSecret is the MAC secret of FuzzPiece's authenticated codec:
// fixed, so that the committed seeds made with it stay valid.
var fuzzPieceSecret = []byte("kvalloc FuzzPiece's MAC secret, 32 bytes and more")

// fuzzPieceCodecs are the codecs FuzzPiece checks: without a secret, and
// with fuzzPieceSecret.
func fuzzPieceCodecs() []*Codec {
	s, err := NewSecret(fuzzPieceSecret)
	if err != nil {
		panic(err)
	}
	c, err := NewCodec(s)
	if err != nil {
		panic(err)
	}
	return []*Codec{Unauthenticated, c}
}

// FuzzPiece feeds any bytes to the piece decoders as a load judges a
// piece: as the piece of the key, size, layout and index its header
// names (DecodePieceHeader, the payload's length for that place, then
// its CRC32C or MAC), without a secret and with one. It checks that they
// never panic, that every refusal is ErrCorrupt, ErrForged or
// ErrForeign, that a piece is refused for a key one field away, and that
// whatever is accepted is exactly what a writer of its version makes of
// its header's fields, its key and its payload, with the nonce it
// carries: so no changed byte (payload, header, key, length, MAC) is
// ever served, and no piece without the secret's MAC is served by the
// codec that holds it. The seeds are valid pieces of both versions and
// several shapes, each broken one way, and forgeries with every checksum
// made right.
func FuzzPiece(f *testing.F) {
	for _, s := range pieceSeeds() {
		f.Add(s.data)
	}
	codecs := fuzzPieceCodecs()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range codecs {
			if err := checkPieceBytes(data, c); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// pieceSeed is one named seed of FuzzPiece.
type pieceSeed struct {
	name string
	data []byte
}

// claimedPieceKey is the key a piece's header names, read without any
// check (zero when the bytes are too short to name one).
func claimedPieceKey(v []byte) l1.ObjectKey {
	if len(v) < PieceHeaderSize {
		return l1.ObjectKey{}
	}
	hl, ml, sl := int(binary.LittleEndian.Uint16(v[6:])), int(binary.LittleEndian.Uint16(v[8:])), int(binary.LittleEndian.Uint16(v[10:]))
	kb := v[PieceHeaderSize:]
	if len(kb) < hl+ml+sl {
		return l1.ObjectKey{}
	}
	return l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml : hl+ml+sl]),
		KVRank: binary.LittleEndian.Uint32(v[12:]), GroupID: binary.LittleEndian.Uint32(v[16:])}
}

// judgePiece judges v, a whole piece (header, key, payload), as the piece
// of k its header places, as a load does (readPiece): its header, its
// payload's length for its place, its payload's check.
func judgePiece(c *Codec, k *l1.ObjectKey, v []byte) (PieceHeader, error) {
	h, err := c.DecodePieceHeader(k, v)
	if err != nil {
		return h, err
	}
	n := PiecePrefixLen(k)
	off, end := pieceSpan(h.Size, h.PieceSize, h.Index)
	if int64(len(v)-n) != end-off {
		return h, fmt.Errorf("%w: %d payload bytes for piece %d, [%d, %d)", ErrCorrupt, len(v)-n, h.Index, off, end)
	}
	pc := c.checkPiece(&h, v[:n], v[n:])
	pc.add(v[n:])
	return h, pc.done()
}

// writePiece is a whole piece as a writer of version ver (PieceVersion
// or PieceVersionRead) with c's write secret makes it, its piece MAC
// under nonce (12 bytes; a writer draws it at random).
func writePiece(c *Codec, k *l1.ObjectKey, size, pieceSize int64, index int, id uint64, p []byte, ver uint16, nonce []byte) ([]byte, error) {
	v, err := c.AppendPieceHeader(nil, k, size, pieceSize, index, id, p)
	if err != nil {
		return nil, err
	}
	n := len(v)
	binary.LittleEndian.PutUint16(v[4:], ver)
	if s := c.write; s != nil {
		blk, err := s.pieceCipher(v[:pOffCRC], v[PieceHeaderSize:n])
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(blk)
		if err != nil {
			return nil, err
		}
		mac := v[pOffValueMAC:pOffHeaderMAC]
		clear(mac)
		copy(mac, nonce)
		g.Seal(mac[len(nonce):len(nonce)], nonce, nil, p)
		if ver == PieceVersionRead {
			binary.LittleEndian.PutUint32(v[pOffCRC:], Checksum(p))
		}
		s.pieceHeaderMAC(v, n, v[pOffHeaderMAC:PieceHeaderSize])
	}
	binary.LittleEndian.PutUint32(v[pOffHeaderCRC:], pieceHeaderCRC(v, n))
	return append(v, p...), nil
}

// checkPieceBytes is FuzzPiece's body for codec c.
func checkPieceBytes(data []byte, c *Codec) error {
	k := claimedPieceKey(data)
	other := k
	other.GroupID++
	for _, key := range []l1.ObjectKey{k, other} {
		v := bytes.Clone(data)
		h, err := judgePiece(c, &key, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrForged) && !errors.Is(err, ErrForeign) {
				return fmt.Errorf("refused with %v, not ErrCorrupt, ErrForged or ErrForeign", err)
			}
			continue
		}
		if key != k {
			return fmt.Errorf("a piece of %v was accepted for %v", k, key)
		}
		n := PiecePrefixLen(&key)
		ver := binary.LittleEndian.Uint16(data[4:])
		want, err := writePiece(c, &key, h.Size, h.PieceSize, h.Index, h.ID, data[n:], ver, data[pOffValueMAC:pOffValueMAC+12])
		if err != nil {
			return fmt.Errorf("accepted a piece its writer refuses: %v", err)
		}
		if !bytes.Equal(want, data) {
			return fmt.Errorf("accepted a piece that is not its writer's (version %d, key id %#x, piece %d of %d bytes in pieces of %d, %d payload bytes)",
				ver, h.KeyID, h.Index, h.Size, h.PieceSize, len(data)-n)
		}
	}
	return nil
}

// pieceSeeds are FuzzPiece's named seeds, the committed corpus
// (testdata/fuzz/FuzzPiece; TestPieceSeedCorpus keeps it in step).
func pieceSeeds() []pieceSeed {
	var out []pieceSeed
	add := func(name string, v []byte) { out = append(out, pieceSeed{name, v}) }
	codecs := fuzzPieceCodecs()
	nonce := []byte("fuzz-nonce12")
	write := func(c *Codec, k l1.ObjectKey, size, pieceSize int64, index int, ver uint16) []byte {
		off, end := pieceSpan(size, pieceSize, index)
		p := make([]byte, end-off)
		for i := range p {
			p[i] = byte(int(off) + i*7)
		}
		v, err := writePiece(c, &k, size, pieceSize, index, 0x1234_5678_9abc_def0, p, ver, nonce)
		if err != nil {
			panic(err)
		}
		return v
	}
	flip := func(name string, v []byte, i int) {
		w := bytes.Clone(v)
		w[i] ^= 0x10
		add(name, w)
	}
	k := l1.ObjectKey{ChunkHash: "\x00{chunk}", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}
	for ci, c := range codecs {
		pre := []string{"nomac-", "mac-"}[ci]
		for _, ver := range []uint16{PieceVersion, PieceVersionRead} {
			vp := fmt.Sprintf("%sv%d-", pre, ver)
			add(vp+"valid-first", write(c, k, 1000, 256, 0, ver))
			add(vp+"valid-last", write(c, k, 1000, 256, 3, ver))
			add(vp+"valid-empty-object", write(c, k, 0, 256, 0, ver))
			add(vp+"valid-empty-key", write(c, l1.ObjectKey{}, 100, 64, 1, ver))
		}
		v := write(c, k, 1000, 256, 3, PieceVersion)
		n := PiecePrefixLen(&k)
		flip(pre+"bad-payload-byte", v, len(v)-5)
		flip(pre+"bad-version", v, 4)
		flip(pre+"bad-size", v, pOffSize)
		flip(pre+"bad-piece-size", v, pOffPieceSize)
		flip(pre+"bad-index", v, pOffIndex)
		flip(pre+"bad-id", v, pOffID)
		flip(pre+"bad-crc", v, pOffCRC)
		flip(pre+"bad-header-crc", v, pOffHeaderCRC)
		flip(pre+"bad-key-id", v, pOffKeyID)
		flip(pre+"bad-nonce", v, pOffValueMAC+1)
		flip(pre+"bad-tag", v, pOffValueMAC+20)
		flip(pre+"bad-header-mac", v, pOffHeaderMAC+3)
		flip(pre+"bad-key-byte", v, PieceHeaderSize+2)
		add(pre+"bad-truncated", v[:len(v)-1])
		add(pre+"bad-longer", append(bytes.Clone(v), 0))
		add(pre+"bad-header-only", v[:n])
		// A payload byte changed and every checksum the format lets
		// anyone compute made right: only a MAC refuses it.
		w := bytes.Clone(v)
		w[n+9] ^= 1
		if c.write == nil {
			binary.LittleEndian.PutUint32(w[pOffCRC:], Checksum(w[n:]))
		}
		binary.LittleEndian.PutUint32(w[pOffHeaderCRC:], pieceHeaderCRC(w, n))
		add(pre+"forged-payload", w)
	}
	return out
}
