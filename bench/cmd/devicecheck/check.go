package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// errNoGPU wraps every reason there is no device to check.
var errNoGPU = errors.New("no GPU")

// device is what the check needs of a GPU beyond the regions: device
// memory and cudaMemcpy each way. cudart is the real one; the tests fake
// it.
type device interface {
	Name() string
	Malloc(n int64) (uintptr, error)
	Free(p uintptr) error
	ToDevice(dst uintptr, src []byte) error
	ToHost(dst []byte, src uintptr) error
	Sync() error
}

// env is where the check runs: how it opens the device and makes the
// regions. realEnv is the machine's.
type env struct {
	open        func() (device, error)
	newCUDAHost func(size int64) (allocator.Region, error)
	// registrar pins the segmented pool; nil means the CUDA runtime's
	// cudaHostRegister (hostmem.NewCUDARegistrar).
	registrar hostmem.HostRegistrar
	// segmentSize is the pool's segment size; 0 means the default.
	segmentSize int64
}

// options are the command's flags.
type options struct {
	pool, block int64
	copies      int
	timeout     time.Duration
}

// speed is one source's copy rate each way, in GiB/s.
type speed struct{ h2d, d2h float64 }

// check runs the whole check and writes its report to w. An error wraps
// errNoGPU when there is no device, and names the failed step otherwise.
func check(ctx context.Context, e env, o options, w io.Writer) error {
	dev, err := e.open()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "device: %s\n", dev.Name())
	buf, err := dev.Malloc(o.block)
	if err != nil {
		return err
	}
	defer dev.Free(buf)
	c := copier{ctx: ctx, dev: dev, buf: buf, copies: o.copies}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "source (%s blocks, %d copies each way)\tH2D GiB/s\tD2H GiB/s\tH2D ÷ pageable\tD2H ÷ pageable\tround trip\n", sizeString(o.block), o.copies)
	row := func(name string, s, base speed) {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f×\t%.2f×\texact\n", name, s.h2d, s.d2h, s.h2d/base.h2d, s.d2h/base.d2h)
	}

	// Pageable memory: the baseline.
	base, err := c.measure("pageable memory", make([]byte, o.block), make([]byte, o.block), 1)
	if err != nil {
		return err
	}
	row("pageable (Go heap)", base, base)

	// A CUDA-host region: cudaHostAlloc.
	s, err := c.region("cuda-host region", 2*o.block, o.block, e.newCUDAHost, 2)
	if err != nil {
		return err
	}
	row("cuda-host region (cudaHostAlloc)", s, base)

	// The pinned pools, each timed from its constructor to the first
	// allocation and to the whole pool.
	var pinned []string
	for i, p := range pinnedPools(e) {
		s, line, err := c.pinnedPool(p, o, 3+uint64(i))
		if err != nil {
			return err
		}
		row(p.name, s, base)
		pinned = append(pinned, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range pinned {
		fmt.Fprintln(w, line)
	}
	return nil
}

// A pinnedPool is a segmented region the check pins in full: its name in
// the report and its options.
type pinnedPool struct {
	name string
	opts hostmem.SegmentedOptions
}

// pinnedPools are the pools the check pins, each registered segment by
// segment with cudaHostRegister (the registrar of e): a segmented region of
// anonymous memory, and one backed by a sealed memfd mapped MAP_SHARED, as
// a node daemon maps the pool it shares with its clients.
func pinnedPools(e env) []pinnedPool {
	return []pinnedPool{
		{"segmented pool (cudaHostRegister)", hostmem.SegmentedOptions{Pin: hostmem.PinCUDA, Registrar: e.registrar, SegmentSize: e.segmentSize}},
		{"memfd pool (cudaHostRegister)", hostmem.SegmentedOptions{Pin: hostmem.PinCUDA, Registrar: e.registrar, SegmentSize: e.segmentSize,
			Memfd: &hostmem.MemfdOptions{Name: "kvalloc-devicecheck"}}},
	}
}

// pinnedPool builds p's region of o.pool bytes with an allocator over it,
// times the first block it serves and the whole pool pinned, then
// measures two of its blocks. It returns the rates and the timing line.
func (c copier) pinnedPool(p pinnedPool, o options, seed uint64) (speed, string, error) {
	start := time.Now()
	seg, err := hostmem.NewSegmentedRegion(o.pool, p.opts)
	if err != nil {
		return speed{}, "", fmt.Errorf("%s of %s: %w", p.name, sizeString(o.pool), err)
	}
	defer seg.Close()
	if p.opts.Memfd != nil && seg.FD() < 0 {
		return speed{}, "", fmt.Errorf("%s: the region has no memfd", p.name)
	}
	pool, err := allocator.New(seg, allocator.Options{})
	if err != nil {
		return speed{}, "", fmt.Errorf("allocator over the %s: %w", p.name, err)
	}
	defer pool.Close()
	src, err := firstBlock(c.ctx, pool, seg, o.block)
	if err != nil {
		return speed{}, "", fmt.Errorf("%s: %w", p.name, err)
	}
	first := time.Since(start)
	if err := seg.Wait(c.ctx); err != nil {
		return speed{}, "", fmt.Errorf("%s: pinning the whole pool: %w", p.name, err)
	}
	full := time.Since(start)
	dst, err := pool.Allocate(o.block)
	if err != nil {
		return speed{}, "", fmt.Errorf("%s: a second block: %w", p.name, err)
	}
	mem := seg.Bytes()
	s, err := c.measure(p.name, mem[src.Offset:src.Offset+src.Size], mem[dst.Offset:dst.Offset+dst.Size], seed)
	if err != nil {
		return speed{}, "", err
	}
	line := fmt.Sprintf("%s of %s in %d segments: first %s allocation after %v, whole pool pinned after %v: first ÷ full = %.4f",
		p.name, sizeString(o.pool), seg.Progress().Segments, sizeString(o.block),
		first.Round(time.Microsecond), full.Round(time.Millisecond), first.Seconds()/full.Seconds())
	return s, line, nil
}

// firstBlock polls the allocator over the growing pool until it serves
// one block: the time a serving engine waits before its first store.
func firstBlock(ctx context.Context, a *allocator.Allocator, seg *hostmem.SegmentedRegion, size int64) (allocator.Block, error) {
	for {
		blk, err := a.Allocate(size)
		if err == nil {
			return blk, nil
		}
		if !errors.Is(err, allocator.ErrOutOfMemory) {
			return blk, fmt.Errorf("its first block: %w", err)
		}
		if p := seg.Progress(); p.Failed > 0 {
			return blk, fmt.Errorf("pinning before its first block: %w", seg.Wait(ctx))
		}
		if ctx.Err() != nil {
			return blk, fmt.Errorf("no block within the time limit: %w", ctx.Err())
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// copier copies blocks between host memory and one device buffer.
type copier struct {
	ctx    context.Context
	dev    device
	buf    uintptr
	copies int
}

// region makes a region of size bytes with newRegion, takes two blocks of
// it through an allocator, and measures them.
func (c copier) region(name string, size, block int64, newRegion func(int64) (allocator.Region, error), seed uint64) (speed, error) {
	r, err := newRegion(size)
	if err != nil {
		return speed{}, fmt.Errorf("%s of %s: %w", name, sizeString(size), err)
	}
	defer r.Close()
	a, err := allocator.New(r, allocator.Options{})
	if err != nil {
		return speed{}, fmt.Errorf("allocator over the %s: %w", name, err)
	}
	defer a.Close()
	blocks, err := a.AllocateBatch(block, 2, allocator.Scattered)
	if err != nil {
		return speed{}, fmt.Errorf("two blocks of the %s: %w", name, err)
	}
	mem := r.Bytes()
	src, dst := blocks[0], blocks[1]
	return c.measure(name, mem[src.Offset:src.Offset+src.Size], mem[dst.Offset:dst.Offset+dst.Size], seed)
}

// measure fills src with a pattern of its own (seed), checks one round
// trip through the device byte for byte, times c.copies copies each way,
// and checks the bytes again.
func (c copier) measure(name string, src, dst []byte, seed uint64) (speed, error) {
	fill(src, seed)
	if err := c.roundTrip(name, src, dst); err != nil {
		return speed{}, err
	}
	var s speed
	var err error
	if s.h2d, err = c.timed(func() error { return c.dev.ToDevice(c.buf, src) }, len(src)); err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if s.d2h, err = c.timed(func() error { return c.dev.ToHost(dst, c.buf) }, len(dst)); err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if err := compare(name+", after the timed copies", src, dst); err != nil {
		return s, err
	}
	return s, nil
}

// roundTrip copies src to the device and back into a cleared dst.
func (c copier) roundTrip(name string, src, dst []byte) error {
	if err := c.dev.ToDevice(c.buf, src); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	clear(dst)
	if err := c.dev.ToHost(dst, c.buf); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return compare(name, src, dst)
}

// timed runs copy c.copies times and returns the GiB/s of n bytes each.
func (c copier) timed(copy func() error, n int) (float64, error) {
	start := time.Now()
	for range c.copies {
		if err := c.ctx.Err(); err != nil {
			return 0, fmt.Errorf("copies past the time limit: %w", err)
		}
		if err := copy(); err != nil {
			return 0, err
		}
	}
	if err := c.dev.Sync(); err != nil {
		return 0, err
	}
	el := time.Since(start).Seconds()
	if el <= 0 {
		el = 1e-9
	}
	return float64(c.copies) * float64(n) / el / (1 << 30), nil
}

// fill writes a pattern that differs at every 8-byte word and between
// seeds, so a copy that moves nothing, or the wrong block, shows.
func fill(b []byte, seed uint64) {
	x := seed * 0x9e3779b97f4a7c15
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
}

// compare fails at the first byte where got differs from want.
func compare(name string, want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Errorf("%s: the round trip through the device differs at byte %d of %d (wrote %#02x, read %#02x)",
		name, i, len(want), want[i], got[i])
}

// sizeString prints 8388608 as "8 MiB".
func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
