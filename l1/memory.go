package l1

import "github.com/kvalloc/kvalloc/allocator"

// Memory is what the manager asks for blocks. *allocator.Allocator
// satisfies it, and so does any test double.
//
// The manager relies on the all-or-nothing contract of AllocateBatch: it
// returns exactly n blocks, each of at least size bytes, or an error and no
// change (a memory other than *allocator.Allocator that breaks it makes
// the call fail with its blocks given back). An error that wraps
// allocator.ErrOutOfMemory means "does not fit" (a size larger than the
// whole capacity included) and becomes OutOfMemory statuses; any other error
// is returned to the caller of ReserveWrite.
//
// The blocks of the objects one call removes are freed together, in one
// Free call, before the manager next calls the memory and before the call
// returns; the one exception is on-demand eviction over an
// *allocator.Allocator with Scattered placement, which hands a victim's
// block of the batch's size to a new object with allocator.Reissue
// instead (see evict.go). When that Free fails, the manager frees the blocks one at a time,
// counting each refusal in Stats.FreeErrors, so Free must be all or nothing,
// as the allocator's is: a Free that fails has freed none of its blocks.
type Memory interface {
	AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error)
	Free(blocks ...allocator.Block) error
	// Stats is read for Usage, Stats, EvictTo and at the start of every
	// on-demand eviction (Capacity, the bytes usable now: S3-FIFO's small
	// queue is a tenth of it; Free; LargestFree under Contiguous
	// placement), and, when Memory is not a Fitter, to skip hopeless
	// retries during on-demand eviction. Only Capacity, Used, Free and
	// LargestFree are read.
	Stats() allocator.Stats
}

// UpToAllocator is an optional interface of a Memory, detected by type
// assertion as io.WriterTo is: AllocateUpTo grants the largest k ≤ n objects
// that fit now, in one call, and errs only on invalid arguments (or, as the
// allocator does for a size above capacity, with an error that also wraps
// allocator.ErrOutOfMemory). PrefixOnePass uses it; without it, PrefixOnePass
// falls back to PrefixBinarySearch.
type UpToAllocator interface {
	AllocateUpTo(size int64, n int, p allocator.Placement) ([]allocator.Block, error)
}

// Fitter is an optional interface of a Memory: Fit reports how many objects
// of size bytes, up to n, a Scattered or ContiguousFirst batch could take
// now, without allocating. On-demand eviction uses it to stop as soon as the
// batch fits; without it (or with Contiguous placement) eviction retries the
// allocation instead.
type Fitter interface {
	Fit(size int64, n int) int
}

// Coalescer is an optional interface of a Memory that is also a Fitter:
// FreeAround reports the free extents that Free(b) would merge a live
// block b with, and Align the unit block sizes are rounded up to: any
// positive number of bytes, a power of two or not (a slab of 3 KiB slots
// has a unit of 3072), read once by New, which rejects one that is not
// positive with an error wrapping ErrInvalidArgument. With it,
// on-demand eviction counts, victim by victim, the objects the freed
// memory will hold, in O(1) per victim, and calls Fit once per batch
// instead of after every victim (see evict.go).
type Coalescer interface {
	FreeAround(b allocator.Block) (before, after int64)
	Align() int64
}

// Sizer is an optional interface of a Memory: Capacity is the most bytes
// it can ever hold at once, the manager's own blocks included, and Align
// the unit block sizes are rounded up to, as Coalescer's (any positive
// unit, read once by New). With it, the manager bounds the
// objects of a size a batch can get before it asks the memory (room.go):
// ReserveWrite with PrefixOnePass answers the keys past that bound
// OutOfMemory at once, and on-demand eviction starts without a call that
// must fail. A Capacity below what the memory can really hold would refuse
// keys that fit; one above it only makes the bound loose.
type Sizer interface {
	Capacity() int64
	Align() int64
}

// Compile-time checks that the allocator provides every interface.
var (
	_ Memory        = (*allocator.Allocator)(nil)
	_ UpToAllocator = (*allocator.Allocator)(nil)
	_ Fitter        = (*allocator.Allocator)(nil)
	_ Coalescer     = (*allocator.Allocator)(nil)
	_ Sizer         = (*allocator.Allocator)(nil)
)
