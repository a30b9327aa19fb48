// Segmented region contract: the pool's address space is reserved up front
// (an anonymous private mapping with MAP_NORESERVE, or a shared mapping of a
// sealed memfd that other processes can map too; off the Go heap, no memory
// behind it yet) and becomes usable segment by segment while background
// workers populate and pin it. An allocator.Allocator over it serves from
// the segments already ready and grows as more become ready (GrowingRegion).
// Like every region it must never hold Go pointers, and its memory is
// released by Close, and only by Close. Linux only: elsewhere the
// constructor returns an error.

package hostmem

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// DefaultSegmentSize is SegmentedOptions.SegmentSize when it is 0: 64 MiB,
// LMCache's lazy-pinning step. It is a multiple of the 2 MiB huge page, far
// below cudaHostRegister's ceiling (one registration of 512 GiB or more
// fails), small enough that the first segment of a pool is
// ready in milliseconds, and large enough that a 1 TiB pool is 16384
// segments.
const DefaultSegmentSize = 64 << 20

// MaxSegmentSize is the largest SegmentedOptions.SegmentSize: 64 GiB, well
// below the 512 GiB at which one cudaHostRegister call is known to fail.
const MaxSegmentSize = 64 << 30

// HostRegistrar registers host memory with a device driver so the device
// can DMA to and from it, as cudaHostRegister does. NewCUDARegistrar
// returns the real one; tests and other accelerators supply their own.
// Register and Unregister are called from the region's workers, several at
// once, each on a different segment.
type HostRegistrar interface {
	// Register pins mem for DMA. mem is page-aligned and populated.
	Register(mem []byte) error
	// Unregister undoes Register on exactly the same mem.
	Unregister(mem []byte) error
}

// SegmentedOptions configures NewSegmentedRegion.
type SegmentedOptions struct {
	// SegmentSize is the unit of work: a positive multiple of the page size
	// (of the huge-page size under THPOn or MemfdOptions.HugeTLB), at most
	// MaxSegmentSize. 0 means DefaultSegmentSize. The last segment may be
	// shorter.
	SegmentSize int64
	// Workers is the number of background workers. 0 means
	// runtime.GOMAXPROCS(0), the CPUs available to the process (it follows
	// the cgroup CPU limit since Go 1.25). It is capped at the number of
	// segments.
	Workers int
	// Pin says what makes a populated segment ready: nothing, mlock, or
	// CUDA registration.
	Pin PinMode
	// Registrar registers segments under PinCUDA. nil means the CUDA
	// runtime, loaded as NewCUDARegistrar does. It must be nil for the
	// other modes.
	Registrar HostRegistrar
	// THP is the transparent-huge-page policy of the whole reservation.
	THP THPMode
	// NUMANodes, when not empty, binds the reservation to these NUMA nodes
	// (mbind MPOL_BIND) before any page is touched. Nodes are 0..1023.
	NUMANodes []int
	// Memfd, when not nil, backs the region with a memfd_create file
	// (MFD_CLOEXEC) instead of anonymous memory, mapped MAP_SHARED and
	// sealed against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW,
	// then F_SEAL_SEAL, so no seal can be added or removed): another
	// process given the file descriptor (FD, passed over a Unix socket with
	// SCM_RIGHTS) maps the same pages, and neither side can truncate them
	// under the other. The file's pages are allocated only when first
	// touched, like a NoReserve mapping's, and freed when the region is
	// closed and every other process has unmapped and closed its copy.
	Memfd *MemfdOptions
	// NoReserve makes every segment ready without populating it: pages are
	// backed only when first touched, as with MmapOptions.NoReserve, so a
	// pool larger than RAM costs nothing until it is written. The risk is
	// the same: a first touch the kernel cannot back is a SIGBUS or the
	// OOM killer at the write. Use it for tests and benchmarks at
	// production sizes, and for pools whose working set is known to fit.
	// NoReserve with a Pin other than PinNone is a contradiction and an
	// error wrapping ErrInvalidArgument.
	NoReserve bool
	// NUMABestEffort turns a binding the system forbids (EPERM: a
	// container's seccomp profile or a missing CAP_SYS_NICE; ENOSYS: a
	// kernel without NUMA) into a hint: the region is created unbound and
	// HintErr says why. Without it such a refusal fails the constructor. A
	// node that does not exist always fails it.
	NUMABestEffort bool
}

