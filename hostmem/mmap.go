//go:build linux

// Mmap region contract: the memory is an anonymous private mapping made with
// mmap(2), off the Go heap. The garbage collector never scans or moves it, so
// it must never hold Go pointers (the allocator stores none). It is released
// by Close, and only by Close: there is no finalizer, because unmapping
// memory that a caller still reaches through a slice would be a
// use-after-free the garbage collector cannot see. Linux only: elsewhere
// NewMmapRegion returns an error wrapping ErrUnsupported (region_other.go).

package hostmem

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/kvalloc/kvalloc/allocator"
	"golang.org/x/sys/unix"
)

// mmapRegion is a Region over an anonymous mapping, optionally mlocked.
type mmapRegion struct {
	mu      sync.Mutex
	base    unsafe.Pointer // start of the mapping; nil once closed
	length  uintptr        // mapping length, a multiple of the page size
	size    int64          // bytes Bytes returns, <= length
	locked  bool
	kind    string
	hintErr error
	allocator.RegionState
}

// NewMmapRegion returns a region of exactly size bytes in an anonymous
// private mapping, zeroed and off the Go heap. The mapping is size rounded up
// to the page size; Bytes returns exactly size bytes.
//
// Options:
//   - Populate prefaults every page (MAP_POPULATE, or MADV_POPULATE_WRITE
//     after the huge-page hint under THPOn, so the pages are faulted in as
//     huge pages).
//   - THPOn advises transparent huge pages (MADV_HUGEPAGE). When size is
//     at least one huge page (normally 2 MiB), the mapping is also aligned to
//     and rounded up to the huge-page size so that every part of it can be
//     backed by huge pages. The hint is advisory: a kernel without THP
//     (madvise fails with EINVAL) or with THP set to "never" does not fail
//     the region. The refusal is recorded and reported by the region's
//     HintErr method, reached as r.(interface{ HintErr() error }).
//     THPOff forbids them (MADV_NOHUGEPAGE); a refusal is a hint too.
//   - PinLock page-locks the whole mapping with mlock; Kind is then
//     "pinned", else "mmap". A refused lock (EPERM, ENOMEM, EAGAIN) unmaps
//     the memory and returns an error wrapping ErrOutOfMemory and the errno
//     whose message names RLIMIT_MEMLOCK and the soft and hard limits in
//     force.
//   - NoReserve maps with MAP_NORESERVE: address space without committed
//     memory; see MmapOptions.NoReserve for the risk.
//
// size <= 0, or a size too large for the address space, is an error wrapping
// ErrInvalidArgument. A refused mapping (ENOMEM) wraps ErrOutOfMemory, and
// its message names the overcommit policy in force
// (/proc/sys/vm/overcommit_memory and what it means for this request).
func NewMmapRegion(size int64, opts MmapOptions) (allocator.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: mmap region size %d: must be positive", ErrInvalidArgument, size)
	}
	switch {
	case opts.THP < THPDefault || opts.THP > THPOff:
		return nil, fmt.Errorf("%w: unknown THP mode %d", ErrInvalidArgument, int(opts.THP))
	case opts.Pin == PinCUDA:
		return nil, fmt.Errorf("%w: mmap region with Pin: PinCUDA: use NewCUDAHostRegion, or NewSegmentedRegion with PinCUDA", ErrInvalidArgument)
	case opts.Pin != PinNone && opts.Pin != PinLock:
		return nil, fmt.Errorf("%w: unknown pin mode %d", ErrInvalidArgument, int(opts.Pin))
	case opts.NoReserve && (opts.Populate || opts.Pin != PinNone):
		return nil, fmt.Errorf("%w: mmap NoReserve with Populate or a Pin: reserving without memory and committing it at once contradict", ErrInvalidArgument)
	}
	lock, huge := opts.Pin == PinLock, opts.THP == THPOn
	page := uintptr(os.Getpagesize())
	align := page
	if huge {
		if huge := mmapHugePageSize(); int64(huge) <= size {
			align = huge
		}
	}
	if uint64(size) > uint64(maxRegionInt)-uint64(2*align) {
		return nil, fmt.Errorf("%w: mmap region size %d exceeds the address space", ErrInvalidArgument, size)
	}
	length := (uintptr(size) + align - 1) &^ (align - 1)

	// MAP_POPULATE faults pages in before the huge-page hint can apply, so
	// under THPOn the region is populated after madvise instead.
	flags := 0
	if opts.Populate && !huge {
		flags |= unix.MAP_POPULATE
	}
	if opts.NoReserve {
		flags |= unix.MAP_NORESERVE
	}
	base, err := mmapAnonAligned(length, align, flags)
	if err != nil {
		if errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("%w: mmap %s: %w (%s)", ErrOutOfMemory, regionSizeString(size), err, overcommitPolicy(opts.NoReserve))
		}
		return nil, fmt.Errorf("%w: mmap %s: %w", mmapErrSentinel(err), regionSizeString(size), err)
	}
	r := &mmapRegion{base: base, length: length, size: size, kind: KindMmap}
	mem := unsafe.Slice((*byte)(base), length)

	if opts.THP == THPOff {
		if err := unix.Madvise(mem, unix.MADV_NOHUGEPAGE); err != nil {
			r.hintErr = fmt.Errorf("madvise(MADV_NOHUGEPAGE): %w (transparent huge pages unavailable)", err)
		}
	}
	if huge {
		r.hintErr = mmapAdviseHuge(mem)
		if opts.Populate && !lock { // mlock populates by itself
			if err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE); err != nil {
				// Before Linux 5.14: fault the pages in by hand.
				for off := uintptr(0); off < length; off += page {
					mem[off] = 0
				}
			}
		}
	}

	if lock {
		if err := unix.Mlock(mem); err != nil {
			_ = unix.MunmapPtr(base, length)
			lim, limErr := mmapMemlockLimit()
			return nil, mlockError(size, err, lim, limErr)
		}
		r.locked = true
		r.kind = KindPinned
	}
	return r, nil
}

