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
//     segments are still being populated and pinned) the allocator serves only the
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
// Live blocks are indexed per block, in an open-addressing table keyed by
// a block's first unit that holds its size and generation (livetable.go).
// The table is sized to the live blocks, never to the capacity, so New
// costs the same for 1 GiB as for 1 TiB. Free validates a block with one
// probe (offset, size and generation must match a live entry exactly) and
// takes the entry out in the same probe (a large Free marks the entries
// and purges the table once, in one pass over its slots, instead of
// shifting each probe chain back); a run of freed blocks that follow
// each other in memory returns to the free extents as one range, whose
// neighbours are found through the free extents' address tables. Blocks
// listed out of address order (eviction's victims) are sorted into such
// runs first, by a radix sort: O(n) for n blocks. Carving a
// batch of n objects from one extent costs one index update plus one table
// insert and one append per object.
//
// Memory: nothing is sized to the capacity. New allocates about 3.3 KB
// whatever the pool; the live-block table costs 32–64 bytes per live block
// (24-byte slots at load factor ≤ ¾), so per GiB held in 8 MiB blocks 4–8
// KiB, in 16 KiB blocks 2–4 MiB; each free extent costs 80–128 bytes. The
// previous design's two bitmaps cost 64 KiB per GiB of pool, touched by
// the first batch; MEMORY.md has the numbers and the profiles.
//
// Generations. Every block handed out carries the next value of a
// per-allocator counter (Block.Gen), so a handle kept after its block was
// freed (stale) never equals the handle of a later block at the same
// offset, and Free rejects it: a stale holder cannot free a new owner's
// block.
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
// Costs: Allocate and Free of one block O(log F), and in the common case
// less: Allocate walks the treap once and carves in place when the rest of
// the extent keeps its place in it; Free merges in place with one free
// neighbour, walking nothing when that neighbour is the largest extent;
// either moves one address-table entry and one live-table entry, under one
// lock cycle. A batch of n objects
// O(n + m log F) where m ≤ n is the number of extents it touches; Fit
// O(m' + log F) where m' is the number of extents of at least size bytes
// visited before n slots are found; Stats O(1).
//
// The allocator touches no memory and calls no OS code: a Region (region.go)
// is all it needs, and package hostmem provides the regions of host memory
// (heap, mmap, pinned, segmented, CUDA host) and the budget that says how
// large a pool fits. MEMORY.md beside this file gives the metadata's costs.
package allocator
