//go:build linux

package hostmem

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// segOS is the Linux half of a SegmentedRegion: one mapping, anonymous and
// private, or of a sealed memfd and shared.
type segOS struct {
	base   unsafe.Pointer // immutable from reserve until unmap
	length uintptr
	fd     int // the memfd, or -1; set by reserve, -1 again after unmap
}

func segSupported() error { return nil }

func segPageSize() uintptr { return uintptr(os.Getpagesize()) }

func segHugePageSize() uintptr { return mmapHugePageSize() }

// reserve maps size bytes (rounded up to align) with MAP_NORESERVE, aligned
// to align, replaces the mapping by one of a sealed memfd when opts.Memfd
// asks for it, then applies the huge-page policy and the NUMA binding. It
// returns the hints that did not take effect.
func (s *segOS) reserve(size int64, align uintptr, opts SegmentedOptions) (hint error, err error) {
	s.fd = -1
	length := (uintptr(size) + align - 1) &^ (align - 1)
	base, err := mmapAnonAligned(length, align, unix.MAP_NORESERVE)
	if err != nil {
		limit := ""
		if errors.Is(err, unix.ENOMEM) {
			limit = " (" + segOvercommitText() + ")"
		}
		return nil, fmt.Errorf("%w: reserving %s of address space: mmap: %w%s", mmapErrSentinel(err), regionSizeString(size), err, limit)
	}
	s.base, s.length = base, length
	if opts.Memfd != nil {
		if err := s.mapMemfd(size, *opts.Memfd); err != nil {
			_ = s.unmap()
			return nil, err
		}
	}
	mem := unsafe.Slice((*byte)(base), length)
	var hints []error
	switch opts.THP {
	case THPOn:
		if h := mmapAdviseHuge(mem); h != nil {
			hints = append(hints, h)
		} else if s.fd >= 0 {
			if mode := shmemTHPMode(); mode == "never" || mode == "deny" {
				hints = append(hints, fmt.Errorf("transparent huge pages are disabled for shared memory (/sys/kernel/mm/transparent_hugepage/shmem_enabled is [%s])", mode))
			}
		}
	case THPOff:
		if e := unix.Madvise(mem, unix.MADV_NOHUGEPAGE); e != nil {
			hints = append(hints, fmt.Errorf("madvise(MADV_NOHUGEPAGE): %w (transparent huge pages unavailable)", e))
		}
	}
	if len(opts.NUMANodes) > 0 {
		if e := segMbind(mem, opts.NUMANodes); e != nil {
			forbidden := errors.Is(e, unix.EPERM) || errors.Is(e, unix.ENOSYS)
			if !forbidden || !opts.NUMABestEffort {
				_ = s.unmap()
				return nil, segNUMAError(opts.NUMANodes, e)
			}
			hints = append(hints, fmt.Errorf("NUMA binding skipped (NUMABestEffort): %w", segNUMAError(opts.NUMANodes, e)))
		}
	}
	return errors.Join(hints...), nil
}

// mapMemfd creates the memfd of size bytes (the file is s.length bytes),
// seals its size and maps it MAP_SHARED over the reservation, at the same
// address. On failure s.fd is the memfd, if one was created, for unmap to
// close.
func (s *segOS) mapMemfd(size int64, m MemfdOptions) error {
	if m.FD > 0 {
		return s.adoptMemfd(size, m.FD)
	}
	name := m.Name
	if name == "" {
		name = "kvalloc"
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	what := "memfd"
	if m.HugeTLB {
		flags |= unix.MFD_HUGETLB
		what = "memfd with MFD_HUGETLB"
	}
	fd, err := unix.MemfdCreate(name, flags)
	if err != nil {
		if m.HugeTLB && errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: memfd_create(%q, MFD_HUGETLB): %w (the kernel has no hugetlbfs)", ErrUnsupported, name, err)
		}
		return fmt.Errorf("%w: memfd_create(%q): %w", mmapErrSentinel(err), name, err)
	}
	s.fd = fd
	if err := unix.Ftruncate(fd, int64(s.length)); err != nil {
		return fmt.Errorf("%w: sizing a %s of %s: ftruncate: %w", mmapErrSentinel(err), what, regionSizeString(size), err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("%w: sealing a %s: fcntl(F_ADD_SEALS): %w", ErrInvalidArgument, what, err)
	}
	if _, err := unix.MmapPtr(fd, 0, s.base, s.length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		limit := ""
		if m.HugeTLB && errors.Is(err, unix.ENOMEM) {
			limit = " (" + hugeTLBText(int64(s.length)) + ")"
		}
		return fmt.Errorf("%w: mapping a %s of %s: mmap: %w%s", mmapErrSentinel(err), what, regionSizeString(size), err, limit)
	}
	return nil
}

// adoptMemfd maps the existing memfd fd (MemfdOptions.FD) over the
// reservation after checking its size and seals; s.fd is set only once it
// is mapped, so a refused fd stays the caller's.
func (s *segOS) adoptMemfd(size int64, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: the memfd to map: fstat: %w", ErrInvalidArgument, err)
	}
	if st.Size != int64(s.length) {
		return fmt.Errorf("%w: the memfd to map has %d bytes, a region of %s needs %d", ErrInvalidArgument, st.Size, regionSizeString(size), s.length)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return fmt.Errorf("%w: the memfd to map is not sealed against shrinking and growing (seals %#x, %v)", ErrInvalidArgument, seals, err)
	}
	if _, err := unix.MmapPtr(fd, 0, s.base, s.length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("%w: mapping the memfd handed over: mmap: %w", mmapErrSentinel(err), err)
	}
	s.fd = fd
	return nil
}

