//go:build linux

// CUDA host region contract: the memory is page-locked host memory from
// cudaHostAlloc, off the Go heap. The garbage collector never scans or moves
// it, so it must never hold Go pointers (the allocator stores none). It is
// released by Close (cudaFreeHost), and only by Close: there is no finalizer.
//
// The CUDA runtime is loaded at run time with purego (no cgo; Linux only,
// elsewhere region_other.go reports ErrUnsupported):
// a binary built on a machine without CUDA runs anywhere, and
// NewCUDAHostRegion reports ErrCUDAUnavailable where the runtime library,
// the driver or a device is missing.

package hostmem

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/kvalloc/kvalloc/allocator"
)

// cudaSonames are the CUDA runtime library names tried, in order.
var cudaSonames = []string{"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}

// CUDARuntimeNames returns the CUDA runtime library names that
// NewCUDAHostRegion and PinCUDA try, in order, for a tool that loads the
// same runtime itself (a copy: changing it changes nothing here).
func CUDARuntimeNames() []string { return append([]string(nil), cudaSonames...) }

// cudaError_t values the package tells apart.
const (
	cudaSuccess                      = 0
	cudaErrorInvalidValue            = 1
	cudaErrorMemoryAllocation        = 2
	cudaErrorInitializationError     = 3
	cudaErrorStubLibrary             = 34
	cudaErrorInsufficientDriver      = 35
	cudaErrorCallRequiresNewerDriver = 36
	cudaErrorDevicesUnavailable      = 46
	cudaErrorNoDevice                = 100
	cudaErrorInvalidDevice           = 101
	cudaErrorNotSupported            = 801
	cudaErrorSystemNotReady          = 802
	cudaErrorSystemDriverMismatch    = 803
	cudaErrorCompatNotSupported      = 804
)

// cudaRuntime is the part of the CUDA runtime API the package calls. The
// optional functions are nil when the library lacks them. Tests build fakes.
type cudaRuntime struct {
	soname string

	hostAlloc      func(ptr *unsafe.Pointer, size uintptr, flags uint32) int32
	freeHost       func(ptr unsafe.Pointer) int32
	getDeviceCount func(count *int32) int32

	driverGetVersion  func(version *int32) int32 // optional
	runtimeGetVersion func(version *int32) int32 // optional
	getErrorName      func(code int32) string    // optional
	getErrorString    func(code int32) string    // optional
}

var (
	cudaLoadOnce sync.Once
	cudaRT       *cudaRuntime
	cudaLoadErr  error
)

// cudaLoad loads the CUDA runtime once and caches the result, success or
// failure.
func cudaLoad() (*cudaRuntime, error) {
	cudaLoadOnce.Do(func() { cudaRT, cudaLoadErr = cudaLoadRuntime(cudaSonames) })
	return cudaRT, cudaLoadErr
}

// cudaLoadRuntime dlopens the first of sonames that loads and binds its
// symbols. It never panics: symbols are looked up with Dlsym before they are
// bound, and a panic from binding is recovered into an error.
func cudaLoadRuntime(sonames []string) (rt *cudaRuntime, err error) {
	var (
		lib    uintptr
		soname string
		last   error
	)
	for _, name := range sonames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil && h != 0 {
			lib, soname = h, name
			break
		}
		last = err
	}
	if lib == 0 {
		detail := ""
		if last != nil {
			detail = "; last dlopen error: " + last.Error()
		}
		return nil, fmt.Errorf("%w: CUDA runtime library not found (tried %s)%s",
			ErrCUDAUnavailable, strings.Join(sonames, ", "), detail)
	}

	defer func() {
		if p := recover(); p != nil {
			rt = nil
			err = fmt.Errorf("%w: binding CUDA runtime %s: %v", ErrCUDAUnavailable, soname, p)
		}
	}()
	rt = &cudaRuntime{soname: soname}
	bind := func(fptr any, name string, required bool) error {
		sym, err := purego.Dlsym(lib, name)
		if err != nil || sym == 0 {
			if required {
				return fmt.Errorf("%w: CUDA runtime library %s lacks symbol %s", ErrCUDAUnavailable, soname, name)
			}
			return nil
		}
		purego.RegisterFunc(fptr, sym)
		return nil
	}
	for _, s := range []struct {
		fptr     any
		name     string
		required bool
	}{
		{&rt.hostAlloc, "cudaHostAlloc", true},
		{&rt.freeHost, "cudaFreeHost", true},
		{&rt.getDeviceCount, "cudaGetDeviceCount", true},
		{&rt.driverGetVersion, "cudaDriverGetVersion", false},
		{&rt.runtimeGetVersion, "cudaRuntimeGetVersion", false},
		{&rt.getErrorName, "cudaGetErrorName", false},
		{&rt.getErrorString, "cudaGetErrorString", false},
	} {
		if err := bind(s.fptr, s.name, s.required); err != nil {
			_ = purego.Dlclose(lib)
			return nil, err
		}
	}
	return rt, nil
}

// describe formats a cudaError_t as "error 35 cudaErrorInsufficientDriver:
// CUDA driver version is insufficient for CUDA runtime version", using
// cudaGetErrorName and cudaGetErrorString when the library has them.
func (rt *cudaRuntime) describe(code int32) string {
	s := fmt.Sprintf("error %d", code)
	if rt.getErrorName != nil {
		if name := rt.getErrorName(code); name != "" {
			s += " " + name
		}
	}
	if rt.getErrorString != nil {
		if text := rt.getErrorString(code); text != "" {
			s += ": " + text
		}
	}
	return s
}

