//go:build linux

// Tests for the regions: heap, mmap (with each option), pinned and CUDA host
// memory, their errors, and Close's idempotence and concurrency safety.

package hostmem

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/invariants"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// skipIfMlockRefused skips the test when err is a refused mlock, after
// checking that the error is the documented one.
func skipIfMlockRefused(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.ErrorContains(t, err, "RLIMIT_MEMLOCK")
	t.Skipf("mlock refused on this machine: %v", err)
}

// vmLockedBytes returns VmLck from /proc/self/status, in bytes.
func vmLockedBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmLck:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return n * regionKiB
		}
	}
	require.Fail(t, "no VmLck in /proc/self/status")
	return 0
}

// anonHugeBytes returns AnonHugePages of the mapping that holds addr, from
// /proc/self/smaps, or -1 when it cannot be found.
func anonHugeBytes(addr uintptr) int64 {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if rest, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n * regionKiB
		}
	}
	return -1
}

func TestRegionMmap(t *testing.T) {
	cases := []struct {
		name string
		opts MmapOptions
		kind string
	}{
		{"none", MmapOptions{}, KindMmap},
		{"populate", MmapOptions{Populate: true}, KindMmap},
		{"hugepages", MmapOptions{THP: THPOn}, KindMmap},
		{"no-hugepages", MmapOptions{THP: THPOff}, KindMmap},
		{"populate+hugepages", MmapOptions{Populate: true, THP: THPOn}, KindMmap},
		{"lock", MmapOptions{Pin: PinLock}, KindPinned},
		{"all", MmapOptions{Populate: true, THP: THPOn, Pin: PinLock}, KindPinned},
	}
	sizes := []int64{1, regionMiB, 4 * regionMiB, 3*regionMiB + 123}
	for _, tc := range cases {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", tc.name, size), func(t *testing.T) {
				lockedBefore := vmLockedBytes(t)
				r, err := NewMmapRegion(size, tc.opts)
				if tc.opts.Pin == PinLock {
					skipIfMlockRefused(t, err)
				}
				require.NoError(t, err)

				base := uintptr(unsafe.Pointer(unsafe.SliceData(r.Bytes())))
				assert.Zero(t, base%uintptr(os.Getpagesize()), "mapping not page-aligned")
				hinted, ok := r.(interface{ HintErr() error })
				require.True(t, ok, "mmap region has HintErr")
				if tc.opts.THP == THPOn {
					huge := mmapHugePageSize()
					if int64(huge) <= size {
						assert.Zero(t, base%huge, "huge-page mapping not aligned to %d", huge)
					}
					// Touch every page, then report what the kernel did.
					b := r.Bytes()
					for off := 0; off < len(b); off += os.Getpagesize() {
						b[off] = 0
					}
					t.Logf("THP mode %q, HintErr=%v, AnonHugePages=%d", mmapTHPMode(), hinted.HintErr(), anonHugeBytes(base))
				} else {
					assert.NoError(t, hinted.HintErr())
				}
				if tc.opts.Pin == PinLock {
					locked := vmLockedBytes(t) - lockedBefore
					assert.GreaterOrEqual(t, locked, size, "VmLck grew by %d, want >= %d", locked, size)
				}

				exerciseRegion(t, r, size, tc.kind)
				assert.Equal(t, lockedBefore, vmLockedBytes(t), "VmLck after Close")
			})
		}
	}
}

func TestRegionPinned(t *testing.T) {
	// "pinned" is the mmap region with Lock: a larger one, within the 8 MiB
	// RLIMIT_MEMLOCK that containers commonly get.
	const size = 6 * regionMiB
	r, err := NewMmapRegion(size, MmapOptions{Pin: PinLock, Populate: true})
	skipIfMlockRefused(t, err)
	require.NoError(t, err)
	exerciseRegion(t, r, size, KindPinned)
}

