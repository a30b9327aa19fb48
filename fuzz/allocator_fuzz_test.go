package fuzz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
)

// The allocator under FuzzAllocator: 256 units of 64 bytes. Small units let
// sizes straddle unit boundaries and a few operations fill the pool.
const (
	fzAlign    = 64
	fzUnits    = 256
	fzCapacity = fzAlign * fzUnits
)

// geometry is the pool a fuzz target runs on and how records scale to it.
type geometry struct {
	align, capacity int64
	large           bool // production scale: sizes around 1-16 MiB, batches up to 6016
	maxOps          int  // records decoded at most; the rest of an input is ignored
}

var (
	// smallGeometry is FuzzAllocator's pool.
	smallGeometry = geometry{align: fzAlign, capacity: fzCapacity, maxOps: 256}
	// largeGeometry is FuzzAllocatorLarge's: 5700 × 8 MiB = 44.5 GiB at the
	// default 4 KiB alignment, over a MAP_NORESERVE mapping.
	// A record costs milliseconds there (1000 took 4 s, which stalls a
	// fuzz worker), so it takes at most 64, four times the longest seed.
	largeGeometry = geometry{align: allocator.DefaultAlign, capacity: 5700 << 23, large: true, maxOps: 64}
)

func (g geometry) units() int64 { return g.capacity / g.align }

// allocatorUnderTest is what the checks call and observes; the broken variants
// in internal/reference/mutant satisfy it too.
type allocatorUnderTest = allocref.UnderTest

// allocRecord is one operation of FuzzAllocator: 8 bytes, little endian.
type allocRecord struct {
	Op    uint8  // kind: Op % 6, see allocKind
	Place uint8  // placement; ≥ 0xf0 is an invalid placement. Free: see reissue
	N     uint8  // count; ≥ 0xf0 is a negative, overflowing or huge count
	Mod   uint8  // Free: how many blocks (low 3 bits) and how to corrupt them
	Size  uint16 // size; the top two bits pick a scale or an edge case
	Idx   uint16 // Free: which live block, modulo the number live
}

const allocRecordSize = 8

type allocKind uint8

const (
	kAllocate allocKind = iota
	kBatch
	kUpTo
	kFit
	kFree
	kFreeAll
	numAllocKinds
)

func (r allocRecord) kind() allocKind { return allocKind(r.Op % uint8(numAllocKinds)) }

// size decodes Size on smallGeometry: mostly small objects of 1 to 16
// units, sometimes up to the whole capacity, and one in four an edge: 0,
// negative, above the capacity or near MaxInt64.
func (r allocRecord) size() int64 { return r.sizeIn(smallGeometry) }

// sizeIn decodes Size for g. On the large geometry the small objects are
// 1 to 16 MiB, exact multiples of 1 MiB (8 MiB among them) or a few bytes
// short of one, and "up to the capacity" is scaled to it.
func (r allocRecord) sizeIn(g geometry) int64 {
	v := int64(r.Size & 0x3fff)
	switch top := r.Size >> 14; {
	case g.large && top == 0:
		return (v%16 + 1) << 20
	case g.large && top == 1:
		return (v%16+1)<<20 - (v>>4)%g.align
	case g.large && top == 2:
		return (v + 1) * (g.capacity >> 14)
	case top < 2:
		return v%(16*g.align) + 1
	case top == 2:
		return v%g.capacity + 1
	}
	switch v % 4 {
	case 0:
		return 0
	case 1:
		return -1 - v>>2
	case 2:
		return g.capacity + 1 + v>>2
	}
	return math.MaxInt64 - v>>2
}

// n decodes N on smallGeometry: 0 to 47 objects, or an edge case.
func (r allocRecord) n() int { return r.nIn(smallGeometry) }