// hugeTLBText names the hugetlb pool a mapping of length bytes draws on.
func hugeTLBText(length int64) string {
	total, _ := meminfoField("HugePages_Total")
	free, _ := meminfoField("HugePages_Free")
	rsvd, _ := meminfoField("HugePages_Rsvd")
	page := int64(segHugeTLBPageSize())
	// meminfoField scales by 1024 (kB); these three are counts.
	total, free, rsvd = total>>10, free>>10, rsvd>>10
	return fmt.Sprintf("the hugetlb pool has HugePages_Total %d, HugePages_Free %d, HugePages_Rsvd %d pages of %s; %d are needed: "+
		"raise vm.nr_hugepages (sysctl vm.nr_hugepages=N) or drop MemfdOptions.HugeTLB",
		total, free, rsvd, regionSizeString(page), (length+page-1)/page)
}

// segHugeTLBPageSize returns the default hugetlb page size (Hugepagesize in
// /proc/meminfo), 2 MiB when it cannot be read.
func segHugeTLBPageSize() uintptr {
	if n, ok := meminfoField("Hugepagesize"); ok && n > 0 && n&(n-1) == 0 {
		return uintptr(n)
	}
	return 2 << 20
}

// shmemTHPMode returns the selected transparent-huge-page mode of shared
// memory, or "" when it cannot be read.
func shmemTHPMode() string {
	return bracketed("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
}

// segMbind binds mem to nodes with MPOL_BIND.
func segMbind(mem []byte, nodes []int) error {
	const mpolBind = 2
	var mask [segMaxNUMANodes / 64]uint64
	for _, n := range nodes {
		mask[n/64] |= 1 << (n % 64)
	}
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)),
		mpolBind, uintptr(unsafe.Pointer(&mask[0])), segMaxNUMANodes+1, 0)
	if e != 0 {
		return e
	}
	return nil
}

// segNUMAError explains a refused mbind.
func segNUMAError(nodes []int, e error) error {
	var why string
	switch {
	case errors.Is(e, unix.EPERM):
		why = "the system forbids it: a container's seccomp profile blocks mbind without CAP_SYS_NICE; run with --cap-add SYS_NICE, or set NUMABestEffort to go on unbound"
	case errors.Is(e, unix.ENOSYS):
		why = "the kernel has no NUMA support; set NUMABestEffort to go on unbound"
	case errors.Is(e, unix.EINVAL):
		online, _ := os.ReadFile("/sys/devices/system/node/online")
		why = fmt.Sprintf("a node is not online (online: %q)", string(trimNewline(online)))
	default:
		why = "mbind refused"
	}
	sentinel := ErrInvalidArgument
	if errors.Is(e, unix.ENOMEM) {
		sentinel = ErrOutOfMemory
	}
	return fmt.Errorf("%w: binding to NUMA nodes %v: mbind: %w (%s)", sentinel, nodes, e, why)
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// segment returns the bytes [off, off+size) of the reservation.
func (s *segOS) segment(off, size int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(s.base, off)), size)
}

// populate faults mem in, writable: MADV_POPULATE_WRITE, or a write to
// every page where the kernel predates it (EINVAL before Linux 5.14).
func (s *segOS) populate(mem []byte) error {
	err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	if err == nil || !errors.Is(err, unix.EINVAL) {
		return err
	}
	page := os.Getpagesize()
	for off := 0; off < len(mem); off += page {
		mem[off] = 0
	}
	return nil
}

func (s *segOS) lock(mem []byte) error   { return unix.Mlock(mem) }
func (s *segOS) unlock(mem []byte) error { return unix.Munlock(mem) }

// release unpins mem and gives its pages back: after a failed segment. A
// memfd's pages belong to the file, so they are punched out of it
// (MADV_REMOVE); an anonymous mapping's are dropped (MADV_DONTNEED).
func (s *segOS) release(mem []byte) {
	_ = unix.Munlock(mem)
	if s.fd >= 0 {
		_ = unix.Madvise(mem, unix.MADV_REMOVE)
		return
	}
	_ = unix.Madvise(mem, unix.MADV_DONTNEED)
}

