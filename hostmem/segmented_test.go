//go:build linux

// Tests for the segmented region: readiness, pinning, the fake CUDA
// registration path, failures that leave the ready segments serving, the
// options, and Close racing the workers.

package hostmem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// waitReady waits for r with a test deadline.
func waitReady(t *testing.T, r *SegmentedRegion) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.Wait(ctx)
}

// checkRanges checks that the grown ranges are the ready segments, each
// once, and returns how many bytes they cover.
func checkRanges(t *testing.T, r *SegmentedRegion) int64 {
	t.Helper()
	seen := map[int64]bool{}
	var total int64
	for i := range r.Grown() {
		off, size := r.GrownRange(i)
		require.Zero(t, off%r.Progress().SegmentSize, "range %d at %d", i, off)
		require.False(t, seen[off], "segment at %d grown twice", off)
		seen[off] = true
		total += size
	}
	require.Equal(t, r.Progress().ReadyBytes, total)
	return total
}

func TestSegmentedRegionReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int64
		opts    SegmentedOptions
		kind    string
		workers int
	}{
		{"populate/1-worker", 16 * regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1}, KindMmap, 1},
		{"populate/3-workers/ragged", 16*regionMiB + 5, SegmentedOptions{SegmentSize: 2 * regionMiB, Workers: 3}, KindMmap, 3},
		{"populate/default-workers", 8 * regionMiB, SegmentedOptions{SegmentSize: regionMiB}, KindMmap, min(8, runtime.GOMAXPROCS(0))},
		{"workers-capped", 3 * regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 64}, KindMmap, 3},
		{"one-byte", 1, SegmentedOptions{}, KindMmap, 1},
		{"mlock", 6 * regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 2, Pin: PinLock}, KindPinned, 2},
		{"thp-on", 8 * regionMiB, SegmentedOptions{SegmentSize: 2 * regionMiB, Workers: 2, THP: THPOn}, KindMmap, 2},
		{"thp-off", 8 * regionMiB, SegmentedOptions{SegmentSize: 2 * regionMiB, Workers: 2, THP: THPOff}, KindMmap, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lockedBefore := vmLockedBytes(t)
			r, err := NewSegmentedRegion(tc.size, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.kind, r.Kind())
			assert.Equal(t, tc.workers, r.Progress().Workers)
			require.NoError(t, waitReady(t, r))
			p := r.Progress()
			assert.True(t, p.Done)
			assert.NoError(t, p.Err)
			assert.Equal(t, p.Segments, p.Ready)
			assert.Zero(t, p.Failed)
			assert.Equal(t, tc.size, p.TotalBytes)
			assert.Equal(t, tc.size, p.ReadyBytes)
			assert.Equal(t, tc.size, checkRanges(t, r))
			if tc.opts.Pin == PinLock {
				assert.Equal(t, tc.size, p.PinnedBytes)
				assert.GreaterOrEqual(t, vmLockedBytes(t)-lockedBefore, tc.size)
			} else {
				assert.Zero(t, p.PinnedBytes)
			}
			base := uintptr(unsafe.Pointer(unsafe.SliceData(r.Bytes())))
			if tc.opts.THP == THPOn {
				assert.Zero(t, base%mmapHugePageSize(), "huge-page reservation not aligned")
				t.Logf("THP mode %q, HintErr=%v, AnonHugePages=%d", mmapTHPMode(), r.HintErr(), anonHugeBytes(base))
			} else {
				assert.NoError(t, r.HintErr())
			}
			exerciseRegion(t, r, tc.size, tc.kind)
			assert.Equal(t, lockedBefore, vmLockedBytes(t), "VmLck after Close")
			require.ErrorIs(t, r.Wait(context.Background()), nil)
		})
	}
}

