package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// segPool is the pool the segmented-region benchmarks pin: 4 GiB of 64 MiB
// segments (hostmem.DefaultSegmentSize, LMCache's lazy-pinning step). One is
// held at a time and released before the next, so no more than 4 GiB is ever
// pinned.
const (
	segPool    = 4 << 30
	segSegment = 64 << 20
)

// BenchmarkSegmentPin times a segmented region from its constructor to
// every segment ready: populate and pin, by pin mode and worker count. Each
// op builds a 4 GiB region of 64 MiB segments, puts an allocator over it,
// polls Allocate (every 20 µs) for the first 8 MiB block, waits for the
// rest, and closes the region (munlock and munmap, not timed in the
// reported figures). It reports
//
//   - first-ns: constructor to the first successful allocation;
//   - full-ns: constructor to the last segment ready;
//   - GiB/s: pool bytes over full-ns.
//
// benchratio divides first-ns by full-ns (target ≤ 0.1) and workers=2 GiB/s
// by workers=1 GiB/s (≥ 1.6 on two cores). pin=mlock is skipped, with the
// reason, where mlock is refused (RLIMIT_MEMLOCK without CAP_IPC_LOCK);
// pin=none, populate only, always runs. pin=cuda registers with the CUDA
// driver and skips without one.
func BenchmarkSegmentPin(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("pins 4 GiB per op; skipped by TestAllocsPerOpIndependentOfN")
	}
	pins := []struct {
		name string
		pin  hostmem.PinMode
	}{{"none", hostmem.PinNone}, {"mlock", hostmem.PinLock}, {"cuda", hostmem.PinCUDA}}
	for _, p := range pins {
		b.Run("pin="+p.name, func(b *testing.B) {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
					benchSegmentPin(b, p.pin, workers)
				})
			}
		})
	}
}

func benchSegmentPin(b *testing.B, pin hostmem.PinMode, workers int) {
	opts := hostmem.SegmentedOptions{SegmentSize: segSegment, Workers: workers, Pin: pin}
	if budget := hostmem.ReadBudget(pin); budget.Check(segPool) != nil {
		b.Skipf("pin=%v unavailable: %v", pin, budget.Check(segPool))
	}
	var first, full time.Duration
	for b.Loop() {
		f, w, err := segmentPinOnce(opts)
		if err != nil {
			var se *hostmem.SegmentError
			if errors.Is(err, hostmem.ErrCUDAUnavailable) && !errors.As(err, &se) ||
				errors.As(err, &se) && se.Index == 0 {
				b.Skipf("pin=%v unavailable: %v (pin=none measures populate only)", pin, err)
			}
			b.Fatal(err)
		}
		first += f
		full += w
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Nanoseconds())/n, "first-ns")
	b.ReportMetric(float64(full.Nanoseconds())/n, "full-ns")
	b.ReportMetric(float64(segPool)/(1<<30)/(full.Seconds()/n), "GiB/s")
}

// segmentPinOnce builds, fills and closes one pool, and returns the times
// to the first allocation and to the whole pool ready.
func segmentPinOnce(opts hostmem.SegmentedOptions) (first, full time.Duration, err error) {
	start := time.Now()
	r, err := hostmem.NewSegmentedRegion(segPool, opts)
	if err != nil {
		return 0, 0, err
	}
	a, err := allocator.New(r, allocator.Options{})
	if err != nil {
		r.Close()
		return 0, 0, err
	}
	defer a.Close()
	for {
		blk, err := a.Allocate(8 << 20)
		if err == nil {
			first = time.Since(start)
			if err := a.Free(blk); err != nil {
				return 0, 0, err
			}
			break
		}
		if e := r.Progress().Err; e != nil {
			return 0, 0, e
		}
		time.Sleep(20 * time.Microsecond)
	}
	if err := r.Wait(context.Background()); err != nil {
		return 0, 0, err
	}
	return first, r.Progress().Elapsed, nil
}

// BenchmarkSegmentFloor is the machine's parallel ceiling for
// SegmentPin's worker ratio: the same fixed amount of CPU work (summing
// 256 MiB of words, each worker over its own cache-resident 256 KiB
// buffer) split among W goroutines. On an idle two-core machine workers=2
// runs near 2× workers=1; on a shared one the ratio says how much of a
// second core there was to be had, which bounds what SegmentPin's
// workers=2 ÷ workers=1 can show in the same run.
func BenchmarkSegmentFloor(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("pins 4 GiB per op; skipped by TestAllocsPerOpIndependentOfN")
	}
	const total, buf = 256 << 20, 256 << 10
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			bufs := make([][]uint64, workers)
			for i := range bufs {
				bufs[i] = make([]uint64, buf/8)
				for j := range bufs[i] {
					bufs[i][j] = uint64(j * (i + 1))
				}
			}
			sums := make([]uint64, workers)
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						var s uint64
						for range total / buf / workers {
							for _, v := range bufs[w] {
								s += v ^ (s >> 7)
							}
						}
						sums[w] += s
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(total)*float64(b.N)/(1<<30)/b.Elapsed().Seconds(), "GiB/s")
		})
	}
}
