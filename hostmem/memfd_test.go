//go:build linux

// Tests for the memfd-backed segmented region: the seals, a second mapping
// in another process, Close, a 64 GiB pool that costs nothing until
// touched, and a huge-page request the machine cannot serve.

package hostmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
)

// newMemfdRegion returns a ready memfd region of size bytes, closed with
// the test.
func newMemfdRegion(t *testing.T, size int64, opts SegmentedOptions) *SegmentedRegion {
	t.Helper()
	r, err := NewSegmentedRegion(size, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.Wait(ctx))
	return r
}

// fdLinks returns how many of this process's file descriptors name the
// memfd called name, and how many of its mappings do.
func fdLinks(t *testing.T, name string) (fds, maps int) {
	t.Helper()
	want := "/memfd:" + name + " (deleted)"
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == want {
			fds++
		}
	}
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if strings.HasSuffix(strings.TrimSpace(line), want) {
			maps++
		}
	}
	return fds, maps
}

// TestMemfdRegionSealed: the memfd is close-on-exec, of the region's size,
// and sealed: it can be neither shrunk nor grown, by ftruncate or
// fallocate, and no seal can be added or removed.
func TestMemfdRegionSealed(t *testing.T) {
	const size = 8 * regionMiB
	r := newMemfdRegion(t, size, SegmentedOptions{SegmentSize: regionMiB, Workers: 2, Memfd: &MemfdOptions{Name: "kvalloc-sealed"}})
	fd := r.FD()
	require.GreaterOrEqual(t, fd, 0)
	assert.Equal(t, KindMmap, r.Kind())

	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	assert.NotZero(t, flags&unix.FD_CLOEXEC, "MFD_CLOEXEC")
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL, seals)

	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	assert.Equal(t, size, st.Size)
	for _, n := range []int64{0, size / 2, size - 1, size + 1, 2 * size} {
		assert.ErrorIs(t, unix.Ftruncate(fd, n), unix.EPERM, "ftruncate to %d", n)
	}
	assert.ErrorIs(t, unix.Fallocate(fd, 0, size, regionMiB), unix.EPERM, "fallocate past the end")
	_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE)
	assert.ErrorIs(t, err, unix.EPERM, "F_SEAL_SEAL forbids a new seal")
	require.NoError(t, unix.Fstat(fd, &st))
	assert.Equal(t, size, st.Size, "the size is unchanged")

	// The region still serves and its bytes are writable.
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	b, err := a.Allocate(regionMiB)
	require.NoError(t, err)
	mem := a.Bytes(b)
	mem[0], mem[len(mem)-1] = 7, 9
	require.NoError(t, a.Free(b))
}

// memfdChildEnv makes the test binary the client process of
// TestMemfdRegionSharedWithChild.
const memfdChildEnv = "KVALLOC_HOSTMEM_MEMFD_CHILD"

// TestMemfdRegionSharedWithChild: a child process that receives the fd over
// a Unix socket with SCM_RIGHTS, as the daemon's clients will, maps it and
// sees the bytes this process wrote through the region, and this process
// sees the bytes the child wrote.
func TestMemfdRegionSharedWithChild(t *testing.T) {
	const size = 16 * regionMiB
	r := newMemfdRegion(t, size, SegmentedOptions{SegmentSize: 4 * regionMiB, Workers: 2, Memfd: &MemfdOptions{Name: "kvalloc-shared"}})
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	bs, err := a.AllocateBatch(8*regionMiB, 2, allocator.Contiguous)
	require.NoError(t, err)
	for i, b := range bs { // stamps at both ends of each 8 MiB object
		mem := a.Bytes(b)
		binary.LittleEndian.PutUint64(mem, 0xC0FFEE00+uint64(i))
		binary.LittleEndian.PutUint64(mem[len(mem)-8:], 0xBEEF0000+uint64(i))
	}

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	parent, child := os.NewFile(uintptr(pair[0]), "parent"), os.NewFile(uintptr(pair[1]), "child")
	defer parent.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemfdChild$", "-test.v", "-test.count=1", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), memfdChildEnv+"=1")
	cmd.ExtraFiles = []*os.File{child} // fd 3 in the child
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	child.Close()
	require.NoError(t, unix.Sendmsg(pair[0], []byte{1}, unix.UnixRights(r.FD()), nil, 0))
	err = cmd.Wait()
	t.Logf("child output:\n%s", out.String())
	require.NoError(t, err, "the child failed")
	require.Contains(t, out.String(), "memfd child verified")

	// What the child wrote, 4 KiB into each object, is here.
	for i, b := range bs {
		assert.Equal(t, uint64(0xFACE0000)+uint64(i), binary.LittleEndian.Uint64(a.Bytes(b)[4096:]), "object %d", i)
	}
	require.NoError(t, a.Free(bs...))
}

// TestMemfdChild is the client process of TestMemfdRegionSharedWithChild;
// it skips unless started by it.
func TestMemfdChild(t *testing.T) {
	if os.Getenv(memfdChildEnv) == "" {
		t.Skip("run by TestMemfdRegionSharedWithChild")
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	require.NoError(t, err)
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	fds, err := unix.ParseUnixRights(&msgs[0])
	require.NoError(t, err)
	require.Len(t, fds, 1)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fds[0], &st))
	require.Equal(t, int64(16*regionMiB), st.Size)
	mem, err := unix.Mmap(fds[0], 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	require.NoError(t, unix.Close(fds[0]))
	for i := range 2 {
		obj := mem[i*8*int(regionMiB) : (i+1)*8*int(regionMiB)]
		require.Equal(t, uint64(0xC0FFEE00)+uint64(i), binary.LittleEndian.Uint64(obj), "object %d start", i)
		require.Equal(t, uint64(0xBEEF0000)+uint64(i), binary.LittleEndian.Uint64(obj[len(obj)-8:]), "object %d end", i)
		binary.LittleEndian.PutUint64(obj[4096:], 0xFACE0000+uint64(i))
	}
	require.NoError(t, unix.Munmap(mem))
	fmt.Println("memfd child verified")
}

