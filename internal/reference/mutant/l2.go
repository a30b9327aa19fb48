package mutant

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// L2SkipChecksum is an L2 value decoder (l2.Options.Decode) that checks a
// value's header, key and length but not its payload's checksum: it
// serves a value whose payload bytes were changed in the store, the
// silent wrong byte a remote tier must never hand out.
func L2SkipChecksum(k *l1.ObjectKey, v []byte) ([]byte, error) {
	h, err := l2.DecodeHeader(k, v)
	if err != nil {
		return nil, err
	}
	n := l2.PrefixLen(k)
	if int64(len(v)-n) != h.Size {
		return nil, fmt.Errorf("%w: payload of %d bytes, the header says %d", l2.ErrCorrupt, len(v)-n, h.Size)
	}
	return v[n:], nil
}

// RESPNoBound is an l2.RESPReader maker that ignores its bound: it
// accepts a bulk of any length a peer announces, so a peer that claims a
// huge reply makes its reader wait for, or its caller make room for,
// bytes no piece has.
func RESPNoBound(r io.Reader, _ int64) *l2.RESPReader { return l2.NewRESPReader(r, math.MaxInt64) }

// L2SkipMAC is an L2 value decoder that checks everything the public
// format lets anyone compute (magic, version, lengths, both CRC32Cs, the
// key, the size) and not the MACs: it serves a value that someone without
// the secret wrote, with its checksums made right.
func L2SkipMAC(k *l1.ObjectKey, v []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(v) < l2.HeaderSize || string(v[:4]) != l2.Magic || le.Uint16(v[4:]) != l2.Version {
		return nil, fmt.Errorf("%w: not a value", l2.ErrCorrupt)
	}
	n := l2.PrefixLen(k)
	hl, ml, sl := int(le.Uint16(v[6:])), int(le.Uint16(v[8:])), int(le.Uint16(v[10:]))
	if l2.HeaderSize+hl+ml+sl != n || len(v) < n {
		return nil, fmt.Errorf("%w: key lengths", l2.ErrCorrupt)
	}
	kb := v[l2.HeaderSize:n]
	got := l1.ObjectKey{ChunkHash: string(kb[:hl]), Model: string(kb[hl : hl+ml]), CacheSalt: string(kb[hl+ml:]),
		KVRank: le.Uint32(v[12:]), GroupID: le.Uint32(v[16:])}
	hc := crc32.Update(l2.Checksum(v[:36]), crc32.MakeTable(crc32.Castagnoli), v[40:n])
	if got != *k || hc != le.Uint32(v[36:]) || uint64(len(v)-n) != le.Uint64(v[24:]) || l2.Checksum(v[n:]) != le.Uint32(v[32:]) {
		return nil, fmt.Errorf("%w: a check of the format", l2.ErrCorrupt)
	}
	return v[n:], nil
}
