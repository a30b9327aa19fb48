package fuzz

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// Builders for the L1 targets' inputs.

// hdr is a header for a pool of units 64-byte units with keys modulo
// keySpace.
func hdr(units int, p allocator.Placement, keySpace int) l1Header {
	u := uint16(units - 1)
	if units > 512 {
		u |= 0xe000
	}
	return l1Header{Units: u, Place: uint8(p), KeySpace: uint16(keySpace - 1)}
}

func (h l1Header) evict() l1Header                     { h.Flags |= 1; return h }
func (h l1Header) prefix(s baseline.Strategy) l1Header { h.Flags |= uint8(s) << 1; return h }
func (h l1Header) ttl(i int) l1Header                  { h.Flags |= uint8(i) << 3; return h }
func (h l1Header) quarantine() l1Header                { h.Flags |= 0x40; return h }
func (r l1Record) temp(mask uint16) l1Record           { r.Flags |= 1; r.Temp = mask; return r }
func (r l1Record) mismatched() l1Record                { r.Flags |= 2; return r }

// prefix makes a ReserveRead a ReserveReadPrefix.
func (r l1Record) prefix() l1Record { r.Flags |= 0x40; return r }

// chain makes a ReserveWrite a ReserveWriteChain, positions from Start;
// key i carries the Partial hint when bit 15-i of mask is set.
func (r l1Record) chain(mask uint16) l1Record         { r.Flags |= 0x40; r.Temp = mask; return r }
func (r l1Record) obs() l1Record                      { r.Flags |= 0x80; return r }
func (r l1Record) stride(s int) l1Record              { r.Stride = uint8(s); return r }
func (r l1Record) force() l1Record                    { r.Flags |= 1; return r }
func (r l1Record) edgeSize(v uint16) l1Record         { r.Size = 0x8000 | v; return r }
func (r l1Record) by(actor int) l1Record              { r.Flags |= uint8(actor) << 2; return r }
func (r l1Record) lease(m l1check.LeaseMode) l1Record { r.Flags |= uint8(m) << 4; return r }
func keyRec(op l1check.OpKind, start, count int) l1Record {
	c := uint16(count)
	if count >= 64 {
		c = 0x8000 | uint16(count)
	}
	return l1Record{Op: uint8(op), Start: uint16(start), Count: c, Stride: 1}
}

func rw(start, count int, size int64, mode l1.Mode) l1Record {
	r := keyRec(l1check.OpReserveWrite, start, count)
	r.Arg, r.Size = uint8(mode), uint16(size)
	return r
}
func fw(start, count int) l1Record { return keyRec(l1check.OpFinishWrite, start, count) }
func fwrr(start, count, locks int) l1Record {
	r := keyRec(l1check.OpFinishWriteAndReserveRead, start, count)
	r.Arg = uint8(locks)
	return r
}
func abort(start, count int) l1Record { return keyRec(l1check.OpAbortWrite, start, count) }
func rr(start, count, locks int) l1Record {
	r := keyRec(l1check.OpReserveRead, start, count)
	r.Arg = uint8(locks)
	return r
}
func ur(start, count int) l1Record { return keyRec(l1check.OpUnsafeRead, start, count) }
func fr(start, count, locks int) l1Record {
	r := keyRec(l1check.OpFinishRead, start, count)
	r.Arg = uint8(locks)
	return r
}
func del(start, count int) l1Record   { return keyRec(l1check.OpDelete, start, count) }
func clr() l1Record                   { return keyRec(l1check.OpClear, 0, 0) }
func touch(start, count int) l1Record { return keyRec(l1check.OpTouch, start, count) }
func evictTo(ratio float64) l1Record {
	r := keyRec(l1check.OpEvictTo, 0, 0)
	r.Arg = uint8(ratio * 200)
	return r
}
func isEv(start, count int) l1Record { return keyRec(l1check.OpIsEvictable, start, count) }
func length() l1Record               { return keyRec(l1check.OpLen, 0, 0) }
func closeRec() l1Record             { return l1Record{Op: 0xff} }

// adv advances the clock by d, a multiple of 5 s up to 1275 s, or of
// 100 ms up to 25.5 s.
func adv(d time.Duration) l1Record {
	r := keyRec(l1check.OpAdvance, 0, 0)
	if d%(5*time.Second) == 0 {
		r.Arg = uint8(d / (5 * time.Second))
	} else {
		r.Arg, r.Flags = uint8(d/(100*time.Millisecond)), 1
	}
	return r
}

// back moves the clock backwards by d (as adv encodes it).
func back(d time.Duration) l1Record { r := adv(d); r.Flags |= 4; return r }

// huge jumps the clock by hugeSteps[i], forward, or backwards with neg.
func huge(i int, neg bool) l1Record {
	r := keyRec(l1check.OpAdvance, 0, 0)
	r.Arg, r.Flags = uint8(i), 8
	if neg {
		r.Flags |= 4
	}
	return r
}