// nIn decodes N for g; the large geometry takes batches 128 times larger,
// up to 6016 objects, so a few records fill its pool.
func (r allocRecord) nIn(g geometry) int {
	if r.N < 0xf0 {
		if g.large {
			return int(r.N%48) * 128
		}
		return int(r.N % 48)
	}
	switch x := int(r.N & 0xf); {
	case x < 8:
		return -1 - x
	case x < 12:
		return math.MaxInt - x
	default:
		return 1<<20 + x
	}
}

func (r allocRecord) placement() allocator.Placement {
	if r.Place < 0xf0 {
		return allocator.Placements[r.Place%3]
	}
	return allocator.Placement(3 + r.Place&0xf)
}

// Free corruptions, chosen by Mod>>3 % 16; 0 to 7 leave the call valid.
const (
	cRepeat      = 8 + iota // a block twice in one call
	cSizeUp                 // one block one unit too long
	cSizeDown               // one block one unit too short
	cMisaligned             // one block's offset off by half a unit
	cStale                  // a block freed earlier: a stale handle
	cForeign                // an arbitrary aligned block, maybe live
	cOutOfRange             // a block at the capacity
	cNonPositive            // zero size or negative offset
)

func (r allocRecord) freeCount() int  { return 1 + int(r.Mod&7) }
func (r allocRecord) corruption() int { return int(r.Mod>>3) % 16 }

// reissue reports whether a Free op runs as Reissue instead: when Place,
// which only the allocating ops read, has its top bit set and its two low
// bits clear (one Free op in 8).
func (r allocRecord) reissue() bool { return r.Place&0x83 == 0x80 }

// String describes the call the record decodes to.
func (r allocRecord) String() string {
	switch r.kind() {
	case kAllocate:
		return fmt.Sprintf("Allocate(%d)", r.size())
	case kBatch:
		return fmt.Sprintf("AllocateBatch(%d, %d, %v)", r.size(), r.n(), r.placement())
	case kUpTo:
		return fmt.Sprintf("AllocateUpTo(%d, %d, %v)", r.size(), r.n(), r.placement())
	case kFit:
		return fmt.Sprintf("Fit(%d, %d)", r.size(), r.n())
	case kFree:
		if r.reissue() {
			return fmt.Sprintf("Reissue(%d live from #%d, corruption %d)", r.freeCount(), r.Idx, r.corruption())
		}
		return fmt.Sprintf("Free(%d live from #%d, corruption %d)", r.freeCount(), r.Idx, r.corruption())
	}
	return fmt.Sprintf("FreeAll(from #%d)", r.Idx)
}

func encodeAllocOps(ops []allocRecord) []byte {
	out := make([]byte, 0, len(ops)*allocRecordSize)
	for _, r := range ops {
		out = append(out, r.Op, r.Place, r.N, r.Mod)
		out = binary.LittleEndian.AppendUint16(out, r.Size)
		out = binary.LittleEndian.AppendUint16(out, r.Idx)
	}
	return out
}

// decodeAllocOps decodes an input of FuzzAllocator: at most
// smallGeometry.maxOps records.
func decodeAllocOps(data []byte) []allocRecord { return decodeAllocOpsIn(data, smallGeometry) }

// decodeAllocOpsIn decodes an input for g: at most g.maxOps records, so
// that no input costs a worker more than a fraction of a second.
func decodeAllocOpsIn(data []byte, g geometry) []allocRecord {
	ops := make([]allocRecord, 0, min(len(data)/allocRecordSize, g.maxOps))
	for ; len(data) >= allocRecordSize && len(ops) < g.maxOps; data = data[allocRecordSize:] {
		ops = append(ops, allocRecord{
			Op: data[0], Place: data[1], N: data[2], Mod: data[3],
			Size: binary.LittleEndian.Uint16(data[4:]),
			Idx:  binary.LittleEndian.Uint16(data[6:]),
		})
	}
	return ops
}

// newFuzzAllocator returns a fresh allocator of fzCapacity bytes. It takes
// no testing.TB: the libFuzzer build (.clusterfuzzlite/build.sh) compiles
// this file against a testing package that has only F and T.
func newFuzzAllocator() (*allocator.Allocator, error) {
	r, err := hostmem.NewHeapRegion(fzCapacity)
	if err != nil {
		return nil, err
	}
	return allocator.New(r, allocator.Options{Align: fzAlign})
}