// MemfdOptions configures the memfd behind a shared segmented region
// (SegmentedOptions.Memfd).
type MemfdOptions struct {
	// Name is the file's name, shown as "/memfd:Name" in /proc/PID/maps
	// and /proc/PID/fd. "" means "kvalloc".
	Name string
	// HugeTLB backs the file with explicit huge pages from the kernel's
	// hugetlb pool (MFD_HUGETLB, the default huge page size, Hugepagesize
	// in /proc/meminfo). The pool (vm.nr_hugepages) must hold the whole
	// region: the mapping reserves its pages at once, and when it cannot
	// the constructor fails with an error wrapping ErrOutOfMemory that
	// names HugePages_Total and HugePages_Free. SegmentSize must then be a
	// multiple of the huge page, and THP must be THPDefault.
	HugeTLB bool
	// FD, when positive, is an existing memfd to map instead of creating
	// one: the pool of a daemon that handed it over, whose bytes must be
	// kept. Its size must be the region's size rounded up to the page, and
	// it must be sealed against shrinking and growing; otherwise the
	// constructor fails with an error wrapping ErrInvalidArgument (and
	// leaves FD open). Once the constructor succeeds the region owns FD
	// and Close closes it. Use it with NoReserve: populating writes to
	// pages on kernels before 5.14, and a failed segment's pages are
	// punched out of the file.
	FD int
}

// SegmentProgress is a snapshot of a segmented region's preparation, and
// the one place its figures are reported.
type SegmentProgress struct {
	Segments    int   // segments in the region
	SegmentSize int64 // bytes in a segment; the last may be shorter
	Workers     int   // background workers, after the defaults and the cap
	Ready       int   // segments ready (populated and pinned as asked)
	Failed      int   // segments that failed; at most Workers
	// TotalBytes is the region's size; ReadyBytes the bytes in ready
	// segments; PinnedBytes the part of them locked or registered (0 under
	// PinNone).
	TotalBytes, ReadyBytes, PinnedBytes int64
	// Done is true once the workers have stopped: every segment ready, or
	// stopped by the first failure or by Close.
	Done bool
	// Elapsed is the time from the constructor to Done, or to now while
	// the workers run.
	Elapsed time.Duration
	// Err is the first failure, or nil.
	Err error
}

// SegmentError is the error of a segment that could not be made ready. It
// wraps ErrOutOfMemory when a memory limit refused it (else
// ErrInvalidArgument or ErrCUDAUnavailable) and the system's error, and
// its message names the segment and the limit, e.g.
//
//	hostmem: out of memory: segment 3 of 64 [192 MiB, 256 MiB) of 4 GiB:
//	mlock: cannot allocate memory (RLIMIT_MEMLOCK soft=201326592 bytes
//	hard=unlimited, 192 MiB locked by this process; raise it with ulimit -l
//	or --ulimit memlock=-1:-1); 192 MiB in 3 segments stay ready and serving
type SegmentError struct {
	Index, Segments int    // the segment, and how many the region has
	Offset, Size    int64  // the segment's bytes in the region
	Total           int64  // the region's size
	Op              string // what failed: "populate", "mlock" or "cudaHostRegister"
	Limit           string // the limit that applies and its values; "" when none is known
	ReadyBytes      int64  // bytes ready when it failed; they keep serving
	ReadySegments   int    // segments ready when it failed
	Kind            error  // the package sentinel
	Err             error  // the system's or driver's error
}