func TestSegmentedRegionInvalid(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, tc := range []struct {
		name string
		size int64
		opts SegmentedOptions
		want string
	}{
		{"size-0", 0, SegmentedOptions{}, "must be positive"},
		{"size-negative", -1, SegmentedOptions{}, "must be positive"},
		{"size-min", math.MinInt64, SegmentedOptions{}, "must be positive"},
		{"size-max", math.MaxInt64, SegmentedOptions{}, "exceeds the address space"},
		{"segment-negative", regionMiB, SegmentedOptions{SegmentSize: -page}, "not a positive multiple"},
		{"segment-unaligned", regionMiB, SegmentedOptions{SegmentSize: page + 1}, "not a positive multiple"},
		{"segment-too-large", regionMiB, SegmentedOptions{SegmentSize: MaxSegmentSize + page}, "exceeds MaxSegmentSize"},
		{"segment-not-huge", regionMiB, SegmentedOptions{SegmentSize: regionMiB, THP: THPOn}, "2 MiB page"},
		{"workers-negative", regionMiB, SegmentedOptions{Workers: -1}, "-1 workers"},
		{"pin-unknown", regionMiB, SegmentedOptions{Pin: 7}, "unknown pin mode 7"},
		{"thp-unknown", regionMiB, SegmentedOptions{THP: -1}, "unknown THP mode -1"},
		{"registrar-without-cuda", regionMiB, SegmentedOptions{Pin: PinLock, Registrar: &fakeRegistrar{}}, "needs Pin: PinCUDA, not mlock"},
		{"numa-negative", regionMiB, SegmentedOptions{NUMANodes: []int{-1}}, "NUMA node -1 out of range"},
		{"numa-too-large", regionMiB, SegmentedOptions{NUMANodes: []int{0, 1024}}, "NUMA node 1024 out of range"},
		{"too-many-segments", 1 << 46, SegmentedOptions{SegmentSize: page}, "too many"},
		{"noreserve-with-pin", regionMiB, SegmentedOptions{NoReserve: true, Pin: PinLock}, "NoReserve with Pin: mlock"},
		{"hugetlb-with-thp", 4 * regionMiB, SegmentedOptions{SegmentSize: 2 * regionMiB, THP: THPOff, Memfd: &MemfdOptions{HugeTLB: true}}, "HugeTLB with THP mode 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewSegmentedRegion(tc.size, tc.opts)
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 1, strings.Count(err.Error(), "hostmem:"), "one package prefix: %s", err)
		})
	}
}

func TestSegmentedRegionNUMA(t *testing.T) {
	t.Run("node-0", func(t *testing.T) {
		r, err := NewSegmentedRegion(4*regionMiB, SegmentedOptions{SegmentSize: regionMiB, NUMANodes: []int{0}})
		if err != nil {
			// Containers commonly forbid mbind: the error must say so.
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorIs(t, err, unix.EPERM)
			assert.Contains(t, err.Error(), "seccomp")
			t.Logf("mbind forbidden here: %v", err)
			r, err = NewSegmentedRegion(4*regionMiB, SegmentedOptions{SegmentSize: regionMiB, NUMANodes: []int{0}, NUMABestEffort: true})
			require.NoError(t, err)
			require.ErrorContains(t, r.HintErr(), "NUMA binding skipped (NUMABestEffort)")
		} else {
			assert.NoError(t, r.HintErr())
		}
		require.NoError(t, waitReady(t, r))
		require.NoError(t, r.Close())
	})
	t.Run("offline-node", func(t *testing.T) {
		// Node 1023 is not online on any machine this runs on; even best
		// effort does not excuse naming a node that does not exist.
		r, err := NewSegmentedRegion(4*regionMiB, SegmentedOptions{NUMANodes: []int{1023}, NUMABestEffort: true})
		require.Error(t, err)
		assert.Nil(t, r)
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mbind forbidden before the node is checked: %v", err)
		}
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.Contains(t, err.Error(), "binding to NUMA nodes [1023]: mbind")
		assert.Contains(t, err.Error(), "not online")
	})
}

// fakeRegistrar stands in for cudaHostRegister: it records every
// registration, can fail the n-th call, and can be slow.
type fakeRegistrar struct {
	failAt  int32 // 1-based call that fails; 0 never
	failErr error
	delay   time.Duration

	calls        atomic.Int32
	mu           sync.Mutex
	registered   map[uintptr]int // base -> length
	unregistered int
	badUnreg     int
}

func (f *fakeRegistrar) Register(mem []byte) error {
	n := f.calls.Add(1)
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	if n == f.failAt {
		return f.failErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registered == nil {
		f.registered = map[uintptr]int{}
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	if _, dup := f.registered[p]; dup {
		return &cudaCallError{712, "error 712 cudaErrorHostMemoryAlreadyRegistered"}
	}
	f.registered[p] = len(mem)
	return nil
}

func (f *fakeRegistrar) Unregister(mem []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	if n, ok := f.registered[p]; !ok || n != len(mem) {
		f.badUnreg++
		return &cudaCallError{cudaErrorInvalidValue, "error 1 cudaErrorInvalidValue"}
	}
	delete(f.registered, p)
	f.unregistered++
	return nil
}

func (f *fakeRegistrar) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.registered)
}

