// Package allocref is a slow, obviously correct model of package
// allocator, in the spirit of the Go runtime's SummarizeSlow: an Alloc is
// the list of its live blocks in address order, the free runs the gaps
// between them, every query a linear scan (alloc.go); the placement
// policy, so that a model can predict the exact blocks and generations a
// call returns (place.go); and CompareView, which diffs any allocator's
// statistics and free extents against it (view.go). It works on the
// allocator's own types (allocator.Block, allocator.Stats). The
// allocator's unit tests, the fuzz targets, the property tests and the L1
// model (package l1ref, for its memory) use it. Nothing outside the test
// harness imports it.
package allocref
