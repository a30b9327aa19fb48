package l2

import (
	"encoding/binary"

	"github.com/kvalloc/kvalloc/l1"
)

// PieceBugs sets the piece path's deliberate bugs on t: a load that
// skips each piece's payload checksum, and one that serves pieces of
// different puts as one object.
func PieceBugs(t *Tier, skipCRC, skipID bool) { t.bugs = pieceBugs{skipCRC: skipCRC, skipID: skipID} }

// SkipMAC is c with the deliberate bug of a MAC check skipped (the
// checksums are still checked, a header's; a payload under a MAC has
// none): a mutant for the tests that show the MAC
// is what refuses a forgery.
func SkipMAC(c *Codec) *Codec {
	d := *c
	d.skipMAC = true
	return &d
}

// PieceCommitBugs sets the piece path's deliberate bugs of its commit on
// t: a put that writes piece 0 with the other pieces instead of after
// them, and a load that leaves an object with a piece gone from the
// store as it is.
func PieceCommitBugs(t *Tier, commitWithRest, keepGone bool) {
	t.bugs.commitWithRest, t.bugs.keepGone = commitWithRest, keepGone
}

// TripServer opens the breaker of server id (as Shards names it) on t.
func TripServer(t *Tier, id string) { t.breaker(id).Trip() }

// PieceV4 rewrites piece v (AppendPieceHeader's header and key, then its
// payload) of k as a writer of piece format version 4 made it: version
// 4, the payload's CRC32C under a MAC too, and the MACs and header
// checksum taken again, under c's write secret if any.
func PieceV4(c *Codec, k *l1.ObjectKey, v []byte) error {
	n := PiecePrefixLen(k)
	p := v[n:]
	binary.LittleEndian.PutUint16(v[4:], PieceVersionRead)
	binary.LittleEndian.PutUint32(v[pOffCRC:], Checksum(p))
	if s := c.write; s != nil {
		if err := s.pieceMAC(v[:pOffCRC], v[PieceHeaderSize:n], p, v[pOffValueMAC:pOffHeaderMAC]); err != nil {
			return err
		}
		s.pieceHeaderMAC(v, n, v[pOffHeaderMAC:PieceHeaderSize])
	}
	binary.LittleEndian.PutUint32(v[pOffHeaderCRC:], pieceHeaderCRC(v, n))
	return nil
}

// CheckPiece judges piece v (header, key, payload) of k through c as a
// load does: its header, then its payload.
func CheckPiece(c *Codec, k *l1.ObjectKey, v []byte) error {
	h, err := c.DecodePieceHeader(k, v)
	if err != nil {
		return err
	}
	n := PiecePrefixLen(k)
	pc := c.checkPiece(&h, v[:n], v[n:])
	pc.add(v[n:])
	return pc.done()
}