func TestSegmentedRegionFakeCUDA(t *testing.T) {
	t.Run("all-ready", func(t *testing.T) {
		f := &fakeRegistrar{}
		r, err := NewSegmentedRegion(10*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 3, Pin: PinCUDA, Registrar: f})
		require.NoError(t, err)
		assert.Equal(t, KindCUDAHost, r.Kind())
		require.NoError(t, waitReady(t, r))
		assert.Equal(t, 10, f.live(), "one registration per segment")
		assert.Equal(t, 10*regionMiB, r.Progress().PinnedBytes)
		checkRanges(t, r)
		require.NoError(t, r.Close())
		assert.Zero(t, f.live(), "every segment unregistered")
		assert.Equal(t, 10, f.unregistered)
		assert.Zero(t, f.badUnreg)
	})
	t.Run("fails-at-segment-4", func(t *testing.T) {
		f := &fakeRegistrar{failAt: 5, failErr: &cudaCallError{cudaErrorMemoryAllocation, "error 2 cudaErrorMemoryAllocation: out of memory"}}
		r, err := NewSegmentedRegion(10*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: f})
		require.NoError(t, err)
		err = waitReady(t, r)
		require.ErrorIs(t, err, ErrOutOfMemory)
		var se *SegmentError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 4, se.Index)
		assert.Equal(t, 4*regionMiB, se.Offset)
		assert.Equal(t, "cudaHostRegister", se.Op)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "hostmem: out of memory: segment 4 of 10 [4 MiB, 5 MiB) of 10 MiB: cudaHostRegister: error 2 cudaErrorMemoryAllocation: out of memory ("), msg)
		assert.Contains(t, msg, "MemAvailable")
		assert.True(t, strings.HasSuffix(msg, "; 4 MiB in 4 segments stay ready and serving"), msg)
		assert.Equal(t, 1, strings.Count(msg, "hostmem:"), msg)
		assert.Equal(t, err, r.Progress().Err)

		p := r.Progress()
		assert.Equal(t, SegmentProgress{Segments: 10, SegmentSize: regionMiB, Workers: 1, Ready: 4, Failed: 1, TotalBytes: 10 * regionMiB,
			ReadyBytes: 4 * regionMiB, PinnedBytes: 4 * regionMiB, Done: true, Elapsed: p.Elapsed, Err: err}, p)

		// The four ready segments serve; nothing past them does.
		a, err := allocator.New(r, allocator.Options{})
		require.NoError(t, err)
		bs, err := a.AllocateBatch(regionMiB, 4, allocator.Contiguous)
		require.NoError(t, err)
		assert.Equal(t, allocator.Block{Offset: 0, Size: regionMiB, Gen: bs[0].Gen}, bs[0])
		_, err = a.Allocate(4096)
		require.ErrorIs(t, err, allocator.ErrOutOfMemory)
		require.NoError(t, a.Verify())
		assert.Equal(t, 4*regionMiB, a.Stats().Capacity)
		require.NoError(t, a.Close())
		assert.Zero(t, f.live())
		assert.Equal(t, 4, f.unregistered)
		assert.Zero(t, f.badUnreg, "the failed segment is never unregistered")
	})
	t.Run("driver-error", func(t *testing.T) {
		f := &fakeRegistrar{failAt: 1, failErr: &cudaCallError{801, "error 801 cudaErrorNotSupported"}}
		r, err := NewSegmentedRegion(2*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: f})
		require.NoError(t, err)
		err = waitReady(t, r)
		require.ErrorIs(t, err, ErrCUDAUnavailable)
		assert.NotErrorIs(t, err, ErrOutOfMemory)
		assert.Contains(t, err.Error(), "segment 0 of 2 [0, 1 MiB) of 2 MiB: cudaHostRegister: error 801 cudaErrorNotSupported; 0 bytes in 0 segments")
		require.NoError(t, r.Close())
	})
	t.Run("unregister-error", func(t *testing.T) {
		f := &fakeRegistrar{}
		r, err := NewSegmentedRegion(2*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: f})
		require.NoError(t, err)
		require.NoError(t, waitReady(t, r))
		f.mu.Lock()
		clear(f.registered) // the driver forgot them
		f.mu.Unlock()
		err = r.Close()
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.Contains(t, err.Error(), "unregister segment 0: error 1 cudaErrorInvalidValue")
		assert.Contains(t, err.Error(), "unregister segment 1")
		require.NoError(t, r.Close(), "second Close")
		assert.Nil(t, r.Bytes())
	})
}

