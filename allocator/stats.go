package allocator

// Counters are the allocator's monotonic event counts.
type Counters struct {
	// Allocs and Frees count blocks, not calls.
	Allocs, Frees uint64
	// FailedNoSpace counts calls that failed because fewer free bytes than
	// requested existed: exhaustion.
	FailedNoSpace uint64
	// FailedFragmented counts calls that failed although enough free bytes
	// existed, because no free extent, or no set of them, could hold the
	// objects: fragmentation.
	FailedFragmented uint64
	// PartialGrants counts AllocateUpTo calls that granted fewer objects
	// than asked, zero included.
	PartialGrants uint64
}

// Stats is a snapshot of the allocator. All byte figures are multiples of
// the alignment.
type Stats struct {
	Capacity    int64 // bytes the allocator manages; over a GrowingRegion, the part usable so far
	Used        int64 // bytes in live blocks
	Free        int64 // Capacity - Used, slivers included
	LargestFree int64 // bytes in the largest free extent: the biggest object that fits now
	FreeExtents int   // number of maximal free extents
	LiveBlocks  int64 // number of live blocks
	Counters
}

// Fragmentation returns 1 − LargestFree ÷ Free: the share of the free
// bytes that one object cannot use, because no single free extent holds
// them. It is 0 when nothing is free and when all free bytes are one
// extent, and approaches 1 as the free bytes split into many small ones.
func (s Stats) Fragmentation() float64 {
	if s.Free <= 0 {
		return 0
	}
	return 1 - float64(s.LargestFree)/float64(s.Free)
}
