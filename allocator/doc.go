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
//   - Handles have generations. Free accepts a block only as it was handed
//     out, generation included; a stale handle is ErrInvalidBlock even when
//     its offset and size are live again. Reissue hands a live block to a
//     new owner in place (a new generation, the old handle stale), as a
//     Free and an allocation of that very block would, without touching
//     the free extents: a cache that evicts to make room for an object of
//     the same size reuses the victim's block.
//   - Bad input changes nothing. Invalid sizes, counts, placements and
//     blocks are rejected with errors wrapping ErrInvalidArgument or
//     ErrInvalidBlock before any state changes; Free validates every block
//     of the call before it frees any.
//   - Concurrency. An Allocator is safe for concurrent use; each call,
//     a batch included, takes one mutex once.
//   - Growth. Over a GrowingRegion (hostmem's segmented region, whose
//     segments are still being populated and pinned) the allocator serves
//     only the ranges usable so far and adds each new one at its next
//     call; Stats.Capacity is then the usable part, Capacity the whole.
//   - One region, one allocator. New takes the region over and Close
//     closes it; a region closed directly closes its allocator, whose
//     every later call returns ErrClosed.
//
// # Design
//
// Free extents are indexed by address and by size, live blocks by first
// unit: one block costs O(log F) in the F free extents, a batch of n
// O(n + m log F) for the m extents it touches. MEMORY.md beside this file
// has the design, the costs and the measurements. The allocator touches no
// memory and calls no OS code: package hostmem provides the regions of host
// memory and the budget that says how large a pool fits.
package allocator