// TestSegmentedRegionRealCUDA registers with the real runtime where there
// is one, and checks the error that says what is missing where not.
func TestSegmentedRegionRealCUDA(t *testing.T) {
	r, err := NewSegmentedRegion(8*regionMiB, SegmentedOptions{SegmentSize: 2 * regionMiB, Workers: 2, Pin: PinCUDA})
	if err != nil {
		require.ErrorIs(t, err, ErrCUDAUnavailable)
		assert.Nil(t, r)
		t.Skipf("no CUDA here: %v", err)
	}
	require.NoError(t, waitReady(t, r))
	exerciseRegion(t, r, 8*regionMiB, KindCUDAHost)
}

// TestSegmentedFirstAllocationWhilePinning is the point of a segmented
// region: a 4 GiB pool of 64 MiB segments serves its first allocation while
// the workers are still pinning. The region is closed right after, so only a
// few segments are ever pinned.
func TestSegmentedFirstAllocationWhilePinning(t *testing.T) {
	const size = 4 << 30
	lockedBefore := vmLockedBytes(t)
	pin := PinLock
	r, err := NewSegmentedRegion(size, SegmentedOptions{Workers: 2, Pin: pin})
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer func() {
		require.NoError(t, a.Close())
		assert.Equal(t, lockedBefore, vmLockedBytes(t), "VmLck after Close")
	}()
	var b allocator.Block
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err = a.Allocate(8 * regionMiB); err == nil {
			break
		}
		require.ErrorIs(t, err, allocator.ErrOutOfMemory)
		if e := r.Progress().Err; e != nil {
			if pin == PinLock {
				t.Skipf("mlock refused: %v", e)
			}
			require.NoError(t, e)
		}
		require.True(t, time.Now().Before(deadline), "no segment ready in a minute")
		time.Sleep(50 * time.Microsecond)
	}
	p := r.Progress()
	t.Logf("first allocation %+v after %v: %d of %d segments ready, %d MiB pinned", b, p.Elapsed, p.Ready, p.Segments, p.PinnedBytes>>20)
	assert.False(t, p.Done, "pinning must still be under way")
	assert.Less(t, p.ReadyBytes, int64(size))
	st := a.Stats()
	assert.Less(t, st.Capacity, int64(size), "capacity is the ready part")
	assert.Equal(t, int64(size), a.Capacity())
	require.NoError(t, a.Free(b))
}

// TestSegmentedRegionCloseWhileWorking closes regions whose workers are
// mid-way, with readers racing; run it under -race.
func TestSegmentedRegionCloseWhileWorking(t *testing.T) {
	for round := range 5 {
		f := &fakeRegistrar{delay: time.Duration(round) * 100 * time.Microsecond}
		r, err := NewSegmentedRegion(32*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 4, Pin: PinCUDA, Registrar: f})
		require.NoError(t, err)
		a, err := allocator.New(r, allocator.Options{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				switch g % 3 {
				case 0:
					for range 50 {
						if b, err := a.Allocate(regionMiB / 2); err == nil {
							_ = a.Free(b)
						}
					}
				case 1:
					_ = r.Progress()
					_ = checkProgressMonotone(r)
				case 2:
					err := r.Wait(context.Background())
					if err != nil {
						assert.ErrorIs(t, err, ErrClosed)
					}
				}
			})
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		var closers sync.WaitGroup
		for range 3 {
			closers.Go(func() { assert.NoError(t, a.Close()) })
		}
		closers.Wait()
		wg.Wait()
		assert.Zero(t, f.live(), "round %d: every registered segment unregistered", round)
		assert.Zero(t, f.badUnreg)
		assert.True(t, r.Progress().Done)
		assert.Nil(t, r.Bytes())
	}
}

// checkProgressMonotone reads Progress repeatedly and reports whether the
// ready figures ever went down.
func checkProgressMonotone(r *SegmentedRegion) error {
	var last SegmentProgress
	for range 100 {
		p := r.Progress()
		if p.Ready < last.Ready || p.ReadyBytes < last.ReadyBytes || p.PinnedBytes < last.PinnedBytes {
			return fmt.Errorf("progress went back: %+v after %+v", p, last)
		}
		last = p
	}
	return nil
}

func TestSegmentedRegionWaitContext(t *testing.T) {
	f := &fakeRegistrar{delay: 20 * time.Millisecond}
	r, err := NewSegmentedRegion(64*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: f})
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	err = r.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Regexp(t, `^hostmem: waiting for segmented region: \d+ of 64 segments ready: context deadline exceeded$`, err.Error())
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.Wait(context.Background()), ErrClosed)
	assert.Regexp(t, `^hostmem: closed: segmented region closed with \d+ of 64 segments ready$`, r.Wait(context.Background()).Error())
}