// Error describes the failure, the segment and the limit.
func (e *SegmentError) Error() string {
	s := fmt.Sprintf("%v: segment %d of %d [%s, %s) of %s: %s: %v", e.Kind, e.Index, e.Segments,
		regionOffsetString(e.Offset), regionOffsetString(e.Offset+e.Size), regionOffsetString(e.Total), e.Op, e.Err)
	if e.Limit != "" {
		s += " (" + e.Limit + ")"
	}
	return s + fmt.Sprintf("; %s in %d segments stay ready and serving", regionSizeString(e.ReadyBytes), e.ReadySegments)
}

// Unwrap returns the sentinel and the cause.
func (e *SegmentError) Unwrap() []error { return []error{e.Kind, e.Err} }

// regionOffsetString formats a byte offset: "0", "64 MiB" or "N bytes (X MiB)".
func regionOffsetString(n int64) string {
	if n == 0 {
		return "0"
	}
	return regionSizeString(n)
}

// Segment states.
const (
	segPending uint32 = iota
	segReady
	segFailed
)

// SegmentedRegion is a Region whose memory becomes usable segment by
// segment: see NewSegmentedRegion. All its methods are safe for concurrent
// use.
type SegmentedRegion struct {
	os      segOS // the platform's half: reservation, populate, pin, release
	size    int64
	segSize int64
	nseg    int
	workers int
	pin     PinMode
	lazy    bool // SegmentedOptions.NoReserve: segments are ready unpopulated
	reg     HostRegistrar
	kind    string
	hintErr error
	start   time.Time

	mu     sync.Mutex // guards closed and Close
	closed bool
	shared allocator.RegionState

	halt  atomic.Bool  // no new segments: Close or a failure
	next  atomic.Int64 // the next segment a worker claims
	state []atomic.Uint32

	logMu sync.Mutex   // serializes appends to log
	log   []int32      // segments in the order they became ready
	nlog  atomic.Int64 // published length of log

	readyBytes, pinnedBytes atomic.Int64
	failed                  atomic.Int32
	errMu                   sync.Mutex
	err                     error // the first failure
	wg                      sync.WaitGroup
	done                    chan struct{} // closed when the workers have stopped
	elapsed                 atomic.Int64  // ns from start to done, once done
}

var _ allocator.GrowingRegion = (*SegmentedRegion)(nil)

