package l1

import "github.com/kvalloc/kvalloc/allocator"

// Memory is what the manager asks for blocks: every method it calls, in
// one contract. *allocator.Allocator satisfies it; so must a wrapper or a
// test double, whole: the manager has no other path for a memory that
// lacks a method, and a wrapper that embeds the allocator and overrides a
// method is called through that override, since the manager calls
// nothing but these methods.
//
// Allocation. AppendBatch is all or nothing: it appends exactly n blocks,
// each of at least size bytes, placed as p says, or returns an error and
// changes nothing. AppendUpTo appends the largest k ≤ n objects that fit
// now, in one call, and errs only on invalid arguments (or, as the
// allocator does for a size above its capacity, with an error that also
// wraps allocator.ErrOutOfMemory). Both return dst unchanged on failure.
// An error that wraps allocator.ErrOutOfMemory means "does not fit" (a
// size larger than the whole capacity included) and becomes OutOfMemory
// statuses; any other error is returned to the caller of ReserveWrite.
// The manager checks every answer: too many or too few blocks, or a block
// shorter than size, fails the call with the blocks given back, since a
// writer would write into its neighbour.
//
// Freeing. The blocks of the objects one call removes are freed together,
// in one Free call, before the manager next calls the memory and before
// the call returns; the one exception is on-demand eviction with
// Scattered placement, which hands a victim's block of the batch's size
// to a new object with AppendReissue instead (see evict.go): the same
// extent, live throughout, under a new generation, as allocator.Reissue
// does. When a Free fails, the manager frees the blocks one at a time,
// counting each refusal in Stats.FreeErrors, so Free must be all or
// nothing, as the allocator's is: a Free that fails has freed none of its
// blocks.
//
// What it reports. On-demand eviction counts, victim by victim, the
// objects the freed memory will hold: Fit says how many objects of size
// bytes, up to n, a Scattered or ContiguousFirst batch could take now,
// and FreeAround the free extents that Free(b) would merge a live block b
// with, so that eviction asks Fit once per batch and FreeAround once per
// victim (see evict.go); an answer out of range counts as nothing free,
// and a count that comes out high is corrected by going on victim by
// victim with Fit. Align is the unit block sizes are rounded up to: any
// positive number of bytes, a power of two or not (a slab of 3 KiB slots
// has a unit of 3072). Capacity is the most bytes the memory can ever
// hold at once, the manager's own blocks included: the manager bounds the
// objects of a size a batch can get by it before it asks (room.go). A
// Capacity below what the memory can hold would refuse keys that fit;
// one above it only makes the bound loose, and a memory that cannot bound
// itself reports math.MaxInt64. Align and Capacity are read once, by New,
// which rejects an Align that is not positive and a Capacity below the
// bytes Stats reports usable, with an error wrapping ErrInvalidArgument.
// Stats is read for Usage, Stats, EvictTo and at the start of every
// on-demand eviction (Capacity, the bytes usable now: S3-FIFO's small
// queue is a tenth of it; Free; LargestFree under Contiguous placement);
// only Capacity, Used, Free and LargestFree are read.
type Memory interface {
	AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error)
	AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error)
	AppendReissue(dst []allocator.Block, blocks []allocator.Block) ([]allocator.Block, error)
	Free(blocks ...allocator.Block) error
	Fit(size int64, n int) int
	FreeAround(b allocator.Block) (before, after int64)
	Align() int64
	Capacity() int64
	Stats() allocator.Stats
}

// The allocator is a Memory.
var _ Memory = (*allocator.Allocator)(nil)