// TestSegmentedRegionProductionSize reserves a 64 GiB pool (address space
// only, MAP_NORESERVE), serves 8 MiB objects from its first segments and
// closes it while the workers are still at the start: Close returns
// promptly and nothing past the segments reached was ever touched.
func TestSegmentedRegionProductionSize(t *testing.T) {
	const size = 64 << 30
	r, err := NewSegmentedRegion(size, SegmentedOptions{Workers: 1})
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: 2 * regionMiB}) // keeps Verify's per-unit walk short
	require.NoError(t, err)
	var bs []allocator.Block
	deadline := time.Now().Add(time.Minute)
	for len(bs) < 8 {
		b, err := a.Allocate(8 * regionMiB)
		if err != nil {
			require.ErrorIs(t, err, allocator.ErrOutOfMemory)
			require.True(t, time.Now().Before(deadline), "no segment ready in a minute")
			time.Sleep(100 * time.Microsecond)
			continue
		}
		bs = append(bs, b)
	}
	assert.Equal(t, int64(size), a.Capacity())
	require.NoError(t, a.Free(bs...))
	require.NoError(t, a.Verify())
	start := time.Now()
	require.NoError(t, a.Close())
	p := r.Progress()
	t.Logf("closed after %d of %d segments in %v", p.Ready, p.Segments, time.Since(start))
	assert.Less(t, p.Ready, p.Segments/4, "closed early")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// unregisterFails is a registrar whose Unregister always fails.
type unregisterFails struct{ fakeRegistrar }

func (f *unregisterFails) Unregister([]byte) error { return errors.New("unregistration refused") }

// TestSegmentedRegionCloseFailureWrapsErrRelease: a Close that cannot give
// memory back (here, every unregistration fails) wraps ErrRelease, as every
// region's does, and not ErrInvalidArgument; the region is closed all the
// same.
func TestSegmentedRegionCloseFailureWrapsErrRelease(t *testing.T) {
	f := &unregisterFails{}
	r, err := NewSegmentedRegion(2*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: f})
	require.NoError(t, err)
	require.NoError(t, r.Wait(context.Background()))
	err = r.Close()
	require.ErrorIs(t, err, ErrRelease)
	require.ErrorIs(t, err, allocator.ErrRelease)
	assert.NotErrorIs(t, err, ErrInvalidArgument)
	assert.True(t, strings.HasPrefix(err.Error(), "hostmem: releasing region memory failed: "), err.Error())
	assert.Contains(t, err.Error(), "unregister segment 0")
	assert.Contains(t, err.Error(), "unregister segment 1")
	assert.Equal(t, 1, strings.Count(err.Error(), "hostmem:"), err.Error())
	assert.Nil(t, r.Bytes())
	require.NoError(t, r.Close(), "the region counts as closed")
}

// gateRegistrar registers the first segment at once and blocks every later
// registration until release is closed; entered is closed when the first
// blocked call starts.
type gateRegistrar struct {
	fakeRegistrar
	entered, release chan struct{}
	once             sync.Once
}

func (g *gateRegistrar) Register(mem []byte) error {
	if g.calls.Load() > 0 {
		g.once.Do(func() { close(g.entered) })
		<-g.release
	}
	return g.fakeRegistrar.Register(mem)
}

// TestSegmentedRegionAllocatorTakesNoRegionLock: the allocator asks a
// segmented region nothing under the region's lock, so a Close that waits
// for a worker stuck in a registration does not block the allocator's
// calls: they return ErrClosed at once. Before, every call took the
// region's mutex (through Bytes) and waited for the worker.
func TestSegmentedRegionAllocatorTakesNoRegionLock(t *testing.T) {
	g := &gateRegistrar{entered: make(chan struct{}), release: make(chan struct{})}
	r, err := NewSegmentedRegion(2*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Pin: PinCUDA, Registrar: g})
	require.NoError(t, err)
	<-g.entered // segment 0 is ready, the worker is stuck on segment 1
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	b, err := a.Allocate(regionMiB)
	require.NoError(t, err)
	require.NoError(t, a.Free(b))

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	for !r.halt.Load() { // Close holds the region's lock and waits for the worker
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Allocate(regionMiB)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, allocator.ErrClosed)
	case <-time.After(10 * time.Second):
		close(g.release)
		require.Fail(t, "Allocate waited for the region's Close")
	}
	close(g.release)
	require.NoError(t, <-closed)
}
