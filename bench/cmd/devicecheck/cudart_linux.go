//go:build linux

package main

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kvalloc/kvalloc/hostmem"
)

// cudaSonames are the CUDA runtime names tried, in order: those the
// regions of package hostmem try.
var cudaSonames = hostmem.CUDARuntimeNames()

// cudaMemcpyKind values.
const (
	cudaMemcpyHostToDevice = 1
	cudaMemcpyDeviceToHost = 2
)

// cudart is the device, through the CUDA runtime loaded with purego (no
// cgo): the calls the check makes beyond those the allocator's regions
// make themselves.
type cudart struct {
	soname  string
	devices int32

	getDeviceCount func(count *int32) int32
	malloc         func(ptr *uintptr, size uintptr) int32
	free           func(ptr uintptr) int32
	// cudaMemcpy, bound twice: a device pointer is a uintptr the Go side
	// never dereferences, a host pointer an unsafe.Pointer into the
	// caller's slice.
	memcpyToDevice func(dst uintptr, src unsafe.Pointer, n uintptr, kind int32) int32
	memcpyToHost   func(dst unsafe.Pointer, src uintptr, n uintptr, kind int32) int32
	synchronize    func() int32
	getErrorString func(code int32) string
}

// openCUDA loads the CUDA runtime and checks that a device is present.
// Every failure wraps errNoGPU and says what is missing.
func openCUDA() (dev device, err error) {
	var lib uintptr
	var soname string
	var last error
	for _, name := range cudaSonames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil && h != 0 {
			lib, soname = h, name
			break
		}
		last = err
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w: CUDA runtime library not found (tried %s): %v", errNoGPU, strings.Join(cudaSonames, ", "), last)
	}
	defer func() {
		if p := recover(); p != nil {
			dev, err = nil, fmt.Errorf("%w: binding %s: %v", errNoGPU, soname, p)
		}
	}()
	c := &cudart{soname: soname}
	for _, s := range []struct {
		fptr any
		name string
	}{
		{&c.getDeviceCount, "cudaGetDeviceCount"},
		{&c.malloc, "cudaMalloc"},
		{&c.free, "cudaFree"},
		{&c.memcpyToDevice, "cudaMemcpy"},
		{&c.memcpyToHost, "cudaMemcpy"},
		{&c.synchronize, "cudaDeviceSynchronize"},
		{&c.getErrorString, "cudaGetErrorString"},
	} {
		sym, err := purego.Dlsym(lib, s.name)
		if err != nil || sym == 0 {
			return nil, fmt.Errorf("%w: %s lacks %s", errNoGPU, soname, s.name)
		}
		purego.RegisterFunc(s.fptr, sym)
	}
	if code := c.getDeviceCount(&c.devices); code != 0 || c.devices <= 0 {
		return nil, fmt.Errorf("%w: cudaGetDeviceCount: %d devices, %s", errNoGPU, c.devices, c.describe(code))
	}
	return c, nil
}

func (c *cudart) describe(code int32) string {
	if code == 0 {
		return "cudaSuccess"
	}
	return fmt.Sprintf("error %d: %s", code, c.getErrorString(code))
}

func (c *cudart) call(what string, code int32) error {
	if code != 0 {
		return fmt.Errorf("%s: %s", what, c.describe(code))
	}
	return nil
}

func (c *cudart) Name() string {
	return fmt.Sprintf("%s, %d device(s), copies on device 0", c.soname, c.devices)
}

func (c *cudart) Malloc(n int64) (uintptr, error) {
	var p uintptr
	if err := c.call("cudaMalloc", c.malloc(&p, uintptr(n))); err != nil {
		return 0, err
	}
	return p, nil
}

func (c *cudart) Free(p uintptr) error { return c.call("cudaFree", c.free(p)) }

func (c *cudart) ToDevice(dst uintptr, src []byte) error {
	return c.call("cudaMemcpy host to device", c.memcpyToDevice(dst, unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src)), cudaMemcpyHostToDevice))
}

func (c *cudart) ToHost(dst []byte, src uintptr) error {
	return c.call("cudaMemcpy device to host", c.memcpyToHost(unsafe.Pointer(unsafe.SliceData(dst)), src, uintptr(len(dst)), cudaMemcpyDeviceToHost))
}

func (c *cudart) Sync() error { return c.call("cudaDeviceSynchronize", c.synchronize()) }