// NewSegmentedRegion reserves size bytes of address space and starts
// opts.Workers background workers that make it usable segment by segment:
// each claims the lowest segment not yet claimed, populates it
// (MADV_POPULATE_WRITE, or a write to every page on kernels before 5.14),
// then pins it as opts.Pin says (mlock, or registration with the CUDA
// driver). The constructor returns at once, before any segment is ready:
// use Wait, Done and Progress to follow the workers, and give the region
// to allocator.New, which serves from the ready segments and grows with them.
//
// Before the workers start, the constructor applies the huge-page policy
// (opts.THP) and the NUMA binding (opts.NUMANodes) to the whole reservation,
// so every page is faulted in under them.
//
// With opts.Memfd the pool is a memfd_create file, sealed against
// shrinking and growing and mapped MAP_SHARED, whose descriptor FD returns
// for other processes to map; with opts.NoReserve the workers populate
// nothing and each segment is ready at once, its pages backed at first
// touch.
//
// The first segment that fails stops the workers: no further segment is
// started. Its error, a *SegmentError naming the segment and the limit that
// refused it (RLIMIT_MEMLOCK with its soft and hard values, cgroup
// memory.max, overcommit), is returned by Wait and in Progress; its memory is
// released. The segments already ready keep serving.
//
// Close stops the workers (each finishes the segment it is on), unpins
// every ready segment (munlock, cudaHostUnregister) and unmaps the
// reservation.
//
// Invalid options, or size <= 0, return an error wrapping
// ErrInvalidArgument; a refused reservation wraps ErrOutOfMemory and names
// the overcommit policy; a refused NUMA binding names the cause; PinCUDA
// without a usable CUDA runtime wraps ErrCUDAUnavailable. Off Linux the
// constructor always fails with an error wrapping ErrInvalidArgument and
// errors.ErrUnsupported.
func NewSegmentedRegion(size int64, opts SegmentedOptions) (*SegmentedRegion, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: segmented region size %d: must be positive", ErrInvalidArgument, size)
	}
	if err := segSupported(); err != nil {
		return nil, err
	}
	segSize := opts.SegmentSize
	if segSize == 0 {
		segSize = DefaultSegmentSize
	}
	page := int64(segPageSize())
	hugeTLB := opts.Memfd != nil && opts.Memfd.HugeTLB
	switch {
	case hugeTLB:
		page = int64(segHugeTLBPageSize())
	case opts.THP == THPOn:
		page = int64(segHugePageSize())
	}
	switch {
	case segSize < 0 || segSize%page != 0:
		return nil, fmt.Errorf("%w: segment size %d is not a positive multiple of the %s page", ErrInvalidArgument, segSize, regionSizeString(page))
	case segSize > MaxSegmentSize:
		return nil, fmt.Errorf("%w: segment size %s exceeds MaxSegmentSize (%s)", ErrInvalidArgument, regionSizeString(segSize), regionSizeString(MaxSegmentSize))
	case opts.Workers < 0:
		return nil, fmt.Errorf("%w: %d workers", ErrInvalidArgument, opts.Workers)
	case opts.Pin < PinNone || opts.Pin > PinCUDA:
		return nil, fmt.Errorf("%w: unknown pin mode %d", ErrInvalidArgument, int(opts.Pin))
	case opts.Registrar != nil && opts.Pin != PinCUDA:
		return nil, fmt.Errorf("%w: a Registrar needs Pin: PinCUDA, not %v", ErrInvalidArgument, opts.Pin)
	case opts.THP < THPDefault || opts.THP > THPOff:
		return nil, fmt.Errorf("%w: unknown THP mode %d", ErrInvalidArgument, int(opts.THP))
	case opts.NoReserve && opts.Pin != PinNone:
		return nil, fmt.Errorf("%w: NoReserve with Pin: %v: pinning commits the memory NoReserve leaves unbacked", ErrInvalidArgument, opts.Pin)
	case hugeTLB && opts.THP != THPDefault:
		return nil, fmt.Errorf("%w: HugeTLB with THP mode %d: explicit huge pages take no transparent-huge-page policy", ErrInvalidArgument, int(opts.THP))
	case uint64(size) > uint64(maxRegionInt)-uint64(2*page):
		return nil, fmt.Errorf("%w: segmented region size %d exceeds the address space", ErrInvalidArgument, size)
	}
	for _, n := range opts.NUMANodes {
		if n < 0 || n >= segMaxNUMANodes {
			return nil, fmt.Errorf("%w: NUMA node %d out of range [0, %d)", ErrInvalidArgument, n, segMaxNUMANodes)
		}
	}
	nseg64 := (size + segSize - 1) / segSize
	if nseg64 > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d segments of %s is too many; raise SegmentSize", ErrInvalidArgument, nseg64, regionSizeString(segSize))
	}
	nseg := int(nseg64)
	workers := opts.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, nseg)

	reg := opts.Registrar
	if opts.Pin == PinCUDA && reg == nil {
		var err error
		if reg, err = NewCUDARegistrar(); err != nil {
			return nil, err
		}
	}
	r := &SegmentedRegion{
		size: size, segSize: segSize, nseg: nseg, workers: workers,
		pin: opts.Pin, lazy: opts.NoReserve, reg: reg, kind: KindMmap,
		state: make([]atomic.Uint32, nseg),
		log:   make([]int32, nseg),
		done:  make(chan struct{}),
	}
	switch opts.Pin {
	case PinLock:
		r.kind = KindPinned
	case PinCUDA:
		r.kind = KindCUDAHost
	}
	hint, err := r.os.reserve(size, uintptr(page), opts)
	if err != nil {
		return nil, err
	}
	r.hintErr = hint
	r.start = time.Now()
	r.wg.Add(workers)
	for range workers {
		go r.work()
	}
	go func() {
		r.wg.Wait()
		r.elapsed.Store(int64(time.Since(r.start)))
		close(r.done)
	}()
	return r, nil
}

