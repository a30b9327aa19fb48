// Package allocator carves a large region of host memory into blocks for
// KV-cache objects: 1–40 MiB each, one size per model layout, allocated in
// batches of hundreds to thousands.
//
// # Contract
//
//   - Handles, not pointers. A Block is an offset and a size into a Region.
//     The allocator keeps all metadata on the Go heap and never writes to
//     the region, so the region may live off the Go heap (mmap, mlock-pinned
//     or CUDA host memory) and never holds a Go pointer.
//   - Alignment. Every block's offset and size are multiples of
//     Options.Align (a power of two, default 4096), measured from the start
//     of the region; mmap and CUDA host regions start page-aligned, so their
//     blocks are aligned in absolute terms too. Block.Size is the aligned
//     size actually reserved.
//   - All or nothing. Allocate and AllocateBatch either return every block
//     asked for or change nothing and return an error wrapping
//     ErrOutOfMemory. Every object is one contiguous block; Placement says
//     whether the batch must be one run (Contiguous), may be spread over
//     free extents (Scattered), or should be one run when possible
//     (ContiguousFirst, the default).
//   - The exact prefix in one pass. AllocateUpTo grants the largest k ≤ n
//     that fits now: for Scattered and ContiguousFirst k = min(n,
//     Σ⌊extent/size⌋) over the free extents, computed by one walk over the
//     extents of at least size bytes, with no trial allocations. Because
//     all objects of a batch share one size, k objects fit exactly when
//     k ≤ Σ⌊extent/size⌋, so this is the same k a binary search over
//     all-or-nothing probes converges to, without the probes.
//   - Bad input changes nothing. Invalid sizes, counts, placements and
//     blocks are rejected with errors wrapping ErrInvalidArgument or
//     ErrInvalidBlock before any state changes; Free validates every block
//     of the call before it frees any.
//   - Concurrency. An Allocator is safe for concurrent use; each call,
//     a batch included, takes one mutex once.
//   - Growth. Over a GrowingRegion (a SegmentedRegion whose segments are
//     still being populated and pinned) the allocator serves only the
//     ranges usable so far and adds each new one at its next call
//     (grow.go); Stats.Capacity is then the usable part and Capacity the
//     whole region.
//
// # Design
//
// Free space is a set of maximal free extents, indexed twice (extents.go):
// by address, with two open-addressing tables keyed by an extent's first
// unit and by the unit one past its end, so a freed block finds and merges
// with both neighbours in O(1); and by size, with a treap ordered by (size,
// start), so best fit, the slot count and every update are O(log F) in the
// number F of free extents, and the largest extent is cached. A linear
// first-fit scan over an address-sorted list, as LMCache's AddressManager
// does, is O(F) per request.
//
// Live blocks are not indexed per block. Two bitmaps over alignment units
// mark each live block's first and last unit (bitmap.go). That is enough to
// validate any Block given to Free exactly, and it makes carving a batch of
// n objects from one extent cost one index update plus two bit sets and one
// append per object, so a 5700-object batch stays within a small factor of
// a bump allocator. The cost is 2 bits per alignment unit: at the default
// 4 KiB alignment, 64 KiB of bitmaps per GiB of pool (1/16384), so a 1 TiB
// pool carries 64 MiB of them.
//
// Placement decisions:
//
//   - Allocate takes the best fit: the smallest free extent that holds the
//     object, the lowest address among equals. Large extents stay whole for
//     large requests.
//   - A scattered batch is carved from the smallest fitting extent first,
//     as many objects from each as it holds, filling holes before breaking
//     up large extents.
//   - A contiguous batch takes the best-fit extent for the whole run.
//
// Costs: Allocate and Free of one block O(log F); a batch of n objects
// O(n + m log F) where m ≤ n is the number of extents it touches; Fit
// O(m' + log F) where m' is the number of extents of at least size bytes
// visited before n slots are found; Stats O(1).
//
// MEMORY.md beside this file explains the regions: heap, mmap, pinned and
// CUDA host memory, the segmented region that pins in the background, and
// what each costs to create and touch. ReadBudget says how large a pool
// fits and which limit binds.
package allocator
