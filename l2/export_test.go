package l2

// PieceBugs sets the piece path's deliberate bugs on t: a load that
// skips each piece's payload checksum, and one that serves pieces of
// different puts as one object.
func PieceBugs(t *Tier, skipCRC, skipID bool) { t.bugs = pieceBugs{skipCRC: skipCRC, skipID: skipID} }