// work is one background worker: it claims segments in ascending order
// until none is left, the region is halted, or a segment fails.
func (r *SegmentedRegion) work() {
	defer r.wg.Done()
	for !r.halt.Load() {
		i := r.next.Add(1) - 1
		if i >= int64(r.nseg) {
			return
		}
		if err := r.prepare(int(i)); err != nil {
			r.fail(int(i), err)
			return
		}
		r.publish(int(i))
	}
}

// bounds returns segment i's offset and size.
func (r *SegmentedRegion) bounds(i int) (off, size int64) {
	off = int64(i) * r.segSize
	return off, min(r.segSize, r.size-off)
}

// prepare populates and pins segment i. On failure it leaves the segment
// unpinned and its pages released, and returns a *SegmentError.
func (r *SegmentedRegion) prepare(i int) error {
	off, size := r.bounds(i)
	mem := r.os.segment(off, size)
	e := &SegmentError{Index: i, Segments: r.nseg, Offset: off, Size: size, Total: r.size}
	switch {
	case !r.lazy && r.fill(e, "populate", r.os.populate(mem)):
	case r.pin == PinLock && r.fill(e, "mlock", r.os.lock(mem)):
	case r.pin == PinCUDA && r.fill(e, "cudaHostRegister", r.reg.Register(mem)):
	default:
		return nil
	}
	r.os.release(mem)
	e.ReadyBytes, e.ReadySegments = r.readyBytes.Load(), int(r.nlog.Load())
	return e
}

// fill records a failed operation op in e and reports whether err is one;
// it names the limit that applies: RLIMIT_MEMLOCK for mlock, the memory
// limits for a refused populate or an out-of-memory registration.
func (r *SegmentedRegion) fill(e *SegmentError, op string, err error) bool {
	if err == nil {
		return false
	}
	e.Op, e.Err, e.Kind = op, err, ErrOutOfMemory
	switch {
	case op == "mlock":
		e.Limit = segMemlockLimitText()
	case op == "cudaHostRegister" && !errors.Is(err, ErrOutOfMemory):
		e.Kind = ErrCUDAUnavailable
	default:
		e.Limit = segMemoryLimitText()
	}
	return true
}

// publish makes segment i visible to Grown and GrownRange.
func (r *SegmentedRegion) publish(i int) {
	_, size := r.bounds(i)
	r.state[i].Store(segReady)
	if r.pin != PinNone {
		r.pinnedBytes.Add(size)
	}
	r.readyBytes.Add(size)
	r.logMu.Lock()
	n := r.nlog.Load()
	r.log[n] = int32(i)
	r.nlog.Store(n + 1)
	r.logMu.Unlock()
}

// fail records segment i's failure and halts the workers.
func (r *SegmentedRegion) fail(i int, err error) {
	r.state[i].Store(segFailed)
	r.failed.Add(1)
	r.halt.Store(true)
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// Bytes returns the whole reservation, exactly the size asked for, or nil
// after Close. Only the ready segments are populated and pinned; the
// allocator hands out nothing else.
func (r *SegmentedRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	return r.os.segment(0, r.size)
}

// State returns the region's state, shared with the allocator over it;
// for allocator.Region.
func (r *SegmentedRegion) State() *allocator.RegionState { return &r.shared }

// FD returns the memfd behind the region (SegmentedOptions.Memfd), or -1
// for an anonymous region or once the region is closed. The region owns
// it and closes it in Close; a process that is to map the pool gets its own
// copy of it (dup, or the kernel's copy when it is sent over a Unix socket
// with SCM_RIGHTS, unix.UnixRights), which stays valid after Close. The
// file's size is Bytes' length rounded up to the page (the huge page
// under HugeTLB), and its seals forbid changing it.
func (r *SegmentedRegion) FD() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return -1
	}
	return r.os.file()
}

// Kind returns "mmap" (PinNone), "pinned" (PinLock) or "cuda-host"
// (PinCUDA).
func (r *SegmentedRegion) Kind() string { return r.kind }