func TestRegionInvalidSize(t *testing.T) {
	ctors := map[string]func(int64) (allocator.Region, error){
		"heap": NewHeapRegion,
		"mmap": func(n int64) (allocator.Region, error) { return NewMmapRegion(n, MmapOptions{}) },
		"pinned": func(n int64) (allocator.Region, error) {
			return NewMmapRegion(n, MmapOptions{Pin: PinLock, Populate: true, THP: THPOn})
		},
		"cuda-host": NewCUDAHostRegion,
	}
	for name, ctor := range ctors {
		for _, size := range []int64{0, -1, -1 << 40, -1 << 63} {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				r, err := ctor(size)
				require.ErrorIs(t, err, ErrInvalidArgument)
				assert.Nil(t, r)
			})
		}
	}
	t.Run("mmap/huge", func(t *testing.T) {
		r, err := NewMmapRegion(1<<63-1, MmapOptions{})
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.Nil(t, r)
	})
	t.Run("mmap/unmappable", func(t *testing.T) {
		// Larger than the 47-bit user address space: mmap refuses it.
		r, err := NewMmapRegion(1<<60, MmapOptions{})
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrInvalidArgument), "%v", err)
		assert.Nil(t, r)
	})
}

func TestRegionMlockErrorMessage(t *testing.T) {
	const inf = unix.RLIM_INFINITY
	cases := []struct {
		name   string
		size   int64
		errno  error
		lim    unix.Rlimit
		limErr error
		want   []string
		absent []string
	}{
		{
			name: "enomem", size: 64 * regionMiB, errno: unix.ENOMEM,
			lim:  unix.Rlimit{Cur: 8 << 20, Max: 8 << 20},
			want: []string{"mlock 64 MiB: cannot allocate memory (RLIMIT_MEMLOCK soft=8388608 hard=8388608 bytes; raise it with ulimit -l or --ulimit memlock=-1:-1)"},
		},
		{
			name: "eperm-zero-limit", size: 4 * regionKiB, errno: unix.EPERM,
			lim:  unix.Rlimit{Cur: 0, Max: 0},
			want: []string{"mlock 4 KiB: operation not permitted", "RLIMIT_MEMLOCK soft=0 hard=0 bytes", "ulimit -l"},
		},
		{
			name: "eagain-hard-unlimited", size: 3*regionMiB + 1, errno: unix.EAGAIN,
			lim:  unix.Rlimit{Cur: 65536, Max: inf},
			want: []string{"mlock 3145729 bytes (3.0 MiB)", "RLIMIT_MEMLOCK soft=65536 hard=unlimited", "--ulimit memlock=-1:-1"},
		},
		{
			name: "soft-unlimited", size: regionMiB, errno: unix.ENOMEM,
			lim:    unix.Rlimit{Cur: inf, Max: inf},
			want:   []string{"RLIMIT_MEMLOCK soft=unlimited hard=unlimited", "not what refused it"},
			absent: []string{"ulimit -l"},
		},
		{
			name: "limit-unreadable", size: regionMiB, errno: unix.ENOMEM,
			limErr: unix.EFAULT,
			want:   []string{"RLIMIT_MEMLOCK unreadable: bad address", "ulimit -l"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := mlockError(tc.size, tc.errno, tc.lim, tc.limErr)
			require.ErrorIs(t, err, ErrOutOfMemory)
			require.ErrorIs(t, err, tc.errno)
			assert.True(t, strings.HasPrefix(err.Error(), "hostmem: out of memory: mlock "), err.Error())
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, err.Error(), a)
			}
		})
	}
}