// probe checks that a driver and at least one device are present, and says
// which is missing in an error wrapping ErrCUDAUnavailable.
func (rt *cudaRuntime) probe() error {
	if rt.driverGetVersion != nil {
		var v int32
		if code := rt.driverGetVersion(&v); code != cudaSuccess {
			return fmt.Errorf("%w: no CUDA driver: cudaDriverGetVersion: %s", ErrCUDAUnavailable, rt.describe(code))
		}
		if v == 0 {
			return fmt.Errorf("%w: no CUDA driver: cudaDriverGetVersion reports driver version 0 (runtime %s)",
				ErrCUDAUnavailable, rt.runtimeVersion())
		}
	}
	var n int32
	switch code := rt.getDeviceCount(&n); code {
	case cudaSuccess:
		if n <= 0 {
			return fmt.Errorf("%w: no CUDA device: cudaGetDeviceCount reports 0 devices", ErrCUDAUnavailable)
		}
		return nil
	case cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorDevicesUnavailable:
		return fmt.Errorf("%w: no CUDA device: cudaGetDeviceCount: %s", ErrCUDAUnavailable, rt.describe(code))
	case cudaErrorInsufficientDriver, cudaErrorStubLibrary, cudaErrorInitializationError,
		cudaErrorCallRequiresNewerDriver, cudaErrorSystemDriverMismatch, cudaErrorCompatNotSupported,
		cudaErrorSystemNotReady, cudaErrorNotSupported:
		return fmt.Errorf("%w: no CUDA driver: cudaGetDeviceCount: %s (runtime %s)",
			ErrCUDAUnavailable, rt.describe(code), rt.runtimeVersion())
	default:
		return fmt.Errorf("%w: CUDA device query failed: cudaGetDeviceCount: %s", ErrCUDAUnavailable, rt.describe(code))
	}
}

// runtimeVersion formats cudaRuntimeGetVersion as "12.4", or "unknown".
func (rt *cudaRuntime) runtimeVersion() string {
	if rt.runtimeGetVersion == nil {
		return "unknown"
	}
	var v int32
	if rt.runtimeGetVersion(&v) != cudaSuccess || v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// cudaSentinel maps a cudaError_t from an allocation or free to the package
// sentinel.
func cudaSentinel(code int32) error {
	switch code {
	case cudaErrorMemoryAllocation:
		return ErrOutOfMemory
	case cudaErrorInvalidValue:
		return ErrInvalidArgument
	default:
		return ErrCUDAUnavailable
	}
}

// cudaHostRegion is a Region over cudaHostAlloc memory.
type cudaHostRegion struct {
	rt   *cudaRuntime
	mu   sync.Mutex
	base unsafe.Pointer // nil once closed
	size int64
	allocator.RegionState
}

// NewCUDAHostRegion returns a region of exactly size bytes of page-locked
// host memory allocated with cudaHostAlloc (flags cudaHostAllocDefault), so
// copies between it and a GPU run at full DMA speed. The CUDA runtime
// (libcudart.so, .so.13, .so.12 or .so.11.0) is loaded at the first call,
// without cgo, and the outcome is cached.
//
// Where the runtime library, the driver or a device is missing the error
// wraps ErrCUDAUnavailable and its message says which: "CUDA runtime library
// not found (tried ...)", "no CUDA driver" or "no CUDA device", with the
// cudaError_t code and its text. size <= 0 wraps ErrInvalidArgument; a
// refused allocation (cudaErrorMemoryAllocation) wraps ErrOutOfMemory.
func NewCUDAHostRegion(size int64) (allocator.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: cuda-host region size %d: must be positive", ErrInvalidArgument, size)
	}
	rt, err := cudaLoad()
	if err != nil {
		return nil, err
	}
	return newCUDAHostRegion(rt, size)
}

// newCUDAHostRegion allocates over a loaded (or fake) runtime.
func newCUDAHostRegion(rt *cudaRuntime, size int64) (r allocator.Region, err error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: cuda-host region size %d: must be positive", ErrInvalidArgument, size)
	}
	if uint64(size) > uint64(maxRegionInt) {
		return nil, fmt.Errorf("%w: cuda-host region size %d exceeds the address space", ErrInvalidArgument, size)
	}
	defer func() {
		if p := recover(); p != nil {
			r = nil
			err = fmt.Errorf("%w: calling CUDA runtime %s: %v", ErrCUDAUnavailable, rt.soname, p)
		}
	}()
	if err := rt.probe(); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if code := rt.hostAlloc(&p, uintptr(size), 0 /* cudaHostAllocDefault */); code != cudaSuccess {
		return nil, fmt.Errorf("%w: cudaHostAlloc %s: %s", cudaSentinel(code), regionSizeString(size), rt.describe(code))
	}
	if p == nil {
		return nil, fmt.Errorf("%w: cudaHostAlloc %s returned a null pointer", ErrOutOfMemory, regionSizeString(size))
	}
	return &cudaHostRegion{rt: rt, base: p, size: size}, nil
}

// Bytes returns exactly the requested size, or nil after Close.
func (r *cudaHostRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(r.base), r.size)
}

// Kind returns "cuda-host".
func (r *cudaHostRegion) Kind() string { return KindCUDAHost }

// Close frees the memory with cudaFreeHost, once. It is idempotent and safe
// to call concurrently; every call after the first returns nil.
func (r *cudaHostRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return nil
	}
	p := r.base
	r.base = nil
	r.MarkClosed()
	if code := r.rt.freeHost(p); code != cudaSuccess {
		return fmt.Errorf("%w: cudaFreeHost: %s", ErrRelease, r.rt.describe(code))
	}
	return nil
}