func FuzzAllocator(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := newFuzzAllocator()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if err := checkAllocatorOps(fuzzedAllocator(a), decodeAllocOps(data)); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzAllocatorLarge is FuzzAllocator at production size: 8 MiB-class
// objects in a 44.5 GiB pool (5700 × 8 MiB) at 4 KiB alignment, over a
// MAP_NORESERVE mapping that costs no memory. It skips where such a
// mapping is unavailable (not Linux, or strict overcommit).
func FuzzAllocatorLarge(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := hostmem.NewMmapRegion(largeGeometry.capacity, hostmem.MmapOptions{NoReserve: true})
		if err != nil {
			t.Skipf("large pool unavailable: %v", err)
		}
		a, err := allocator.New(r, allocator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if err := checkAllocatorOpsIn(a, largeGeometry, decodeAllocOpsIn(data, largeGeometry)); err != nil {
			t.Fatal(err)
		}
	})
}

// allocSnapshot is the state a failed call must leave unchanged: Stats
// with the counters zeroed, and the free extents.
type allocSnapshot struct {
	stats   allocator.Stats
	extents []allocator.Block
}

func snapshot(a allocatorUnderTest) allocSnapshot {
	st := a.Stats()
	st.Counters = allocator.Counters{}
	return allocSnapshot{st, a.FreeExtents()}
}

func (s allocSnapshot) diff(after allocSnapshot) error {
	if s.stats != after.stats {
		return fmt.Errorf("stats changed from %+v to %+v", s.stats, after.stats)
	}
	if !slices.Equal(s.extents, after.extents) {
		return fmt.Errorf("free extents changed from %v to %v", s.extents, after.extents)
	}
	return nil
}

// allocChecker runs records against a and a bitmap model side by side.
type allocChecker struct {
	g     geometry
	a     allocatorUnderTest
	ref   *allocref.Alloc
	live  []allocator.Block // in allocation order
	stale []allocator.Block // recently freed
	peak  int               // most blocks live at once, for tests of the seeds
}

// checkAllocatorOps is FuzzAllocator's body: it applies ops to a, which must
// be a fresh allocator of fzCapacity bytes aligned to fzAlign, and returns
// the first contract a breaks, naming the operation. After the last op it
// frees everything and expects one extent spanning the capacity.
func checkAllocatorOps(a allocatorUnderTest, ops []allocRecord) error {
	return checkAllocatorOpsIn(a, smallGeometry, ops)
}

// checkAllocatorOpsIn is checkAllocatorOps on geometry g.
func checkAllocatorOpsIn(a allocatorUnderTest, g geometry, ops []allocRecord) error {
	c := &allocChecker{g: g, a: a, ref: allocref.NewAlloc(g.capacity, g.align)}
	if err := c.ref.CompareView(a); err != nil {
		return fmt.Errorf("fresh allocator: %w", err)
	}
	for i, op := range ops {
		if err := c.step(op); err != nil {
			return fmt.Errorf("op %d %v: %w", i, op, err)
		}
	}
	if err := c.freeAll(0); err != nil {
		return fmt.Errorf("final free of everything: %w", err)
	}
	return nil
}

// validArgs says whether (size, n, p) is a request the allocator must accept:
// a positive size within the capacity, n ≥ 0, a known placement. For an
// all-or-nothing batch (exact) n objects must be addressable; for
// AllocateUpTo and Fit n is only an upper bound, so any n ≥ 0 is valid.
func (c *allocChecker) validArgs(size int64, n int, p allocator.Placement, exact bool) bool {
	if size <= 0 || size > c.g.capacity || n < 0 || p > allocator.Contiguous {
		return false
	}
	unit := (size + c.g.align - 1) / c.g.align * c.g.align
	return !exact || n == 0 || int64(n) <= math.MaxInt64/unit
}