// TestRegionMlockRefused forces a real refusal: on a thread that drops
// CAP_IPC_LOCK (root bypasses RLIMIT_MEMLOCK only through it), with the soft
// RLIMIT_MEMLOCK lowered to 64 KiB, a 1 MiB locked region must fail with the
// documented error and leave nothing locked.
func TestRegionMlockRefused(t *testing.T) {
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old))
	low := unix.Rlimit{Cur: min(uint64(64*regionKiB), old.Max), Max: old.Max}
	lockedBefore := vmLockedBytes(t)

	var (
		r    allocator.Region
		err  error
		skip string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread whose capabilities were changed exits
		// with this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if e := unix.Capget(&hdr, &data[0]); e != nil {
			skip = fmt.Sprintf("capget: %v", e)
			return
		}
		data[0].Effective &^= 1 << unix.CAP_IPC_LOCK
		if e := unix.Capset(&hdr, &data[0]); e != nil {
			skip = fmt.Sprintf("capset dropping CAP_IPC_LOCK: %v", e)
			return
		}
		if e := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); e != nil {
			skip = fmt.Sprintf("setrlimit RLIMIT_MEMLOCK: %v", e)
			return
		}
		defer func() { _ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) }()
		r, err = NewMmapRegion(regionMiB, MmapOptions{Pin: PinLock})
	}()
	<-done
	var now unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &now))
	require.Equal(t, old, now, "RLIMIT_MEMLOCK restored")
	if skip != "" {
		t.Skipf("cannot force an mlock refusal here: %s", skip)
	}
	if err == nil {
		_ = r.Close()
		t.Skip("mlock of 1 MiB succeeded without CAP_IPC_LOCK under a 64 KiB RLIMIT_MEMLOCK (kernel ignores the limit?)")
	}
	t.Logf("refusal: %v", err)
	require.Nil(t, r)
	require.ErrorIs(t, err, ErrOutOfMemory)
	assert.True(t, errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EAGAIN), "%v", err)
	assert.Contains(t, err.Error(), "mlock 1 MiB")
	assert.Contains(t, err.Error(), fmt.Sprintf("RLIMIT_MEMLOCK soft=%d ", low.Cur))
	assert.Equal(t, lockedBefore, vmLockedBytes(t), "nothing left locked")
}

func TestRegionCUDAHost(t *testing.T) {
	const size = 64 * regionMiB
	for i := range 2 { // the second call takes the cached path
		var (
			r   allocator.Region
			err error
		)
		require.NotPanics(t, func() { r, err = NewCUDAHostRegion(size) })
		if err != nil {
			t.Logf("call %d: %v", i, err)
			require.ErrorIs(t, err, ErrCUDAUnavailable)
			assert.Nil(t, r)
			msg := err.Error()
			assert.True(t,
				strings.Contains(msg, "CUDA runtime library not found (tried libcudart.so, libcudart.so.13, libcudart.so.12, libcudart.so.11.0)") ||
					strings.Contains(msg, "no CUDA driver") ||
					strings.Contains(msg, "no CUDA device"),
				"error does not say what is missing: %s", msg)
			continue
		}
		exerciseRegion(t, r, size, KindCUDAHost)
	}
}

func TestRegionCUDALoad(t *testing.T) {
	t.Run("missing-library", func(t *testing.T) {
		var (
			rt  *cudaRuntime
			err error
		)
		require.NotPanics(t, func() { rt, err = cudaLoadRuntime([]string{"libkvalloc-none.so", "libkvalloc-none.so.1"}) })
		require.ErrorIs(t, err, ErrCUDAUnavailable)
		assert.Nil(t, rt)
		assert.Contains(t, err.Error(), "CUDA runtime library not found (tried libkvalloc-none.so, libkvalloc-none.so.1)")
	})
	t.Run("missing-symbols", func(t *testing.T) {
		// libc loads but has no cudaHostAlloc: an error, never a panic.
		var (
			rt  *cudaRuntime
			err error
		)
		require.NotPanics(t, func() { rt, err = cudaLoadRuntime([]string{"libkvalloc-none.so", "libc.so.6"}) })
		require.ErrorIs(t, err, ErrCUDAUnavailable)
		assert.Nil(t, rt)
		assert.Contains(t, err.Error(), "libc.so.6 lacks symbol cudaHostAlloc")
	})
}

