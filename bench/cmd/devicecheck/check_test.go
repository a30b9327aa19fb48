package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// fakeDevice is a CUDA device whose memory is Go slices: cudaMemcpy
// copies, byte for byte, unless a fault is set.
type fakeDevice struct {
	mu     sync.Mutex
	mem    map[uintptr][]byte
	frees  int
	syncs  int
	fault  string // "flip": the copy to the host flips one byte; "drop": the copy to the device moves nothing
	copies map[string]int
}

func newFakeDevice(fault string) *fakeDevice {
	return &fakeDevice{mem: map[uintptr][]byte{}, fault: fault, copies: map[string]int{}}
}

func (d *fakeDevice) Name() string { return "fake CUDA device" }

func (d *fakeDevice) Malloc(n int64) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := make([]byte, n)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	d.mem[p] = b
	return p, nil
}

func (d *fakeDevice) Free(p uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mem[p]; !ok {
		return fmt.Errorf("cudaFree: %#x is not a device allocation", p)
	}
	delete(d.mem, p)
	d.frees++
	return nil
}

func (d *fakeDevice) buf(p uintptr, n int) ([]byte, error) {
	b, ok := d.mem[p]
	if !ok || n > len(b) {
		return nil, fmt.Errorf("cudaMemcpy: %d bytes at %#x are not device memory", n, p)
	}
	return b[:n], nil
}

func (d *fakeDevice) ToDevice(dst uintptr, src []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.buf(dst, len(src))
	if err != nil {
		return err
	}
	d.copies["h2d"]++
	if d.fault != "drop" {
		copy(b, src)
	}
	return nil
}

func (d *fakeDevice) ToHost(dst []byte, src uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.buf(src, len(dst))
	if err != nil {
		return err
	}
	d.copies["d2h"]++
	copy(dst, b)
	if d.fault == "flip" {
		dst[len(dst)/3] ^= 0x40
	}
	return nil
}

func (d *fakeDevice) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncs++
	return nil
}

// fakeRegistrar stands in for cudaHostRegister.
type fakeRegistrar struct {
	registered, unregistered atomic.Int64
	fail                     bool
}

func (r *fakeRegistrar) Register(mem []byte) error {
	if r.fail {
		return errors.New("fake cudaHostRegister refused")
	}
	r.registered.Add(int64(len(mem)))
	return nil
}

func (r *fakeRegistrar) Unregister(mem []byte) error {
	r.unregistered.Add(int64(len(mem)))
	return nil
}

// fakeEnv runs the check on dev, heap memory for the CUDA-host region and
// reg for cudaHostRegister, with 8 MiB segments.
func fakeEnv(dev *fakeDevice, reg *fakeRegistrar) (env, *atomic.Int64) {
	var hostRegions atomic.Int64
	return env{
		open: func() (device, error) { return dev, nil },
		newCUDAHost: func(size int64) (allocator.Region, error) {
			hostRegions.Add(1)
			return hostmem.NewHeapRegion(size)
		},
		registrar:   reg,
		segmentSize: 8 << 20,
	}, &hostRegions
}

// smallArgs keep the test small: 1 MiB blocks in a 32 MiB pool of 8 MiB
// segments.
var smallArgs = []string{"-pool", "32MiB", "-block", "1MiB", "-copies", "3"}

// TestCheckOnFakeRuntime runs the whole check against the fake device:
// every source is copied both ways and compared, the pool is pinned in
// full and unpinned at the end, every device buffer is freed.
func TestCheckOnFakeRuntime(t *testing.T) {
	dev, reg := newFakeDevice(""), &fakeRegistrar{}
	e, hostRegions := fakeEnv(dev, reg)
	var out, errOut bytes.Buffer
	code := run(smallArgs, &out, &errOut, e)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	t.Log("\n" + out.String())
	for _, want := range []string{
		"device: fake CUDA device",
		"pageable (Go heap)", "cuda-host region (cudaHostAlloc)", "segmented pool (cudaHostRegister)", "memfd pool (cudaHostRegister)",
		"H2D ÷ pageable", "exact",
		"segmented pool (cudaHostRegister) of 32 MiB in 4 segments: first 1 MiB allocation after",
		"memfd pool (cudaHostRegister) of 32 MiB in 4 segments: first 1 MiB allocation after", "first ÷ full = ",
		"devicecheck: PASS",
	} {
		assert.Contains(t, out.String(), want)
	}
	assert.Equal(t, int64(1), hostRegions.Load(), "one CUDA-host region")
	assert.Equal(t, int64(2*32<<20), reg.registered.Load(), "both pools registered in full")
	assert.Equal(t, int64(2*32<<20), reg.unregistered.Load(), "and unregistered by Close")
	assert.Equal(t, 1, dev.frees, "the device buffer freed")
	assert.Empty(t, dev.mem)
	// Four sources: one round trip and 3 timed copies each way, and a
	// synchronize after each timed run.
	assert.Equal(t, map[string]int{"h2d": 4 * 4, "d2h": 4 * 4}, dev.copies)
	assert.Equal(t, 4*2, dev.syncs)
}