func obsAll(recs ...l1Record) []l1Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i] = out[i].obs()
	}
	return out
}

// The prefix contract's worked examples, scaled down: 10 objects asked
// where 8 of 512 bytes fit in 64 units; 5700 asked where 4560 objects of
// 64 bytes fit in 4560 units (the 5700-chunk restore short by 1140); 10
// asked where 7 fit under Scattered placement.
var (
	hdr10into8    = hdr(64, allocator.ContiguousFirst, 65536)
	req10into8    = rw(0, 10, 512, l1.ModeAll)
	hdr5700       = hdr(4560, allocator.ContiguousFirst, 65536)
	req5700       = rw(0, 5700, 64, l1.ModeAll)
	hdr7of10      = hdr(28, allocator.Scattered, 65536)
	req7of10      = rw(0, 10, 256, l1.ModeAll)
	tooLarge      = rw(0, 1, 0, l1.ModeAll).edgeSize(2)
	tooLarge3     = rw(0, 3, 0, l1.ModeAll).edgeSize(5)
	fillAndFinish = []l1Record{rw(0, 16, 256, l1.ModeAll), fw(0, 16)}
)

// mixedSizes lays out, in 64-byte units, free [0,1) then a=[1,4),
// b=[4,6), c=[6,9), d=[9,10), least recently used first: keys 0 (deleted),
// 1, 2, 3, 4. A batch of two 3-unit objects then needs a and b only, whose
// release leaves [0,6).
func mixedSizes() []l1Record {
	return obsAll(
		rw(0, 1, 64, l1.ModeAll), rw(1, 1, 192, l1.ModeAll), rw(2, 1, 128, l1.ModeAll), rw(3, 1, 192, l1.ModeAll), rw(4, 1, 64, l1.ModeAll),
		fw(0, 1), fw(1, 1), fw(2, 1), fw(3, 1), fw(4, 1), del(0, 1),
	)
}

// mixedChurn stores batches of 1, 2 and 3 units, deletes and touches some,
// and stores more: a pool of mixed sizes with free slivers between its
// objects, where on-demand eviction must count merges exactly.
func mixedChurn() []l1Record {
	return obsAll(
		rw(0, 4, 64, l1.ModeAll), fw(0, 4), rw(4, 3, 128, l1.ModeAll), fw(4, 3), rw(7, 2, 192, l1.ModeAll), fw(7, 2),
		rw(9, 3, 64, l1.ModeAll), fw(9, 3), del(1, 1), del(5, 1), touch(0, 1), rw(20, 3, 192, l1.ModeAll), fw(20, 3),
		del(10, 1), rw(30, 2, 128, l1.ModeAll), fw(30, 2), touch(8, 1), rw(40, 2, 192, l1.ModeAll), fw(40, 2),
		rw(50, 5, 64, l1.ModeAll), fw(50, 5), rw(60, 3, 128, l1.ModeAll), fw(60, 3), rw(70, 2, 192, l1.ModeAll),
	)
}

// everyLockState fills 16 slots of 4 units and leaves keys in every state:
// three one-slot holes (keys 0, 2, 9 deleted); 1, 5, 8 finished and
// unlocked; 3, 4 read-locked; 6 a temporary object read-locked and 7 one
// finished but unread; 10, 11 finished and write-locked again; 12 to 15
// write-locked and never finished.
func everyLockState() []l1Record {
	return []l1Record{
		rw(0, 16, 256, l1.ModeAll).temp(0b1100_0000), fw(0, 12),
		del(0, 1), del(2, 1), del(9, 1),
		rr(3, 2, 1), rr(6, 1, 2), rw(10, 2, 256, l1.ModeAll),
	}
}

