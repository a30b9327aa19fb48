package allocator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// GrowingRegion is a Region whose memory becomes usable range by range
// after it is created, as a SegmentedRegion's does while background
// workers populate and pin it. An allocator over a GrowingRegion starts
// with only the ranges already usable as free extents and adds each range
// that becomes usable later at its next call, merging it with the free
// extents on either side; the rest of the region is never handed out.
//
// Ranges may become usable in any order. Grown must be cheap: the
// allocator calls it on every allocating call, under its lock, until the
// ranges it has seen cover the region; from then on it calls nothing, and
// costs what it costs over a fixed region.
type GrowingRegion interface {
	Region
	// Grown returns how many ranges have become usable so far. It never
	// decreases.
	Grown() int
	// GrownRange returns the i-th range to become usable, 0 ≤ i < Grown(),
	// as a byte offset and length into Bytes. Ranges never overlap and
	// never change once reported.
	GrownRange(i int) (off, size int64)
	// GrowGranularity returns the alignment of every range: each offset is
	// a multiple of it, and so is each length, except that of the range
	// that ends the region. The allocator's alignment must divide it.
	GrowGranularity() int64
}

// growth is the allocator's view of a GrowingRegion.
type growth struct {
	src   GrowingRegion // nil over a region that is usable in full, or once it is
	seen  int           // ranges already added as free extents
	units int64         // units they hold
}

// initFree seeds the free extents at New: the whole region, or, over a
// GrowingRegion, the ranges usable now.
func (a *Allocator) initFree(r Region) error {
	g, ok := r.(GrowingRegion)
	if !ok {
		a.free.add(0, a.units)
		return nil
	}
	if gran := g.GrowGranularity(); gran <= 0 || gran%a.align != 0 {
		return fmt.Errorf("%w: alignment %d does not divide the growing region's granularity %d", ErrInvalidArgument, a.align, gran)
	}
	a.growth.src = g
	a.freeUnits, a.largestUnits = 0, 0
	a.growLocked()
	return nil
}

// growLocked adds the ranges that became usable since the last call as free
// extents. It is inlined at every call site: over a fixed region it costs
// one nil check, over a growing one a call, an atomic load and a comparison
// when nothing new is usable.
func (a *Allocator) growLocked() {
	if a.growth.src != nil {
		a.growFromLocked(a.growth.src)
	}
}

// growFromLocked is growLocked's work over the growing region g.
func (a *Allocator) growFromLocked(g GrowingRegion) {
	n := g.Grown()
	if n == a.growth.seen {
		return
	}
	for i := a.growth.seen; i < n; i++ {
		off, size := g.GrownRange(i)
		u, end := off>>a.shift, min((off+size)>>a.shift, a.units)
		if end > u {
			a.addFreeLocked(u, end-u)
			a.growth.units += end - u
		}
	}
	a.growth.seen = n
	a.largestUnits = a.free.largest()
	if a.growth.units >= a.units {
		a.growth.src = nil // all of it is usable: nothing more will grow
	}
	if invariants.Enabled {
		a.checkLocked("growth")
	}
}

// unreadyRangesLocked returns the unit ranges [start, end) that no grown
// range covers yet, in address order; for Verify, which checks that such
// units are neither free nor live. Grown ranges that overlap are an error.
func (a *Allocator) unreadyRangesLocked() ([][2]int64, error) {
	g := a.growth.src
	if g == nil {
		return nil, nil
	}
	grown := make([][2]int64, 0, a.growth.seen)
	for i := range a.growth.seen {
		off, size := g.GrownRange(i)
		if u, end := off>>a.shift, min((off+size)>>a.shift, a.units); end > u {
			grown = append(grown, [2]int64{u, end})
		}
	}
	slices.SortFunc(grown, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
	var out [][2]int64
	next := int64(0)
	for _, r := range grown {
		if r[0] < next {
			return nil, fmt.Errorf("unit %d in two grown ranges", r[0])
		}
		if r[0] > next {
			out = append(out, [2]int64{next, r[0]})
		}
		next = r[1]
	}
	if next < a.units {
		out = append(out, [2]int64{next, a.units})
	}
	return out, nil
}
