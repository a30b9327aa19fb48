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

// PieceCommitBugs sets the piece path's deliberate bugs of its commit on
// t: a put that writes piece 0 with the other pieces instead of after
// them, and a load that leaves an object with a piece gone from the
// store as it is.
func PieceCommitBugs(t *Tier, commitWithRest, keepGone bool) {
	t.bugs.commitWithRest, t.bugs.keepGone = commitWithRest, keepGone
}

// TripServer opens the breaker of server id (as Shards names it) on t.
func TripServer(t *Tier, id string) { t.breaker(id).Trip() }