func init() {
	lifeHdr := hdr(64, allocator.ContiguousFirst, 16)
	seedSets["FuzzL1Lifecycle"] = []seed{
		// ReserveReadPrefix stops at the first missing key (2) and at the
		// first write-locked one (5), and locks nothing behind either.
		{"read-prefix", encodeL1(lifeHdr, obsAll(
			rw(0, 5, 256, l1.ModeAll), fw(0, 5), del(2, 1), rr(0, 5, 1).prefix(), fr(0, 2, 1),
			rw(5, 1, 256, l1.ModeAll), rr(3, 4, 2).prefix(), rr(2, 0, 1).prefix(), rr(0, 2, 0).prefix(), fr(3, 2, 2),
		))},
		// The lookup counters of every kind: reads of ready, write-locked
		// and missing keys, a prefix that stops at each, unsafe reads of
		// locked and unlocked keys, and writes of present, repeated and
		// missing keys.
		{"lookups", encodeL1(lifeHdr, obsAll(
			rw(0, 4, 256, l1.ModeAll), fw(0, 2), rr(0, 6, 1), rr(0, 6, 1).prefix(), rr(2, 3, 1).prefix(), rr(0, 0, 1).prefix(),
			ur(0, 6), rw(0, 8, 256, l1.ModeAll).stride(0), rw(0, 8, 256, l1.ModeAll), rw(0, 2, 256, l1.ModeUpdate), fr(0, 2, 2),
		))},
		{"write-read-cycle", encodeL1(lifeHdr, obsAll(
			rw(0, 4, 256, l1.ModeAll), fw(0, 4), rr(0, 4, 2), ur(0, 4), fr(0, 4, 1), fr(0, 4, 1), fr(0, 1, 1),
			rr(1, 2, 128), fr(1, 2, 127), ur(1, 2), fr(1, 2, 128), del(0, 4), isEv(0, 4), length(),
		))},
		{"temporary-lifecycle", encodeL1(lifeHdr, obsAll(
			rw(0, 3, 256, l1.ModeAll).temp(0b101), fwrr(0, 3, 1), ur(0, 3), fr(0, 3, 1), length(),
			rw(4, 1, 256, l1.ModeAll).temp(1), fw(4, 1), isEv(4, 1), rr(4, 1, 2), fr(4, 1, 1), ur(4, 1), fr(4, 1, 1), ur(4, 1),
		))},
		{"expired-write-reclaimed", encodeL1(lifeHdr, []l1Record{
			rw(0, 2, 256, l1.ModeAll), adv(600 * time.Second), fw(0, 2), rr(0, 2, 1).obs(),
			rw(0, 2, 256, l1.ModeAll).obs(), adv(595 * time.Second), fw(0, 1).obs(), adv(10 * time.Second),
			ur(1, 1), fw(1, 1).obs(), rw(0, 1, 256, l1.ModeAll).obs(), adv(605 * time.Second), rr(0, 1, 1).obs(),
		})},
		{"expired-write-boundary", encodeL1(lifeHdr.ttl(1), []l1Record{
			rw(0, 1, 256, l1.ModeAll).obs(), adv(9900 * time.Millisecond), fw(0, 1).obs(),
			rw(1, 1, 256, l1.ModeAll), adv(10 * time.Second), length(), fw(1, 1).obs(),
		})},
		{"expired-temporary-read-freed", encodeL1(lifeHdr, []l1Record{
			rw(0, 2, 256, l1.ModeAll).temp(0b11), fwrr(0, 2, 3), adv(300 * time.Second), fr(0, 2, 1), length().obs(),
			rw(5, 1, 256, l1.ModeAll).temp(1), fwrr(5, 1, 1), adv(200 * time.Second), rr(5, 1, 1), adv(200 * time.Second),
			ur(5, 1).obs(), adv(100 * time.Second), ur(5, 1), clr().obs(),
		})},
		{"expired-read-unlocks", encodeL1(lifeHdr.ttl(2), []l1Record{
			rw(0, 1, 256, l1.ModeAll), fw(0, 1), rr(0, 1, 1).obs(), adv(10 * time.Second),
			rw(0, 1, 256, l1.ModeAll).obs(), fw(0, 1).obs(), rr(0, 1, 3), adv(10 * time.Second), fr(0, 1, 1).obs(),
		})},
		{"repeated-keys", encodeL1(hdr(64, allocator.ContiguousFirst, 7), obsAll(
			rw(3, 5, 256, l1.ModeAll).stride(0), rw(0, 10, 256, l1.ModeAll), fw(0, 10), rr(0, 10, 1), fr(0, 10, 1),
			del(0, 10).stride(0), rw(0, 12, 256, l1.ModeNew),
		))},
		{"modes", encodeL1(lifeHdr, obsAll(
			rw(0, 2, 256, l1.ModeNew), fw(0, 2), rw(0, 4, 256, l1.ModeNew), rw(0, 4, 256, l1.ModeUpdate),
			rw(5, 2, 256, l1.ModeUpdate), fw(0, 4), rw(0, 2, 512, l1.ModeAll), rw(0, 2, 100, l1.ModeAll),
			fw(0, 2), rw(0, 1, 256, l1.ModeAll).temp(1), fw(0, 1), rw(0, 1, 256, l1.ModeAll),
		))},
		{"abort", encodeL1(lifeHdr, obsAll(
			rw(0, 3, 256, l1.ModeAll), fw(0, 1), abort(0, 3), rw(0, 1, 256, l1.ModeAll), abort(0, 1),
			rw(0, 2, 256, l1.ModeAll), fwrr(0, 1, 1), abort(0, 2), fw(0, 2),
		))},
		{"delete-clear-locked", encodeL1(lifeHdr, obsAll(
			rw(0, 3, 256, l1.ModeAll), fw(0, 2), rr(0, 1, 1), del(0, 3), del(0, 1).force(), clr(),
			rw(5, 2, 256, l1.ModeAll), clr().force(),
		))},
		{"bad-args", encodeL1(lifeHdr, obsAll(
			rw(0, 2, 0, l1.ModeAll).edgeSize(0), rw(0, 2, 0, l1.ModeAll).edgeSize(1), rw(0, 2, 0, l1.ModeAll).edgeSize(2),
			l1Record{Op: uint8(l1check.OpReserveWrite), Arg: 0xff, Count: 2, Stride: 1, Size: 256},
			rw(0, 2, 256, l1.ModeAll).mismatched(), rw(0, 2, 256, l1.ModeAll).temp(1).mismatched(),
			rw(0, 0, 256, l1.ModeAll).mismatched(), rw(0, 2, 256, l1.ModeAll),
			fwrr(0, 2, 0), rr(0, 2, 129), fr(0, 2, 0), fw(0, 2), rr(0, 2, 129), fr(0, 2, 129),
			evictTo(1.25), closeRec(), rw(0, 2, 256, l1.ModeAll), evictTo(0.5), rr(0, 2, 1), closeRec(), length(),
		))},
		{"evict-to", encodeL1(lifeHdr, append(fillAndFinish, obsAll(
			touch(0, 4), rr(4, 2, 1), rw(6, 1, 256, l1.ModeAll), isEv(0, 16), evictTo(0.5), evictTo(0), evictTo(1),
		)...))},
		{"evict-on-demand", encodeL1(lifeHdr.evict(), append(fillAndFinish, obsAll(
			touch(0, 4), rr(4, 2, 1), rw(20, 4, 256, l1.ModeAll), rw(30, 2, 1024, l1.ModeAll), rw(40, 20, 256, l1.ModeAll),
		)...))},
		// Under S3-FIFO, touched objects leave the small queue for the main
		// one in FIFO order (0 before 1), where LRU evicts 1 before 0; the
		// prefix policy ranks the keys of one call tail first.
		{"evict-policies", encodeL1(hdr(10, allocator.ContiguousFirst, 65536), obsAll(
			rw(0, 4, 64, l1.ModeAll), fw(0, 4), touch(1, 1), touch(0, 1), evictTo(0.1), evictTo(0),
			rw(0, 6, 64, l1.ModeAll), fw(0, 6), rr(0, 3, 1), fr(0, 3, 1), evictTo(0.3), evictTo(0),
		))},
		// The Partial hint: key 3, the chain's partial last block, is the
		// first victim under every policy (LRU would take key 0, S3-FIFO
		// key 0 too); a read clears the hint (key 9).
		{"evict-partial-first", encodeL1(hdr(10, allocator.ContiguousFirst, 65536), obsAll(
			rw(0, 4, 64, l1.ModeAll).chain(1<<12), fw(0, 4), rw(4, 2, 64, l1.ModeAll), fw(4, 2), evictTo(0.5),
			rw(8, 2, 64, l1.ModeAll).chain(1<<14), fw(8, 2), rr(9, 1, 1), fr(9, 1, 1), evictTo(0.5), evictTo(0.3), evictTo(0),
		))},
		// On-demand eviction over objects of mixed sizes, under every
		// placement: the plain loop's victims, no more.
		{"evict-mixed-sizes", encodeL1(hdr(10, allocator.Scattered, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll).obs()))},
		{"evict-mixed-sizes-contiguous-first", encodeL1(hdr(10, allocator.ContiguousFirst, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll).obs()))},
		{"evict-mixed-sizes-contiguous", encodeL1(hdr(10, allocator.Contiguous, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll).obs()))},
		{"evict-mixed-churn", encodeL1(hdr(24, allocator.Scattered, 65536).evict(), mixedChurn())},
		{"evict-mixed-churn-contiguous-first", encodeL1(hdr(24, allocator.ContiguousFirst, 65536).evict(), mixedChurn())},
		{"evict-mixed-churn-contiguous", encodeL1(hdr(24, allocator.Contiguous, 65536).evict(), mixedChurn())},
		{"evict-on-demand-contiguous", encodeL1(hdr(64, allocator.Contiguous, 65536).evict(), append(fillAndFinish, obsAll(
			del(3, 1), rr(8, 1, 1), rw(20, 3, 256, l1.ModeAll), rw(30, 2, 1024, l1.ModeAll), rw(40, 20, 256, l1.ModeAll),
		)...))},
		{"prefix-10-into-8", encodeL1(hdr10into8, obsAll(req10into8, fw(0, 10), rr(0, 10, 1)))},
		{"prefix-5700-into-4560", encodeL1(hdr5700, obsAll(req5700))},
		{"prefix-7-of-10", encodeL1(hdr7of10.prefix(baseline.BinarySearch), obsAll(req7of10))},
		{"prefix-none", encodeL1(hdr10into8.prefix(baseline.None), obsAll(req10into8, rw(20, 8, 512, l1.ModeAll)))},
		{"object-larger-than-pool", encodeL1(lifeHdr, obsAll(tooLarge, tooLarge3))},
		{"every-lock-state", encodeL1(lifeHdr, append(everyLockState(), obsAll(
			rw(0, 20, 256, l1.ModeAll), isEv(0, 20), adv(300*time.Second), length(), adv(300*time.Second), length(),
		)...))},
		// Two actors on one key, one late (the late writer's lease is stale).
		{"late-writer", encodeL1(lifeHdr.ttl(1), obsAll(
			rw(0, 3, 256, l1.ModeAll), adv(11*time.Second), rw(0, 2, 256, l1.ModeAll).by(1),
			fw(0, 3), abort(0, 2), fwrr(0, 2, 1), fw(0, 2).by(1), fw(0, 2).by(1), fw(0, 2),
			rw(0, 2, 256, l1.ModeAll).by(2), abort(0, 2).by(1), fwrr(0, 2, 1).by(2),
		))},
		{"late-reader", encodeL1(lifeHdr.ttl(1), obsAll(
			rw(0, 2, 256, l1.ModeAll).temp(0b10), fw(0, 2), rr(0, 2, 1).by(1), adv(6*time.Second),
			rr(0, 1, 2).by(2), fr(0, 2, 1).by(1), rr(0, 1, 1).by(3), fr(0, 1, 3).by(3), fr(0, 1, 1).by(2),
			rr(0, 1, 1).by(1), fr(0, 1, 1).by(2), fr(0, 1, 1).by(1),
		))},
		{"lease-edges", encodeL1(lifeHdr, obsAll(
			rw(0, 2, 256, l1.ModeAll), fw(0, 2).lease(l1check.LeaseZero), fw(0, 2).lease(l1check.LeaseShort),
			abort(0, 2).lease(l1check.LeaseZero), fwrr(0, 2, 1).lease(l1check.LeaseShort), fw(0, 0).lease(l1check.LeaseShort),
			fw(0, 2), rr(0, 2, 1), fr(0, 2, 1).lease(l1check.LeaseZero), fr(0, 2, 1).lease(l1check.LeaseShort), fr(0, 2, 1),
		))},
		{"ttl-max", encodeL1(lifeHdr.ttl(4), []l1Record{
			rw(0, 2, 256, l1.ModeAll), adv(5 * time.Second), length(), huge(1, false), length(), huge(0, false), fw(0, 1).obs(),
			rr(0, 1, 1), huge(0, false), del(0, 1).obs(), evictTo(0).obs(), fw(1, 1).obs(), isEv(0, 2),
		})},
		{"ttl-max-reads", encodeL1(lifeHdr.ttl(7), []l1Record{
			rw(0, 2, 256, l1.ModeAll).temp(2), fw(0, 2), rr(0, 2, 1), huge(1, false), length().obs(), huge(2, false),
			evictTo(0).obs(), del(0, 2).obs(), fr(0, 2, 1).obs(),
		})},
		{"ttl-1ns", encodeL1(lifeHdr.ttl(5), []l1Record{
			rw(0, 2, 256, l1.ModeAll).obs(), fw(0, 1).obs(), rr(0, 1, 1).obs(), huge(3, false), fw(1, 1).obs(),
			ur(0, 1).obs(), fr(0, 1, 1).obs(), length().obs(),
		})},
		{"clock-jumps", encodeL1(lifeHdr.ttl(1), []l1Record{
			rw(0, 1, 256, l1.ModeAll), adv(4 * time.Second), length(), back(3 * time.Second), rw(1, 1, 256, l1.ModeAll).obs(),
			huge(1, true), length().obs(), adv(5 * time.Second), isEv(0, 2).obs(), huge(0, true), huge(0, true), length().obs(),
			adv(1 * time.Second), fw(0, 2).obs(), rw(2, 1, 256, l1.ModeAll), huge(2, false), huge(0, false), length().obs(),
			rw(3, 1, 256, l1.ModeAll).obs(), huge(0, true), adv(9 * time.Second), fw(3, 1).obs(),
		})},
		{"temporary-evictable", encodeL1(lifeHdr, obsAll(
			rw(0, 4, 256, l1.ModeAll).temp(0b1111), fw(0, 3), rr(2, 1, 1), adv(1200*time.Second), isEv(0, 4), evictTo(0), length(),
		))},
		{"temporary-evicted-on-demand", encodeL1(lifeHdr.evict(), obsAll(
			rw(0, 16, 256, l1.ModeAll).temp(0xffff), fw(0, 16), rr(0, 2, 1), rw(20, 4, 256, l1.ModeAll), length(),
		))},
		{"relock-keeps-flag", encodeL1(lifeHdr, obsAll(
			rw(0, 2, 256, l1.ModeAll), fw(0, 2), rw(0, 4, 256, l1.ModeAll).temp(0b1111), fw(0, 4), rr(0, 4, 1), fr(0, 4, 1),
			isEv(0, 4),
		))},
		// Quarantine of lapsed writes: actor 0's writes lapse; actor 1
		// writes the keys again under blocks of its own; actor 0's late
		// FinishWrite answers WriteLapsed and frees its blocks, its late
		// AbortWrite answers OK, its late FinishWriteAndReserveRead
		// WriteLapsed, and actor 1's reservations stand.
		{"quarantine-late-writer", encodeL1(lifeHdr.quarantine().ttl(1), obsAll(
			rw(0, 3, 256, l1.ModeAll), rw(5, 2, 256, l1.ModeAll), rw(8, 1, 256, l1.ModeAll), adv(11*time.Second), rr(0, 3, 1),
			rw(0, 2, 256, l1.ModeAll).by(1), fw(0, 3), fw(0, 2).by(1), rr(0, 3, 1), abort(5, 2), abort(5, 2), fwrr(8, 1, 1),
			fw(0, 3), rw(0, 2, 256, l1.ModeAll).by(2), abort(0, 2).by(1), isEv(0, 9), length(),
		))},
		// A pool of four objects: two finished (evictable), two lapsed
		// writes; a batch of four evicts the two and is granted two, never a
		// quarantined block; the owner's aborts free the rest.
		{"quarantine-evict-on-demand", encodeL1(hdr(16, allocator.Scattered, 65536).quarantine().ttl(1).evict(), obsAll(
			rw(0, 2, 256, l1.ModeAll), fw(0, 2), rw(2, 2, 256, l1.ModeAll), adv(11*time.Second), rw(10, 4, 256, l1.ModeAll).by(1),
			evictTo(0), abort(2, 2), rw(20, 2, 256, l1.ModeAll).by(1), fw(10, 2).by(1), rw(30, 4, 256, l1.ModeAll).by(2),
		))},
		{"quarantine-rewrite", encodeL1(lifeHdr.quarantine().ttl(1), obsAll(
			rw(0, 2, 256, l1.ModeAll), fw(0, 2), rw(0, 2, 256, l1.ModeAll), adv(11*time.Second), rr(0, 2, 1), fwrr(0, 1, 1), fw(1, 1),
			rw(0, 2, 256, l1.ModeAll).by(1), fw(0, 2).by(1), rr(0, 2, 1),
		))},
		{"quarantine-ttl-1ns", encodeL1(lifeHdr.quarantine().ttl(5), obsAll(
			rw(0, 2, 256, l1.ModeAll), huge(3, false), length(), rw(0, 2, 256, l1.ModeAll).by(1), fw(0, 2), huge(3, false), fw(0, 2).by(1),
		))},
		{"quarantine-ttl-max", encodeL1(lifeHdr.quarantine().ttl(4), obsAll(
			rw(0, 2, 256, l1.ModeAll), huge(0, false), huge(0, false), length(), fw(0, 2),
		))},
		{"quarantine-clock-jumps", encodeL1(lifeHdr.quarantine().ttl(1), obsAll(
			rw(0, 2, 256, l1.ModeAll), huge(1, true), length(), huge(0, false), length(), rw(0, 2, 256, l1.ModeAll).by(1),
			huge(0, false), length(), abort(0, 2), fw(0, 2).by(1),
		))},
		// Delete and Clear with force leave the quarantine alone; Close
		// frees it.
		{"quarantine-close", encodeL1(lifeHdr.quarantine().ttl(1), obsAll(
			rw(0, 3, 256, l1.ModeAll), adv(11*time.Second), length(), del(0, 3).force(), clr().force(), closeRec(), abort(0, 3),
		))},
		{"closed-read-side", encodeL1(lifeHdr, obsAll(
			rw(0, 2, 256, l1.ModeAll), fw(0, 1), rr(0, 1, 1), closeRec(), rr(0, 2, 1), fr(0, 1, 1), fw(1, 1), abort(1, 1),
			fwrr(1, 1, 1), ur(0, 1), del(0, 2), touch(0, 2), fr(0, 1, 0), fw(0, 1).lease(l1check.LeaseShort), evictTo(0.5),
		))},
	}

	rwHdr := hdr(64, allocator.ContiguousFirst, 65536)
	seedSets["FuzzReserveWrite"] = []seed{
		{"prefix-10-into-8", encodeL1(hdr10into8, []l1Record{req10into8})},
		{"prefix-5700-into-4560", encodeL1(hdr5700, []l1Record{req5700})},
		{"prefix-7-of-10", encodeL1(hdr7of10, []l1Record{req7of10})},
		{"object-larger-than-pool-1", encodeL1(rwHdr, []l1Record{tooLarge})},
		{"object-larger-than-pool-3", encodeL1(rwHdr, []l1Record{tooLarge3})},
		{"single-key-full", encodeL1(rwHdr, []l1Record{rw(0, 16, 256, l1.ModeAll), rw(20, 1, 256, l1.ModeAll)})},
		{"interleaved-existing", encodeL1(rwHdr, []l1Record{rw(0, 3, 256, l1.ModeAll).stride(2), fw(0, 3).stride(2), rw(0, 20, 256, l1.ModeAll)})},
		{"every-lock-state", encodeL1(rwHdr, append(everyLockState(), rw(0, 20, 256, l1.ModeAll)))},
		{"every-lock-state-small", encodeL1(rwHdr, append(everyLockState(), rw(0, 20, 128, l1.ModeAll).temp(0xaaaa)))},
		{"every-lock-state-large", encodeL1(rwHdr, append(everyLockState(), rw(0, 20, 512, l1.ModeAll)))},
		{"every-lock-state-new", encodeL1(rwHdr, append(everyLockState(), rw(0, 20, 256, l1.ModeNew)))},
		{"every-lock-state-update", encodeL1(rwHdr, append(everyLockState(), rw(0, 20, 256, l1.ModeUpdate)))},
		{"every-lock-state-contiguous", encodeL1(hdr(64, allocator.Contiguous, 65536), append(everyLockState(), rw(0, 20, 128, l1.ModeAll)))},
		{"every-lock-state-evict", encodeL1(rwHdr.evict(), append(everyLockState(), rw(20, 6, 256, l1.ModeAll)))},
		{"evict-mixed-sizes", encodeL1(hdr(10, allocator.Scattered, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll)))},
		{"evict-mixed-sizes-contiguous-first", encodeL1(hdr(10, allocator.ContiguousFirst, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll)))},
		{"evict-mixed-sizes-contiguous", encodeL1(hdr(10, allocator.Contiguous, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll)))},
		{"evict-mixed-churn", encodeL1(hdr(24, allocator.Scattered, 65536).evict(), mixedChurn())},
		{"evict-mixed-churn-contiguous", encodeL1(hdr(24, allocator.Contiguous, 65536).evict(), mixedChurn())},
		{"repeated-keys", encodeL1(hdr(64, allocator.ContiguousFirst, 5), []l1Record{rw(0, 2, 256, l1.ModeAll), fw(0, 1), rw(0, 12, 512, l1.ModeAll)})},
		{"repeated-keys-partial", encodeL1(hdr(16, allocator.ContiguousFirst, 6), []l1Record{rw(0, 14, 128, l1.ModeAll)})},
		{"expired-before-request", encodeL1(rwHdr, []l1Record{rw(0, 16, 256, l1.ModeAll), fw(0, 4), rr(0, 4, 1), adv(600 * time.Second), rw(20, 20, 256, l1.ModeAll)})},
		{"rejected-mismatched-flags", encodeL1(rwHdr, []l1Record{rw(0, 4, 256, l1.ModeAll), fw(0, 2), rw(0, 8, 256, l1.ModeAll).temp(3).mismatched()})},
		{"rejected-size", encodeL1(rwHdr, []l1Record{rw(0, 4, 256, l1.ModeAll), rw(0, 8, 0, l1.ModeAll).edgeSize(3)})},
		{"quarantine", encodeL1(rwHdr.quarantine().ttl(1), []l1Record{rw(0, 16, 256, l1.ModeAll), fw(0, 4), adv(11 * time.Second), rw(20, 20, 256, l1.ModeAll)})},
		{"quarantine-evict", encodeL1(rwHdr.quarantine().ttl(1).evict(), []l1Record{rw(0, 16, 256, l1.ModeAll), fw(0, 6), adv(11 * time.Second), rw(20, 20, 256, l1.ModeAll)})},
	}

	seedSets["FuzzPrefixStrategies"] = []seed{
		{"prefix-10-into-8", encodeL1(hdr10into8, []l1Record{req10into8, fw(0, 10), req10into8})},
		{"prefix-5700-into-4560", encodeL1(hdr5700, []l1Record{req5700})},
		{"prefix-7-of-10", encodeL1(hdr7of10, []l1Record{req7of10})},
		{"object-larger-than-pool", encodeL1(rwHdr, []l1Record{tooLarge, tooLarge3})},
		{"every-lock-state", encodeL1(rwHdr, append(everyLockState(),
			rw(0, 20, 256, l1.ModeAll), rw(30, 5, 64, l1.ModeAll), rw(40, 3, 128, l1.ModeAll), rw(50, 4, 256, l1.ModeAll)))},
		{"fragmented-contiguous", encodeL1(hdr(64, allocator.Contiguous, 65536), append(everyLockState(),
			rw(0, 20, 128, l1.ModeAll), rw(30, 3, 128, l1.ModeAll)))},
		{"fragmented-scattered", encodeL1(hdr(64, allocator.Scattered, 65536), append(everyLockState(),
			rw(0, 20, 128, l1.ModeAll), rw(30, 3, 100, l1.ModeAll)))},
		{"evict-on-demand", encodeL1(rwHdr.evict(), append(fillAndFinish, touch(0, 8), rw(20, 6, 256, l1.ModeAll), rw(30, 20, 256, l1.ModeAll)))},
		{"quarantine", encodeL1(rwHdr.quarantine().ttl(1), append(everyLockState(),
			adv(11*time.Second), rw(0, 20, 128, l1.ModeAll), rw(30, 5, 256, l1.ModeAll)))},
		{"evict-mixed-sizes", encodeL1(hdr(10, allocator.Scattered, 65536).evict(), append(mixedSizes(), rw(10, 2, 192, l1.ModeAll), rw(20, 3, 128, l1.ModeAll)))},
		{"evict-mixed-churn-contiguous-first", encodeL1(hdr(24, allocator.ContiguousFirst, 65536).evict(), mixedChurn())},
	}
}

