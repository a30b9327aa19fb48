package l2

// PieceBugs sets the piece path's deliberate bugs on t: a load that
// skips each piece's payload checksum, and one that serves pieces of
// different puts as one object.
func PieceBugs(t *Tier, skipCRC, skipID bool) { t.bugs = pieceBugs{skipCRC: skipCRC, skipID: skipID} }

// SkipMAC is c with the deliberate bug of a MAC check skipped (the
// checksums are still checked): a mutant for the tests that show the MAC
// is what refuses a forgery.
func SkipMAC(c *Codec) *Codec {
	d := *c
	d.skipMAC = true
	return &d
}