// file returns the memfd, or -1.
func (s *segOS) file() int { return s.fd }

// unmap unmaps the reservation and closes the memfd, if any.
func (s *segOS) unmap() error {
	var errs []error
	if s.base != nil {
		base, length := s.base, s.length
		s.base = nil
		if err := unix.MunmapPtr(base, length); err != nil {
			errs = append(errs, fmt.Errorf("munmap: %w", err))
		}
	}
	if s.fd >= 0 {
		fd := s.fd
		s.fd = -1
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("closing the memfd: %w", err))
		}
	}
	return errors.Join(errs...)
}

// segMemlockLimitText names RLIMIT_MEMLOCK, the memory this process has
// locked, and how to raise the limit.
func segMemlockLimitText() string {
	b := ReadBudget(PinLock)
	locked := b.Locked
	lim, err := mmapMemlockLimit()
	switch {
	case err != nil:
		return fmt.Sprintf("RLIMIT_MEMLOCK unreadable: %v; raise it with ulimit -l or --ulimit memlock=-1:-1", err)
	case lim.Cur == unix.RLIM_INFINITY:
		return fmt.Sprintf("RLIMIT_MEMLOCK soft=unlimited hard=%s, so the limit is not what refused it; %s", rlimString(lim.Max), segMemoryLimitText())
	}
	return fmt.Sprintf("RLIMIT_MEMLOCK soft=%d hard=%s, %s locked by this process; raise it with ulimit -l or --ulimit memlock=-1:-1",
		lim.Cur, rlimString(lim.Max), regionSizeString(locked))
}

// segMemoryLimitText names the memory limits: cgroup memory.max,
// MemAvailable and the overcommit policy.
func segMemoryLimitText() string {
	return ReadBudget(PinNone).LimitsText()
}

// segOvercommitText names the overcommit policy and commit figures.
func segOvercommitText() string {
	b := ReadBudget(PinNone)
	return b.OvercommitText()
}

// cudaCallError is a failed CUDA call: "error 2 cudaErrorMemoryAllocation:
// out of memory". It matches the package sentinel of its code with
// errors.Is but carries no "hostmem:" prefix of its own, so a
// SegmentError that wraps it names the package once.
type cudaCallError struct {
	code int32
	text string
}

func (e *cudaCallError) Error() string        { return e.text }
func (e *cudaCallError) Is(target error) bool { return target == cudaSentinel(e.code) }

// cudaRegistrar is the CUDA runtime's cudaHostRegister and
// cudaHostUnregister, loaded with purego.
type cudaRegistrar struct {
	rt         *cudaRuntime
	register   func(ptr unsafe.Pointer, size uintptr, flags uint32) int32
	unregister func(ptr unsafe.Pointer) int32
}

// NewCUDARegistrar returns a HostRegistrar that calls cudaHostRegister
// (flags cudaHostRegisterDefault) and cudaHostUnregister from the CUDA
// runtime, loaded without cgo as NewCUDAHostRegion loads it. Where the
// runtime, the driver or a device is missing the error wraps
// ErrCUDAUnavailable and says which.
func NewCUDARegistrar() (HostRegistrar, error) {
	rt, err := cudaLoad()
	if err != nil {
		return nil, err
	}
	if err := rt.probe(); err != nil {
		return nil, err
	}
	lib, err := purego.Dlopen(rt.soname, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: reopening CUDA runtime %s: %v", ErrCUDAUnavailable, rt.soname, err)
	}
	c := &cudaRegistrar{rt: rt}
	for _, s := range []struct {
		fptr any
		name string
	}{{&c.register, "cudaHostRegister"}, {&c.unregister, "cudaHostUnregister"}} {
		sym, err := purego.Dlsym(lib, s.name)
		if err != nil || sym == 0 {
			return nil, fmt.Errorf("%w: CUDA runtime library %s lacks symbol %s", ErrCUDAUnavailable, rt.soname, s.name)
		}
		purego.RegisterFunc(s.fptr, sym)
	}
	return c, nil
}

// Register calls cudaHostRegister on mem.
func (c *cudaRegistrar) Register(mem []byte) error {
	if code := c.register(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem)), 0); code != cudaSuccess {
		return &cudaCallError{code, c.rt.describe(code)}
	}
	return nil
}

// Unregister calls cudaHostUnregister on mem.
func (c *cudaRegistrar) Unregister(mem []byte) error {
	if code := c.unregister(unsafe.Pointer(unsafe.SliceData(mem))); code != cudaSuccess {
		return &cudaCallError{code, c.rt.describe(code)}
	}
	return nil
}