// fakeCUDA is a CUDA runtime whose host memory is an anonymous mapping.
type fakeCUDA struct {
	driver, devices, deviceErr, allocErr, freeErr int32
	allocs, frees                                 atomic.Int32
	panicOnCount                                  bool
}

func (f *fakeCUDA) runtime() *cudaRuntime {
	sizes := sync.Map{}
	return &cudaRuntime{
		soname: "fake",
		driverGetVersion: func(v *int32) int32 {
			*v = f.driver
			return cudaSuccess
		},
		runtimeGetVersion: func(v *int32) int32 {
			*v = 12040
			return cudaSuccess
		},
		getDeviceCount: func(n *int32) int32 {
			if f.panicOnCount {
				panic("fake runtime blew up")
			}
			*n = f.devices
			return f.deviceErr
		},
		getErrorName: func(code int32) string { return fmt.Sprintf("cudaErrorFake%d", code) },
		getErrorString: func(code int32) string {
			return fmt.Sprintf("fake text for %d", code)
		},
		hostAlloc: func(p *unsafe.Pointer, size uintptr, flags uint32) int32 {
			if flags != 0 {
				return cudaErrorInvalidValue
			}
			if f.allocErr != cudaSuccess {
				return f.allocErr
			}
			m, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return cudaErrorMemoryAllocation
			}
			sizes.Store(m, size)
			f.allocs.Add(1)
			*p = m
			return cudaSuccess
		},
		freeHost: func(p unsafe.Pointer) int32 {
			f.frees.Add(1)
			size, ok := sizes.LoadAndDelete(p)
			if !ok {
				return cudaErrorInvalidValue
			}
			if err := unix.MunmapPtr(p, size.(uintptr)); err != nil {
				return cudaErrorInvalidValue
			}
			return f.freeErr
		},
	}
}

func TestRegionCUDAFake(t *testing.T) {
	cases := []struct {
		name    string
		fake    fakeCUDA
		target  error
		want    []string
		success bool
	}{
		{name: "no-driver-version-0", fake: fakeCUDA{driver: 0, devices: 1},
			target: ErrCUDAUnavailable, want: []string{"no CUDA driver", "driver version 0", "runtime 12.4"}},
		{name: "insufficient-driver", fake: fakeCUDA{driver: 12000, deviceErr: cudaErrorInsufficientDriver},
			target: ErrCUDAUnavailable, want: []string{"no CUDA driver", "error 35 cudaErrorFake35: fake text for 35"}},
		{name: "stub-library", fake: fakeCUDA{driver: 12000, deviceErr: cudaErrorStubLibrary},
			target: ErrCUDAUnavailable, want: []string{"no CUDA driver", "error 34"}},
		{name: "no-device-error", fake: fakeCUDA{driver: 12000, deviceErr: cudaErrorNoDevice},
			target: ErrCUDAUnavailable, want: []string{"no CUDA device", "error 100"}},
		{name: "zero-devices", fake: fakeCUDA{driver: 12000, devices: 0},
			target: ErrCUDAUnavailable, want: []string{"no CUDA device", "0 devices"}},
		{name: "other-query-error", fake: fakeCUDA{driver: 12000, deviceErr: 999},
			target: ErrCUDAUnavailable, want: []string{"CUDA device query failed", "error 999"}},
		{name: "alloc-oom", fake: fakeCUDA{driver: 12000, devices: 1, allocErr: cudaErrorMemoryAllocation},
			target: ErrOutOfMemory, want: []string{"cudaHostAlloc 1 MiB", "error 2"}},
		{name: "runtime-panics", fake: fakeCUDA{driver: 12000, devices: 1, panicOnCount: true},
			target: ErrCUDAUnavailable, want: []string{"fake runtime blew up"}},
		{name: "ok", fake: fakeCUDA{driver: 12000, devices: 2}, success: true},
	}
	for i := range cases {
		tc := &cases[i]
		t.Run(tc.name, func(t *testing.T) {
			var (
				r   allocator.Region
				err error
			)
			require.NotPanics(t, func() { r, err = newCUDAHostRegion(tc.fake.runtime(), regionMiB) })
			if !tc.success {
				require.ErrorIs(t, err, tc.target)
				assert.Nil(t, r)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w)
				}
				assert.Zero(t, tc.fake.allocs.Load())
				return
			}
			require.NoError(t, err)
			exerciseRegion(t, r, regionMiB, KindCUDAHost)
			assert.Equal(t, int32(1), tc.fake.allocs.Load())
			assert.Equal(t, int32(1), tc.fake.frees.Load(), "cudaFreeHost called once")
		})
	}
	t.Run("free-error", func(t *testing.T) {
		f := &fakeCUDA{driver: 12000, devices: 1, freeErr: 4}
		r, err := newCUDAHostRegion(f.runtime(), regionMiB)
		require.NoError(t, err)
		err = r.Close()
		require.ErrorIs(t, err, ErrRelease)
		require.NotErrorIs(t, err, ErrInvalidArgument)
		assert.Contains(t, err.Error(), "cudaFreeHost: error 4")
		require.NoError(t, r.Close(), "second Close after a failed one")
		assert.Equal(t, int32(1), f.frees.Load())
	})
}