// HintErr returns why an advisory setting had no effect (a refused
// huge-page hint, a NUMA binding skipped under NUMABestEffort), or nil.
func (r *SegmentedRegion) HintErr() error { return r.hintErr }

// Grown returns how many segments are ready; for GrowingRegion. It is one
// atomic load.
func (r *SegmentedRegion) Grown() int { return int(r.nlog.Load()) }

// GrownRange returns the i-th segment to become ready; for GrowingRegion.
func (r *SegmentedRegion) GrownRange(i int) (off, size int64) {
	if i < 0 || int64(i) >= r.nlog.Load() {
		panic(fmt.Sprintf("hostmem: GrownRange(%d) with %d ranges grown", i, r.nlog.Load()))
	}
	return r.bounds(int(r.log[i]))
}

// GrowGranularity returns the segment size; for GrowingRegion.
func (r *SegmentedRegion) GrowGranularity() int64 { return r.segSize }

// firstErr returns the first segment failure, a *SegmentError, or nil.
func (r *SegmentedRegion) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Done returns a channel closed when the workers have stopped: every
// segment ready, or stopped by a failure or by Close.
func (r *SegmentedRegion) Done() <-chan struct{} { return r.done }

// Wait returns nil when every segment is ready, the first failure (a
// *SegmentError) as soon as the workers have stopped after it, an error
// wrapping ErrClosed when Close stopped them first, or, when ctx ends
// first, an error wrapping ctx.Err() that says how far they got.
func (r *SegmentedRegion) Wait(ctx context.Context) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("hostmem: waiting for segmented region: %d of %d segments ready: %w", r.Grown(), r.nseg, ctx.Err())
	}
	if err := r.firstErr(); err != nil {
		return err
	}
	if n := r.Grown(); n < r.nseg {
		return fmt.Errorf("%w: segmented region closed with %d of %d segments ready", ErrClosed, n, r.nseg)
	}
	return nil
}

// Progress returns a snapshot of the workers' progress: the segments, the
// bytes ready and pinned (they only grow), the first failure.
func (r *SegmentedRegion) Progress() SegmentProgress {
	p := SegmentProgress{
		Segments:    r.nseg,
		SegmentSize: r.segSize,
		Workers:     r.workers,
		Ready:       r.Grown(),
		Failed:      int(r.failed.Load()),
		TotalBytes:  r.size,
		ReadyBytes:  r.readyBytes.Load(),
		PinnedBytes: r.pinnedBytes.Load(),
		Err:         r.firstErr(),
	}
	select {
	case <-r.done:
		p.Done, p.Elapsed = true, time.Duration(r.elapsed.Load())
	default:
		p.Elapsed = time.Since(r.start)
	}
	return p
}

// Close stops the workers, waits for each to finish its segment, unpins
// every ready segment (munlock, or the registrar's Unregister) and unmaps
// the reservation. It is idempotent and safe to call concurrently; every
// call after the first returns nil. An unpin or unmap failure is returned,
// after everything else has been released.
func (r *SegmentedRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.shared.MarkClosed()
	r.halt.Store(true)
	r.wg.Wait()
	<-r.done
	var errs []error
	for i := range r.nseg {
		if r.state[i].Load() != segReady {
			continue
		}
		off, size := r.bounds(i)
		mem := r.os.segment(off, size)
		switch r.pin {
		case PinLock:
			if err := r.os.unlock(mem); err != nil {
				errs = append(errs, fmt.Errorf("munlock segment %d: %w", i, err))
			}
		case PinCUDA:
			if err := r.reg.Unregister(mem); err != nil {
				errs = append(errs, fmt.Errorf("unregister segment %d: %w", i, err))
			}
		}
	}
	if err := r.os.unmap(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: closing segmented %s region: %w", ErrRelease, r.kind, errors.Join(errs...))
	}
	return nil
}

// segMaxNUMANodes bounds SegmentedOptions.NUMANodes: the nodemask passed to
// mbind has this many bits.
const segMaxNUMANodes = 1024