// TestMemfdRegionCloseReleases: Close unmaps the pool and closes the fd: no
// descriptor or mapping of the memfd is left, FD is -1, and the region is
// closed for the allocator over it. A copy of the fd taken before (as a
// client holds one) still reaches the file: the pages are freed only when
// every holder lets go.
func TestMemfdRegionCloseReleases(t *testing.T) {
	const name = "kvalloc-close"
	r, err := NewSegmentedRegion(4*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 1, Memfd: &MemfdOptions{Name: name}})
	require.NoError(t, err)
	require.NoError(t, r.Wait(context.Background()))
	fds, maps := fdLinks(t, name)
	require.Equal(t, 1, fds, "one fd")
	require.GreaterOrEqual(t, maps, 1, "the mapping")
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	dup, err := unix.FcntlInt(uintptr(r.FD()), unix.F_DUPFD_CLOEXEC, 0)
	require.NoError(t, err)
	r.Bytes()[5] = 42

	require.NoError(t, r.Close())
	assert.Equal(t, -1, r.FD())
	assert.Nil(t, r.Bytes())
	fds, maps = fdLinks(t, name)
	assert.Equal(t, 1, fds, "only the copy is left")
	assert.Zero(t, maps, "no mapping is left")
	_, err = a.Allocate(4096)
	require.ErrorIs(t, err, allocator.ErrClosed)
	require.NoError(t, r.Close(), "a second Close is nil")

	mem, err := unix.Mmap(dup, 0, int(4*regionMiB), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	assert.Equal(t, byte(42), mem[5], "the copy still maps the file")
	require.NoError(t, unix.Munmap(mem))
	require.NoError(t, unix.Close(dup))
	fds, _ = fdLinks(t, name)
	assert.Zero(t, fds)
}

// TestMemfdRegionNoReserve64GiB: a memfd pool of 64 GiB with NoReserve is
// ready at once and costs nothing until touched: the file holds no block
// after the workers are done, and 64 objects of 8 MiB stamped at both ends
// cost two pages each.
func TestMemfdRegionNoReserve64GiB(t *testing.T) {
	const size = 64 << 30
	if shmemTHPMode() == "force" {
		t.Skip("shmem_enabled is [force]: every touch takes a huge page")
	}
	r := newMemfdRegion(t, size, SegmentedOptions{Workers: 2, Memfd: &MemfdOptions{Name: "kvalloc-64g"}, NoReserve: true, THP: THPOff})
	p := r.Progress()
	require.True(t, p.Done)
	require.Equal(t, int64(size), p.ReadyBytes)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(r.FD(), &st))
	require.Equal(t, int64(size), st.Size)
	require.Zero(t, st.Blocks, "an untouched memfd holds no memory")

	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(size), a.Stats().Capacity)
	bs, err := a.AllocateBatch(8*regionMiB, 64, allocator.Scattered)
	require.NoError(t, err)
	for _, b := range bs {
		mem := a.Bytes(b)
		mem[0], mem[len(mem)-1] = 1, 2
	}
	require.NoError(t, unix.Fstat(r.FD(), &st))
	page := int64(os.Getpagesize())
	assert.Equal(t, 64*2*page, st.Blocks*512, "two pages per object, nothing else")
	require.NoError(t, a.Free(bs...))
}

// TestMemfdRegionHugeTLB: a huge-page memfd the hugetlb pool cannot hold
// fails at the constructor with an error wrapping ErrOutOfMemory that names
// the pool and how to grow it, and leaks no descriptor or mapping. Where
// the pool has the pages, the region is made of them.
func TestMemfdRegionHugeTLB(t *testing.T) {
	const name = "kvalloc-hugetlb"
	huge := int64(segHugeTLBPageSize())
	n, _ := meminfoField("HugePages_Free")
	free := int64(n >> 10) // a count, which meminfoField scales as kB
	if free >= 4 {
		r := newMemfdRegion(t, 4*huge, SegmentedOptions{SegmentSize: huge, Workers: 1, Memfd: &MemfdOptions{Name: name, HugeTLB: true}})
		r.Bytes()[0] = 1
		return
	}
	size := (free + 4) * huge
	r, err := NewSegmentedRegion(size, SegmentedOptions{SegmentSize: huge, Workers: 1, Memfd: &MemfdOptions{Name: name, HugeTLB: true}})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no hugetlbfs: %v", err)
	}
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory)
	assert.Nil(t, r)
	msg := err.Error()
	t.Log(msg)
	assert.True(t, strings.HasPrefix(msg, "hostmem: out of memory: mapping a memfd with MFD_HUGETLB of "), msg)
	for _, want := range []string{"HugePages_Total", "HugePages_Free " + strconv.FormatInt(free, 10), "vm.nr_hugepages", "drop MemfdOptions.HugeTLB"} {
		assert.Contains(t, msg, want)
	}
	fds, maps := fdLinks(t, name)
	assert.Zero(t, fds, "the memfd is closed")
	assert.Zero(t, maps)

	// A segment size that is not a multiple of the huge page is refused first.
	_, err = NewSegmentedRegion(size, SegmentedOptions{SegmentSize: regionMiB, Memfd: &MemfdOptions{HugeTLB: true}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
