//go:build linux

// Package shmpage maps one page of a file as shared memory: the boards
// that a test harness's processes share, counters that survive the SIGKILL
// of the process that wrote them. Put only atomics in a page, never Go
// pointers: it lives off the Go heap, and every process that maps it sees
// every store.
package shmpage

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Size is the bytes of a page that Map maps.
const Size = 4096

// Map maps the first Size bytes of the file at path, read-write and
// MAP_SHARED; with create it creates or truncates the file to Size bytes
// of zeros first. It returns the page and the function that unmaps it.
func Map(path string, create bool) (unsafe.Pointer, func(), error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(Size); err != nil {
			return nil, nil, err
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Pointer(&mem[0]), func() { _ = unix.Munmap(mem) }, nil
}
