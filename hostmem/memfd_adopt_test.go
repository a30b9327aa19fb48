//go:build linux

package hostmem

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMemfdAdopt: a region over an existing memfd (MemfdOptions.FD) maps
// the very bytes another region wrote, and owns the fd from then on; a
// memfd of another size, or one not sealed, is refused with
// ErrInvalidArgument and stays the caller's.
func TestMemfdAdopt(t *testing.T) {
	const size = 4 << 20
	first, err := NewSegmentedRegion(size, SegmentedOptions{NoReserve: true, Memfd: &MemfdOptions{Name: "adopt"}})
	require.NoError(t, err)
	copy(first.Bytes()[size-5:], "stamp")
	fd, err := unix.Dup(first.FD())
	require.NoError(t, err)
	require.NoError(t, first.Close())

	second := newMemfdRegion(t, size, SegmentedOptions{NoReserve: true, Memfd: &MemfdOptions{FD: fd}})
	require.Equal(t, fd, second.FD())
	require.Equal(t, "stamp", string(second.Bytes()[size-5:]))

	// Another size: refused, the fd left open.
	other, err := unix.Dup(fd)
	require.NoError(t, err)
	defer unix.Close(other)
	_, err = NewSegmentedRegion(2*size, SegmentedOptions{NoReserve: true, Memfd: &MemfdOptions{FD: other}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = unix.FcntlInt(uintptr(other), unix.F_GET_SEALS, 0)
	require.NoError(t, err, "a refused fd was closed")

	// Not sealed.
	plain, err := unix.MemfdCreate("plain", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(plain)
	require.NoError(t, unix.Ftruncate(plain, size))
	_, err = NewSegmentedRegion(size, SegmentedOptions{NoReserve: true, Memfd: &MemfdOptions{FD: plain}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