// mmapAnonAligned maps length bytes (a multiple of align) of anonymous
// memory at an address aligned to align. For alignments above the page size
// it maps length+align bytes and unmaps the unaligned head and tail.
func mmapAnonAligned(length, align uintptr, flags int) (unsafe.Pointer, error) {
	const prot = unix.PROT_READ | unix.PROT_WRITE
	flags |= unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if align <= uintptr(os.Getpagesize()) {
		return unix.MmapPtr(-1, 0, nil, length, prot, flags)
	}
	raw, err := unix.MmapPtr(-1, 0, nil, length+align, prot, flags)
	if err != nil {
		return nil, err
	}
	head := (align - uintptr(raw)%align) % align
	tail := align - head
	if head > 0 {
		if err := unix.MunmapPtr(raw, head); err != nil {
			_ = unix.MunmapPtr(raw, length+align)
			return nil, err
		}
	}
	base := unsafe.Add(raw, head)
	if tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(base, length), tail); err != nil {
			_ = unix.MunmapPtr(base, length+tail)
			return nil, err
		}
	}
	return base, nil
}

// mmapAdviseHuge applies MADV_HUGEPAGE and returns why huge pages will not
// be used, or nil.
func mmapAdviseHuge(mem []byte) error {
	if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
		// EINVAL: kernel built without CONFIG_TRANSPARENT_HUGEPAGE.
		return fmt.Errorf("madvise(MADV_HUGEPAGE): %w (transparent huge pages unavailable)", err)
	}
	if mode := mmapTHPMode(); mode == "never" {
		return errors.New("transparent huge pages are disabled (/sys/kernel/mm/transparent_hugepage/enabled is [never])")
	}
	return nil
}

// mmapTHPMode returns the selected transparent-huge-page mode ("always",
// "madvise", "never"), or "" when it cannot be read.
func mmapTHPMode() string {
	return bracketed("/sys/kernel/mm/transparent_hugepage/enabled")
}

// bracketed returns the selected choice, the one in brackets, of a sysfs
// file such as "always madvise [never]", or "" when it cannot be read.
func bracketed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

var mmapHugeOnce = sync.OnceValue(func() uintptr {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n&(n-1) == 0 {
			return uintptr(n)
		}
	}
	return 2 << 20
})

// mmapHugePageSize returns the transparent huge page size, 2 MiB when it
// cannot be read.
func mmapHugePageSize() uintptr { return mmapHugeOnce() }