// TestEncodeDecodeL1 round-trips encodeL1 and checks that the builders
// decode to what they say.
func TestEncodeDecodeL1(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	u16 := func() uint16 { return uint16(rng.Uint32()) }
	u8 := func() uint8 { return uint8(rng.Uint32()) }
	for range 100 {
		h := l1Header{Units: u16(), Place: u8(), Flags: u8(), KeySpace: u16()}
		recs := make([]l1Record, rng.IntN(10))
		for i := range recs {
			recs[i] = l1Record{Op: u8(), Arg: u8(), Stride: u8(), Flags: u8(), Start: u16(), Count: u16(), Size: u16(), Temp: u16()}
		}
		data := encodeL1(h, recs)
		if len(data) != l1HeaderSize+len(recs)*l1RecordSize {
			t.Fatalf("encoded %d records into %d bytes", len(recs), len(data))
		}
		want := withinL1Budget(h, recs)
		for _, in := range [][]byte{data, append(slices.Clone(data), 9, 9)} {
			gh, grecs := decodeL1(in)
			if gh != h || !slices.Equal(grecs, want) {
				t.Fatalf("round trip: got %+v %v, want %+v %v", gh, grecs, h, want)
			}
		}
	}
	if h, recs := decodeL1([]byte{1, 2, 3}); h != (l1Header{}) || len(recs) != 0 {
		t.Fatalf("a short input decodes to %+v %v", h, recs)
	}
	// Decoded one by one: on this pool the input budget (l1Budget) keeps
	// only the first two records.
	h := hdr5700.evict().prefix(baseline.None).ttl(1)
	setup, ops := h.setup(), []l1check.Op{}
	for _, r := range []l1Record{
		req5700.temp(0b10), adv(605 * time.Second), adv(1500 * time.Millisecond), rr(3, 2, 128), tooLarge, closeRec(),
		rw(0, 3, 256, l1.ModeAll).stride(0), evictTo(0.5),
	} {
		ops = append(ops, r.op(h))
	}
	want := l1check.Setup{Units: 4560, Align: l1Align, Placement: allocator.ContiguousFirst, Prefix: baseline.None,
		EvictOnDemand: true, WriteTTL: 10 * time.Second, ReadTTL: 5 * time.Second}
	if setup != want {
		t.Fatalf("setup %v, want %v", setup, want)
	}
	check := func(ok bool, i int) {
		t.Helper()
		if !ok {
			t.Fatalf("op %d decodes to %v", i, ops[i])
		}
	}
	check(ops[0].Kind == l1check.OpReserveWrite && len(ops[0].Keys) == 5700 && ops[0].Keys[5699] == 5699 && ops[0].Size == 64 &&
		len(ops[0].Temporary) == 5700 && !ops[0].Temporary[0] && ops[0].Temporary[1] && ops[0].Temporary[17], 0)
	check(ops[1].Advance == 605*time.Second, 1)
	check(ops[2].Advance == 1500*time.Millisecond, 2)
	check(ops[3].Kind == l1check.OpReserveRead && ops[3].Locks == 128 && slices.Equal(ops[3].Keys, []int{3, 4}), 3)
	check(ops[4].Size > 4560*l1Align, 4)
	check(ops[5].Kind == l1check.OpClose, 5)
	check(slices.Equal(ops[6].Keys, []int{0, 0, 0}), 6)
	check(ops[7].Ratio == 0.5, 7)
}