// TestCheckBites: a copy that corrupts a byte or moves nothing fails the
// check with exit 1 and says where; so does a pool that cannot be pinned.
func TestCheckBites(t *testing.T) {
	for _, c := range []struct {
		name, fault string
		regFails    bool
		want        string
	}{
		{"flipped byte", "flip", false, "pageable memory: the round trip through the device differs at byte 349525 of 1048576"},
		{"copy moves nothing", "drop", false, "pageable memory: the round trip through the device differs at byte 0"},
		{"cudaHostRegister refused", "", true, "fake cudaHostRegister refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, _ := fakeEnv(newFakeDevice(c.fault), &fakeRegistrar{fail: c.regFails})
			var out, errOut bytes.Buffer
			assert.Equal(t, exitFail, run(smallArgs, &out, &errOut, e))
			assert.Contains(t, errOut.String(), "devicecheck: FAIL: ")
			assert.Contains(t, errOut.String(), c.want)
			assert.NotContains(t, out.String(), "PASS")
		})
	}
}

// TestCompareNamesTheByte: a later block that differs is caught too, not
// only the first source.
func TestCompareNamesTheByte(t *testing.T) {
	a, b := make([]byte, 4096), make([]byte, 4096)
	fill(a, 3)
	copy(b, a)
	require.NoError(t, compare("x", a, b))
	b[4095] ^= 1
	assert.ErrorContains(t, compare("x", a, b), "differs at byte 4095 of 4096")
	c := make([]byte, 4096)
	fill(c, 4)
	assert.NotEqual(t, a, c, "each source has a pattern of its own")
}

// TestNoGPU: without a device the check exits 3 and says what is missing,
// never 0.
func TestNoGPU(t *testing.T) {
	e := env{open: func() (device, error) {
		return nil, fmt.Errorf("%w: CUDA runtime library not found (tried libcudart.so)", errNoGPU)
	}}
	var out, errOut bytes.Buffer
	assert.Equal(t, exitNoGPU, run(smallArgs, &out, &errOut, e))
	assert.Equal(t, "devicecheck: no GPU: CUDA runtime library not found (tried libcudart.so); nothing was checked\n", errOut.String())
	assert.NotContains(t, out.String(), "PASS")

	// This machine's own runtime, where it has none.
	if dev, err := openCUDA(); err == nil {
		t.Skipf("a GPU is here (%s): make device-check runs the real check", dev.Name())
	}
	out.Reset()
	errOut.Reset()
	assert.Equal(t, exitNoGPU, run(nil, &out, &errOut, realEnv()))
	assert.True(t, strings.HasPrefix(errOut.String(), "devicecheck: no GPU: "), errOut.String())
}

func TestUsage(t *testing.T) {
	e, _ := fakeEnv(newFakeDevice(""), &fakeRegistrar{})
	for _, args := range [][]string{
		{"-pool", "8MiB"},           // not two blocks
		{"-block", "1000"},          // not 4 KiB
		{"-copies", "0"},            //
		{"-timeout", "6m"},          // past the bound
		{"-pool", "lots"},           //
		{"extra"},                   //
		{"-block", "0"},             //
		{"-pool", "99999999999GiB"}, // overflows
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(args, &out, &errOut, e), "%q", args)
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"-h"}, &out, &errOut, e))
	n, err := parseSize("45GiB")
	require.NoError(t, err)
	assert.Equal(t, int64(45<<30), n)
}