func (c *allocChecker) step(op allocRecord) error {
	before := c.a.Stats()
	snap := snapshot(c.a)
	size, n, p := op.sizeIn(c.g), op.nIn(c.g), op.placement()
	align := c.g.align
	units := int64(0) // object size in units, for valid sizes
	if size > 0 && size <= c.g.capacity {
		units = c.ref.Units(size)
	}
	want := allocator.Counters{} // expected counter deltas
	checkCounters := true

	// failed checks a call that must fail with sentinel and change nothing.
	failed := func(err, sentinel error) error {
		if !errors.Is(err, sentinel) {
			return fmt.Errorf("error %v, want one wrapping %v", err, sentinel)
		}
		return snap.diff(snapshot(c.a))
	}
	// oom records the failure counter a valid request that does not fit
	// must bump: no space if free bytes are short, else fragmentation.
	oom := func(k int) {
		if c.ref.FreeBytes() < int64(k)*units*align {
			want.FailedNoSpace++
		} else {
			want.FailedFragmented++
		}
	}
	// granted feeds blocks to the model, which rejects any block out of
	// range, misaligned or overlapping, and checks sizes and shape.
	granted := func(bs []allocator.Block, p allocator.Placement, contiguous bool) error {
		for i, b := range bs {
			if b.Size != units*align {
				return fmt.Errorf("block %d is %+v, want size %d", i, b, units*align)
			}
			if contiguous && i > 0 && b.Offset != bs[i-1].End() {
				return fmt.Errorf("%v batch: block %d %+v does not follow block %d %+v", p, i, b, i-1, bs[i-1])
			}
		}
		if err := c.ref.Take(bs); err != nil {
			return err
		}
		c.live = append(c.live, bs...)
		c.peak = max(c.peak, len(c.live))
		want.Allocs += uint64(len(bs))
		return nil
	}

	switch op.kind() {
	case kAllocate:
		b, err := c.a.Allocate(size)
		switch {
		case !c.validArgs(size, 1, 0, true):
			checkCounters = false
			if err := failed(err, allocator.ErrInvalidArgument); err != nil {
				return err
			}
			if size > c.g.capacity && !errors.Is(err, allocator.ErrOutOfMemory) {
				return fmt.Errorf("size above capacity: error %v does not wrap ErrOutOfMemory", err)
			}
		case c.ref.BestFit(size) < 0:
			oom(1)
			if err := failed(err, allocator.ErrOutOfMemory); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("failed although %d bytes fit at %d: %v", size, c.ref.BestFit(size), err)
		default:
			if best := c.ref.BestFit(size); b.Offset != best {
				return fmt.Errorf("got %+v, not the best fit at %d", b, best)
			}
			if err := granted([]allocator.Block{b}, 0, false); err != nil {
				return err
			}
		}

	case kBatch:
		bs, err := c.a.AllocateBatch(size, n, p)
		if !c.validArgs(size, n, p, true) {
			checkCounters = false
			if err := failed(err, allocator.ErrInvalidArgument); err != nil {
				return err
			}
			break
		}
		fits := c.ref.MaxSlots(size, n) == n
		oneRun := c.ref.MaxRun(size, n) == n
		if p == allocator.Contiguous {
			fits = oneRun
		}
		if !fits {
			oom(n)
			if err := failed(err, allocator.ErrOutOfMemory); err != nil {
				return err
			}
			break
		}
		if err != nil {
			return fmt.Errorf("failed although %d objects fit: %v", n, err)
		}
		if len(bs) != n {
			return fmt.Errorf("got %d blocks, asked for %d", len(bs), n)
		}
		if err := granted(bs, p, p == allocator.Contiguous || p == allocator.ContiguousFirst && oneRun); err != nil {
			return err
		}

	case kUpTo:
		bs, err := c.a.AllocateUpTo(size, n, p)
		if !c.validArgs(size, n, p, false) {
			checkCounters = false
			if err := failed(err, allocator.ErrInvalidArgument); err != nil {
				return err
			}
			break
		}
		if err != nil {
			return fmt.Errorf("AllocateUpTo errs only on invalid arguments, got %v", err)
		}
		k := c.ref.MaxSlots(size, n)
		if p == allocator.Contiguous {
			k = c.ref.MaxRun(size, n)
		}
		if len(bs) != k {
			return fmt.Errorf("granted %d of %d, the maximum is %d", len(bs), n, k)
		}
		if k < n {
			want.PartialGrants++
		}
		if err := granted(bs, p, p == allocator.Contiguous || p == allocator.ContiguousFirst && c.ref.MaxRun(size, k) == k); err != nil {
			return err
		}

	case kFit:
		got := c.a.Fit(size, n)
		wantFit := 0
		if c.validArgs(size, n, 0, false) {
			wantFit = c.ref.MaxSlots(size, n)
		}
		if got != wantFit {
			return fmt.Errorf("Fit(%d, %d) = %d, the maximum is %d", size, n, got, wantFit)
		}
		if err := snap.diff(snapshot(c.a)); err != nil {
			return fmt.Errorf("Fit changed the allocator: %w", err)
		}

	case kFree:
		req := c.freeRequest(op)
		if r, ok := c.a.(reissuer); ok && op.reissue() {
			return c.reissue(r, req, snap, before)
		}
		err := c.a.Free(req...)
		if !c.ref.Valid(req) {
			if err := failed(err, allocator.ErrInvalidBlock); err != nil {
				return fmt.Errorf("Free(%v): %w", req, err)
			}
			break
		}
		if err != nil {
			return fmt.Errorf("Free(%v) of live blocks failed: %v", req, err)
		}
		c.release(req)
		want.Frees += uint64(len(req))

	case kFreeAll:
		return c.freeAll(int(op.Idx))
	}

	if err := c.ref.CompareView(c.a); err != nil {
		return err
	}
	if checkCounters {
		after := c.a.Stats().Counters
		got := allocator.Counters{
			Allocs:           after.Allocs - before.Allocs,
			Frees:            after.Frees - before.Frees,
			FailedNoSpace:    after.FailedNoSpace - before.FailedNoSpace,
			FailedFragmented: after.FailedFragmented - before.FailedFragmented,
			PartialGrants:    after.PartialGrants - before.PartialGrants,
		}
		if got != want {
			return fmt.Errorf("counters moved by %+v, want %+v", got, want)
		}
	}
	return nil
}