// TestRegionConcurrentClose closes each kind of region from many goroutines
// at once, with readers of Bytes racing them; run it under -race.
func TestRegionConcurrentClose(t *testing.T) {
	fake := &fakeCUDA{driver: 12000, devices: 1}
	ctors := []struct {
		name string
		new  func() (allocator.Region, error)
	}{
		{"heap", func() (allocator.Region, error) { return NewHeapRegion(regionMiB) }},
		{"mmap", func() (allocator.Region, error) { return NewMmapRegion(regionMiB, MmapOptions{}) }},
		{"pinned", func() (allocator.Region, error) { return NewMmapRegion(regionMiB, MmapOptions{Pin: PinLock}) }},
		{"cuda-host-fake", func() (allocator.Region, error) { return newCUDAHostRegion(fake.runtime(), regionMiB) }},
	}
	for _, c := range ctors {
		t.Run(c.name, func(t *testing.T) {
			const rounds, closers = 20, 16
			for range rounds {
				r, err := c.new()
				if c.name == "pinned" {
					skipIfMlockRefused(t, err)
				}
				require.NoError(t, err)
				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					errs  = make(chan error, closers)
				)
				for g := range closers {
					wg.Go(func() {
						<-start
						if g%2 == 0 {
							_ = len(r.Bytes()) // races Close; must not be a data race
						}
						errs <- r.Close()
					})
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				require.Nil(t, r.Bytes())
			}
		})
	}
	assert.Equal(t, fake.allocs.Load(), fake.frees.Load(), "every fake cudaHostAlloc freed exactly once")
}

// TestRegionFailedMunmapIsErrRelease: a failed munmap in Close wraps
// ErrRelease and the errno, not ErrInvalidArgument (a review finding:
// before the fix it was wrapped in ErrInvalidArgument).
func TestRegionFailedMunmapIsErrRelease(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	// An unaligned base makes munmap fail with EINVAL.
	r := &mmapRegion{base: unsafe.Pointer(&mem[1]), length: uintptr(page), size: int64(page), kind: KindMmap}
	err = r.Close()
	require.ErrorIs(t, err, ErrRelease)
	require.ErrorIs(t, err, unix.EINVAL)
	require.NotErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, 1, strings.Count(err.Error(), "hostmem:"), err.Error())
	require.NoError(t, r.Close(), "the region counts as closed")
}

