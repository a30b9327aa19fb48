//go:build linux

package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
)

// pool is the daemon's memory: a Region the allocator carves, growing as
// its segments become ready, and the memfd behind it, which every client
// maps. This file is the one place that makes it; the rest of the server
// sees only this interface.
type pool interface {
	allocator.GrowingRegion
	// FD is the memfd, valid until Close.
	FD() int
	// Size is the memfd's size.
	Size() int64
	// Progress says how far population and pinning have got.
	Progress() allocator.SegmentProgress
	// First waits until the first segment is ready, and returns the
	// failure that stopped it otherwise.
	First() error
}

// PoolOptions configures the pool.
type PoolOptions struct {
	// HugePages backs the memfd with hugetlbfs pages (MFD_HUGETLB): the
	// size must be a multiple of the huge page size, and the system must
	// have that many free (vm.nr_hugepages).
	HugePages bool
	// Populate faults every page in, segment by segment in the background
	// (MADV_POPULATE_WRITE), before the allocator hands it out; the daemon
	// serves as soon as the first segment is ready. Without it the pool is
	// usable at once and pages are backed when first touched: a pool of any
	// size costs no memory until written (the tests' pools).
	Populate bool
	// Lock mlocks each segment once populated (bounded by RLIMIT_MEMLOCK).
	Lock bool
	// SegmentSize is the unit of population; 0 means 64 MiB.
	SegmentSize int64
}

// memfdPool is the pool over an anonymous, sealed memfd mapped MAP_SHARED.
type memfdPool struct {
	fd   int
	mem  []byte
	size int64
	seg  int64
	nseg int
	lock bool

	grown  atomic.Int64  // segments ready, lowest first
	first  chan struct{} // closed when the first segment is ready, or the preparation stops
	err    atomic.Pointer[error]
	stop   atomic.Bool
	done   chan struct{}
	start  time.Time
	doneAt atomic.Int64
	once   sync.Once
}

// newPool creates the memfd (MFD_CLOEXEC, MFD_ALLOW_SEALING, and
// MFD_HUGETLB when asked), sizes it, seals it against shrinking, growing
// and further seals (so no client can truncate the pool under the others,
// or seal it read-only), and maps it MAP_SHARED.
func newPool(size int64, opts PoolOptions) (*memfdPool, error) {
	seg := opts.SegmentSize
	if seg == 0 {
		seg = 64 << 20
	}
	page := int64(unix.Getpagesize())
	if size <= 0 || seg <= 0 || seg%page != 0 {
		return nil, fmt.Errorf("%w: pool size %d, segment size %d: both must be positive, the segment a multiple of %d", allocator.ErrInvalidArgument, size, seg, page)
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	if opts.HugePages {
		flags |= unix.MFD_HUGETLB
	}
	fd, err := unix.MemfdCreate("kvallocd-pool", flags)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd_create: %w", allocator.ErrInvalidArgument, err)
	}
	fail := func(op string, err error) (*memfdPool, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: pool of %d bytes: %s: %w", allocator.ErrOutOfMemory, size, op, err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return fail("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("F_ADD_SEALS", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	p := &memfdPool{fd: fd, mem: mem, size: size, seg: seg, nseg: int((size + seg - 1) / seg),
		lock: opts.Lock, done: make(chan struct{}), first: make(chan struct{}), start: time.Now()}
	if !opts.Populate && !opts.Lock {
		p.grown.Store(int64(p.nseg))
		p.doneAt.Store(1)
		close(p.first)
		close(p.done)
		return p, nil
	}
	go p.prepare()
	return p, nil
}

// prepare populates (and locks) the segments in order, publishing each.
func (p *memfdPool) prepare() {
	var firstOnce sync.Once
	signal := func() { firstOnce.Do(func() { close(p.first) }) }
	defer func() { signal(); p.doneAt.Store(int64(time.Since(p.start)) + 1); close(p.done) }()
	for i := 0; i < p.nseg && !p.stop.Load(); i++ {
		off := int64(i) * p.seg
		mem := p.mem[off:min(off+p.seg, p.size)]
		err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
		if err == nil && p.lock {
			err = unix.Mlock(mem)
		}
		if err != nil {
			e := fmt.Errorf("%w: pool segment %d of %d: %w; %d bytes stay ready and serving", allocator.ErrOutOfMemory, i, p.nseg, err, off)
			p.err.Store(&e)
			return
		}
		p.grown.Store(int64(i + 1))
		signal()
	}
}

func (p *memfdPool) First() error {
	<-p.first
	if p.Grown() > 0 {
		return nil
	}
	if e := p.err.Load(); e != nil {
		return *e
	}
	return fmt.Errorf("%w: pool closed before its first segment was ready", allocator.ErrClosed)
}

func (p *memfdPool) Bytes() []byte { return p.mem }
func (p *memfdPool) Kind() string {
	if p.lock {
		return allocator.KindPinned
	}
	return allocator.KindMmap
}
func (p *memfdPool) FD() int                { return p.fd }
func (p *memfdPool) Size() int64            { return p.size }
func (p *memfdPool) Grown() int             { return int(p.grown.Load()) }
func (p *memfdPool) GrowGranularity() int64 { return p.seg }
func (p *memfdPool) GrownRange(i int) (off, size int64) {
	off = int64(i) * p.seg
	return off, min(p.seg, p.size-off)
}

func (p *memfdPool) Progress() allocator.SegmentProgress {
	n := p.Grown()
	ready := min(int64(n)*p.seg, p.size)
	pr := allocator.SegmentProgress{Segments: p.nseg, Ready: n, TotalBytes: p.size, ReadyBytes: ready}
	if p.lock {
		pr.PinnedBytes = ready
	}
	if e := p.err.Load(); e != nil {
		pr.Err, pr.Failed = *e, 1
	}
	if d := p.doneAt.Load(); d > 0 {
		pr.Done, pr.Elapsed = true, time.Duration(d-1)
	} else {
		pr.Elapsed = time.Since(p.start)
	}
	return pr
}

// Close stops the population, unmaps the pool and closes the memfd; the
// pages go when the last client's mapping goes.
func (p *memfdPool) Close() error {
	var err error
	p.once.Do(func() {
		p.stop.Store(true)
		<-p.done
		err = unix.Munmap(p.mem)
		if e := unix.Close(p.fd); err == nil {
			err = e
		}
		p.mem = nil
	})
	return err
}