// freeRequest builds the blocks of a Free op: freeCount live blocks from
// Idx on, then perhaps one corruption.
func (c *allocChecker) freeRequest(op allocRecord) []allocator.Block {
	var req []allocator.Block
	if len(c.live) > 0 {
		start := int(op.Idx) % len(c.live)
		for j := range min(op.freeCount(), len(c.live)) {
			req = append(req, c.live[(start+j)%len(c.live)])
		}
	}
	pick := func() int { return int(op.Idx) % len(req) }
	align := c.g.align
	foreign := allocator.Block{Offset: int64(op.Idx) % c.g.units() * align, Size: int64(op.freeCount()) * align}
	switch op.corruption() {
	case cRepeat:
		if len(req) > 0 {
			req = append(req, req[pick()])
		}
	case cSizeUp:
		if len(req) > 0 {
			req[pick()].Size += align
		}
	case cSizeDown:
		if len(req) > 0 {
			req[pick()].Size -= align
		}
	case cMisaligned:
		if len(req) > 0 {
			req[pick()].Offset += align / 2
		}
	case cStale:
		// A handle freed earlier, alone (odd Idx) or after live blocks.
		// Its offset and size may be live again under a new generation.
		if len(c.stale) > 0 {
			stale := c.stale[int(op.Idx)%len(c.stale)]
			if op.Idx%2 == 1 {
				req = req[:0]
			}
			req = append(req, stale)
		} else {
			req = append(req, foreign)
		}
	case cForeign:
		req = append(req, foreign)
	case cOutOfRange:
		req = append(req, allocator.Block{Offset: c.g.capacity, Size: align})
	case cNonPositive:
		if op.Idx%2 == 0 {
			req = append(req, allocator.Block{Offset: foreign.Offset})
		} else {
			req = append(req, allocator.Block{Offset: -align, Size: align})
		}
	}
	return req
}