// overcommitMode returns /proc/sys/vm/overcommit_memory.
func overcommitMode(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		t.Skipf("overcommit policy unreadable: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestRegionNoReserveReservesWithoutMemory: a 1 TiB NoReserve region maps,
// an allocator over it hands out 8 MiB blocks, and neither costs resident
// memory (before NoReserve, NewMmapRegion could not reserve more than RAM
// + swap).
func TestRegionNoReserveReservesWithoutMemory(t *testing.T) {
	if overcommitMode(t) == "2" {
		t.Skip("vm.overcommit_memory=2: the kernel ignores MAP_NORESERVE")
	}
	rssBefore := vmRSSBytes(t)
	r, err := NewMmapRegion(1<<40, MmapOptions{NoReserve: true})
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	bs, err := a.AllocateBatch(8<<20, 5700, allocator.Scattered)
	require.NoError(t, err)
	require.NoError(t, a.Free(bs...))
	grown := vmRSSBytes(t) - rssBefore
	assert.Less(t, grown, int64(64<<20), "a 1 TiB NoReserve pool and a 5700-block batch grew RSS by %d bytes", grown)

	for _, bad := range []MmapOptions{
		{NoReserve: true, Populate: true}, {NoReserve: true, Pin: PinLock},
		{Pin: PinCUDA}, {Pin: 7}, {THP: -1}, {THP: 3},
	} {
		_, err := NewMmapRegion(regionMiB, bad)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", bad)
	}
}

// TestRegionOutOfMemoryNamesOvercommit: a mapping the kernel refuses names
// vm.overcommit_memory and what it means, since that setting is what
// refuses a reservation larger than RAM + swap.
func TestRegionOutOfMemoryNamesOvercommit(t *testing.T) {
	mode := overcommitMode(t)
	avail, ok := meminfoAvailable()
	if !ok || mode == "1" {
		t.Skip("the kernel does not refuse large mappings here")
	}
	size := int64(avail) + 1<<40 // more than RAM + swap, well inside the address space
	r, err := NewMmapRegion(size, MmapOptions{})
	if err == nil {
		r.Close()
		t.Skipf("the kernel mapped %d bytes without reserve", size)
	}
	require.ErrorIs(t, err, ErrOutOfMemory)
	assert.Contains(t, err.Error(), "/proc/sys/vm/overcommit_memory is "+mode)
	if mode == "0" {
		assert.Contains(t, err.Error(), "NoReserve")
	}
	assert.Equal(t, 1, strings.Count(err.Error(), "hostmem:"), err.Error())
}

// TestNewTouchesNoMemoryForCapacity: New over a 1 TiB region allocates a
// few hundred bytes, not metadata in proportion to the capacity (before,
// two bitmaps of 2 bits per 4 KiB unit cost 64 MiB for 1 TiB).
func TestNewTouchesNoMemoryForCapacity(t *testing.T) {
	if invariants.Enabled {
		t.Skip("the invariants build's table of region memory allocates at New")
	}
	if overcommitMode(t) == "2" {
		t.Skip("vm.overcommit_memory=2: the kernel ignores MAP_NORESERVE")
	}
	// TotalAlloc counts every goroutine's allocations, the runtime's and
	// other tests' too, so one reading can only overstate New's: the
	// least of five is the measurement.
	for _, size := range []int64{1 << 30, 1 << 40} {
		least := uint64(math.MaxUint64)
		for range 5 {
			r, err := NewMmapRegion(size, MmapOptions{NoReserve: true})
			require.NoError(t, err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			a, err := allocator.New(r, allocator.Options{})
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
			require.NoError(t, a.Close())
		}
		t.Logf("New over %s allocated %d bytes (the least of 5)", regionSizeString(size), least)
		assert.Less(t, least, uint64(8<<10), "New over %d bytes allocated %d bytes", size, least)
	}
}

// vmRSSBytes returns VmRSS from /proc/self/status, in bytes.
func vmRSSBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return n * regionKiB
		}
	}
	require.Fail(t, "no VmRSS in /proc/self/status")
	return 0
}