// overcommitPolicy describes vm.overcommit_memory for an ENOMEM message:
// the value and what it means for a mapping made with or without
// MAP_NORESERVE.
func overcommitPolicy(noReserve bool) string {
	b, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		return fmt.Sprintf("overcommit policy unreadable: %v", err)
	}
	mode := strings.TrimSpace(string(b))
	const name = "/proc/sys/vm/overcommit_memory"
	switch mode {
	case "0":
		if noReserve {
			return name + " is 0 (heuristic overcommit): even address space without reserve was refused; check RLIMIT_AS and vm.max_map_count"
		}
		return name + " is 0 (heuristic overcommit: a mapping larger than free RAM + swap is refused); MmapOptions.NoReserve reserves address space without memory"
	case "1":
		return name + " is 1 (always overcommit): the kernel refused address space itself; check RLIMIT_AS and vm.max_map_count"
	case "2":
		limit := ""
		if c, ok := meminfoField("CommitLimit"); ok {
			limit = fmt.Sprintf("; CommitLimit %s", regionSizeString(int64(c)))
			if u, ok := meminfoField("Committed_AS"); ok {
				limit += fmt.Sprintf(", Committed_AS %s", regionSizeString(int64(u)))
			}
		}
		return name + " is 2 (strict accounting: every private writable mapping is charged against CommitLimit, and NoReserve is ignored)" + limit
	}
	return name + " is " + mode
}

// meminfoField returns a /proc/meminfo field in bytes.
func meminfoField(field string) (uint64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}

// mmapErrSentinel maps an mmap errno to the package sentinel.
func mmapErrSentinel(err error) error {
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) {
		return ErrOutOfMemory
	}
	return ErrInvalidArgument
}

// mmapMemlockLimit reads RLIMIT_MEMLOCK.
func mmapMemlockLimit() (unix.Rlimit, error) {
	var lim unix.Rlimit
	err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	return lim, err
}

// mlockError builds the error for a refused mlock of size bytes: it wraps
// ErrOutOfMemory and the errno, and names RLIMIT_MEMLOCK with the limit in
// force (lim, or limErr when the limit could not be read), e.g.
//
//	hostmem: out of memory: mlock 64 MiB: cannot allocate memory
//	(RLIMIT_MEMLOCK soft=8388608 hard=8388608 bytes; raise it with
//	ulimit -l or --ulimit memlock=-1:-1)
func mlockError(size int64, err error, lim unix.Rlimit, limErr error) error {
	var limit string
	switch {
	case limErr != nil:
		limit = fmt.Sprintf("RLIMIT_MEMLOCK unreadable: %v; raise it with ulimit -l or --ulimit memlock=-1:-1", limErr)
	case lim.Cur == unix.RLIM_INFINITY:
		limit = fmt.Sprintf("RLIMIT_MEMLOCK soft=unlimited hard=%s; the limit is not what refused it, the system is short of lockable memory",
			rlimString(lim.Max))
	default:
		limit = fmt.Sprintf("RLIMIT_MEMLOCK soft=%d hard=%s; raise it with ulimit -l or --ulimit memlock=-1:-1",
			lim.Cur, rlimString(lim.Max))
	}
	return fmt.Errorf("%w: mlock %s: %w (%s)", ErrOutOfMemory, regionSizeString(size), err, limit)
}

// rlimString formats an rlimit value: "unlimited" or "N bytes".
func rlimString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10) + " bytes"
}

// Bytes returns exactly the requested size, or nil after Close.
func (r *mmapRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(r.base), r.size)
}

// Kind returns "pinned" for a locked mapping, else "mmap".
func (r *mmapRegion) Kind() string { return r.kind }

// HintErr returns why an advisory hint (MADV_HUGEPAGE) had no effect, or nil
// when it was applied or not asked for. A refused hint never fails the
// region.
func (r *mmapRegion) HintErr() error { return r.hintErr }

// Close munlocks and unmaps the memory, once. It is idempotent and safe to
// call concurrently; every call after the first returns nil.
func (r *mmapRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return nil
	}
	base, length := r.base, r.length
	r.base = nil
	r.MarkClosed()
	var errs []error
	if r.locked {
		// munmap unlocks too; munlock first keeps the accounting explicit.
		if err := unix.Munlock(unsafe.Slice((*byte)(base), length)); err != nil {
			errs = append(errs, fmt.Errorf("munlock: %w", err))
		}
	}
	if err := unix.MunmapPtr(base, length); err != nil {
		errs = append(errs, fmt.Errorf("munmap: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: closing %s region: %w", ErrRelease, r.kind, errors.Join(errs...))
	}
	return nil
}