// reissuer is the allocator's Reissue, which a mutant may lack.
type reissuer interface {
	Reissue(blocks ...allocator.Block) ([]allocator.Block, error)
}

// reissue runs a Free op as Reissue (see allocRecord.reissue): the same
// blocks, validated as Free validates them, come back in order with the
// same offsets and sizes under the next generations; in the model the old
// handles are freed and the new ones taken, so the old ones are stale from
// then on and a later cStale corruption may pick them. Free space and the
// extents do not move; Allocs and Frees each grow by the count. A rejected
// call changes nothing.
func (c *allocChecker) reissue(r reissuer, req []allocator.Block, snap allocSnapshot, before allocator.Stats) error {
	got, err := r.Reissue(req...)
	if !c.ref.Valid(req) {
		if !errors.Is(err, allocator.ErrInvalidBlock) {
			return fmt.Errorf("Reissue(%v): error %v, want one wrapping ErrInvalidBlock", req, err)
		}
		return snap.diff(snapshot(c.a))
	}
	if err != nil {
		return fmt.Errorf("Reissue(%v) of live blocks failed: %v", req, err)
	}
	if len(got) != len(req) {
		return fmt.Errorf("Reissue of %d blocks returned %d", len(req), len(got))
	}
	for i, b := range got {
		if b.Offset != req[i].Offset || b.Size != req[i].Size {
			return fmt.Errorf("Reissue moved block %d: %+v became %+v", i, req[i], b)
		}
	}
	c.release(req)
	if err := c.ref.Take(got); err != nil {
		return fmt.Errorf("Reissue: %w", err)
	}
	c.live = append(c.live, got...)
	if err := c.ref.CompareView(c.a); err != nil {
		return err
	}
	after := c.a.Stats()
	k := uint64(len(req))
	if after.Allocs-before.Allocs != k || after.Frees-before.Frees != k ||
		after.Used != before.Used || after.Free != before.Free {
		return fmt.Errorf("Reissue of %d: stats went from %+v to %+v", k, before, after)
	}
	return nil
}

// release applies a successful Free to the model and the live list.
func (c *allocChecker) release(req []allocator.Block) {
	c.ref.Release(req)
	gone := make(map[allocator.Block]bool, len(req))
	for _, b := range req {
		gone[b] = true
	}
	c.live = slices.DeleteFunc(c.live, func(b allocator.Block) bool { return gone[b] })
	c.stale = append(c.stale, req...)
	if len(c.stale) > 16 {
		c.stale = c.stale[len(c.stale)-16:]
	}
}

// freeAll frees every live block in one call, starting from live[rot], and
// expects a single free extent spanning the capacity.
func (c *allocChecker) freeAll(rot int) error {
	req := slices.Clone(c.live)
	if len(req) > 0 {
		rot %= len(req)
		req = append(req[rot:], req[:rot]...)
	}
	if err := c.a.Free(req...); err != nil {
		return fmt.Errorf("free all %d live blocks: %v", len(req), err)
	}
	c.release(req)
	if err := c.ref.CompareView(c.a); err != nil {
		return err
	}
	st := c.a.Stats()
	if ext := c.a.FreeExtents(); st.FreeExtents != 1 || st.LargestFree != c.g.capacity || len(ext) != 1 || ext[0] != (allocator.Block{Size: c.g.capacity}) {
		return fmt.Errorf("after freeing everything: %d extents %v, largest %d; want one extent of %d", st.FreeExtents, ext, st.LargestFree, c.g.capacity)
	}
	return nil
}
