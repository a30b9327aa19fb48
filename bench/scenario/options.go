package scenario

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Fill says how a store or restore writes the bytes of the blocks it was
// granted, through allocator.Bytes.
type Fill uint8

const (
	// FillEnds, the default, writes the first and the last byte of each
	// object: every object's memory is reached (and its first and last
	// page faulted in), at a cost independent of the object size.
	FillEnds Fill = iota
	// FillFull writes every byte of each object, as a real restore copies
	// the chunk. It makes wall time grow with the bytes moved.
	FillFull
	// FillNone writes nothing.
	FillNone
)

var fillNames = [...]string{"ends", "full", "none"}

// String returns "ends", "full" or "none".
func (f Fill) String() string {
	if int(f) < len(fillNames) {
		return fillNames[f]
	}
	return fmt.Sprintf("Fill(%d)", uint8(f))
}

// ParseFill is the inverse of Fill.String.
func ParseFill(s string) (Fill, error) {
	for i, n := range fillNames {
		if n == s {
			return Fill(i), nil
		}
	}
	return 0, fmt.Errorf("fill %q: want ends, full or none", s)
}

// Options configures Run.
type Options struct {
	// Fill says how restored and stored objects are written.
	Fill Fill
	// MaxTraffic, when positive, cuts every traffic operation to at most
	// this much simulated time: the test-sized variant of a long scenario.
	MaxTraffic time.Duration
	// Check compares the runner's model of every object with l1's
	// Snapshot, and runs allocator.Verify, after every operation (after
	// every traffic operation as a whole). It is slow, for tests. The same
	// check always runs once at the end of a run.
	Check bool
	// Progress, when set, is advanced by the simulated time each run
	// covers, as it covers it, so a caller can report progress.
	Progress *atomic.Int64
	// Finished, when set, is incremented by RunMatrix as each run ends.
	Finished *atomic.Int64
}
