package allocator

import "fmt"

// Placement says how a batch of equal-size objects may be laid out. Each
// object is always one contiguous block; placement is about the batch.
type Placement uint8

const (
	// ContiguousFirst, the zero value, serves the batch from one contiguous
	// run when some free extent holds it, and scatters it otherwise.
	ContiguousFirst Placement = iota
	// Scattered serves the batch from any free extents, smallest fitting
	// extent first, so large extents stay whole for later requests.
	Scattered
	// Contiguous serves the batch from one run only: block i+1 starts where
	// block i ends.
	Contiguous
)

// Placements lists every placement, for tests and benchmarks that run once
// per placement.
var Placements = []Placement{ContiguousFirst, Scattered, Contiguous}

// String returns the placement's name as used in benchmark names and
// scenario files: "contiguous-first", "scattered" or "contiguous".
func (p Placement) String() string {
	switch p {
	case ContiguousFirst:
		return "contiguous-first"
	case Scattered:
		return "scattered"
	case Contiguous:
		return "contiguous"
	}
	return fmt.Sprintf("Placement(%d)", uint8(p))
}

// ParsePlacement is the inverse of Placement.String.
func ParsePlacement(s string) (Placement, error) {
	for _, p := range Placements {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown placement %q", ErrInvalidArgument, s)
}

func (p Placement) valid() bool { return p <= Contiguous }
