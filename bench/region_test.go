package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// MiB and KiB are byte counts.
const (
	KiB = 1 << 10
	MiB = 1 << 20
)

// regionKinds are the region names used in benchmark names, in order.
var regionKinds = []string{hostmem.KindHeap, hostmem.KindPinned, hostmem.KindCUDAHost}

// regionSegmented names a hostmem.SegmentedRegion in benchmark names: of
// 64 MiB segments, NoReserve (the allocator never touches the memory, so
// populating it would change nothing but the machine's load), every
// segment ready before the benchmark starts.
const regionSegmented = "segmented"

// newRegion makes a region of the given kind. A region the machine refuses
// (no CUDA, mlock refused) skips the benchmark with the reason; any other
// failure is fatal.
func newRegion(tb testing.TB, kind string, size int64) allocator.Region {
	tb.Helper()
	var (
		r   allocator.Region
		err error
	)
	switch kind {
	case hostmem.KindHeap:
		r, err = hostmem.NewHeapRegion(size)
	case hostmem.KindMmap:
		r, err = hostmem.NewMmapRegion(size, hostmem.MmapOptions{})
	case hostmem.KindPinned:
		r, err = hostmem.NewMmapRegion(size, hostmem.MmapOptions{Pin: hostmem.PinLock, Populate: true})
	case hostmem.KindCUDAHost:
		r, err = hostmem.NewCUDAHostRegion(size)
	case regionSegmented:
		var s *hostmem.SegmentedRegion
		if s, err = hostmem.NewSegmentedRegion(size, hostmem.SegmentedOptions{NoReserve: true, Workers: 1}); err == nil {
			if err = s.Wait(context.Background()); err != nil {
				s.Close()
			}
			r = s
		}
	default:
		tb.Fatalf("unknown region kind %q", kind)
	}
	if err != nil {
		if errors.Is(err, hostmem.ErrUnsupported) ||
			kind != hostmem.KindHeap && kind != hostmem.KindMmap && (errors.Is(err, hostmem.ErrCUDAUnavailable) || errors.Is(err, allocator.ErrOutOfMemory)) {
			tb.Skipf("region=%s unavailable: %v", kind, err)
		}
		tb.Fatalf("region=%s: %v", kind, err)
	}
	return r
}

// newPool returns an allocator over a new region of the given kind, closed
// when the benchmark ends.
func newPool(tb testing.TB, kind string, size, align int64) *allocator.Allocator {
	tb.Helper()
	r := newRegion(tb, kind, size)
	a, err := allocator.New(r, allocator.Options{Align: align})
	if err != nil {
		r.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { a.Close() })
	return a
}

// perUnit reports the timed nanoseconds per unit of work (a block, a key)
// under the given unit name, for a benchmark whose op covers perOp units.
func perUnit(b *testing.B, perOp int, unit string) {
	if b.N == 0 || perOp == 0 {
		return
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perOp), unit)
}

// bandwidth reports GB/s (10⁹ bytes per second) for an op that moves n
// bytes.
func bandwidth(b *testing.B, n int64) {
	if ns := b.Elapsed().Nanoseconds(); ns > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/float64(ns), "GB/s")
	}
}
