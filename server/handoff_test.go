//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// stampOf is the 8 bytes a test writes at both ends of key's block.
func stampOf(k l1.ObjectKey) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k.ChunkHash); i++ {
		h = (h ^ uint64(k.ChunkHash[i])) * 1099511628211
	}
	return h | 1
}

func putStamped(t *testing.T, c *client.Client, ks []l1.ObjectKey, size int64) {
	t.Helper()
	rs, err := c.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	leases := make([]client.Lease, len(ks))
	for i, r := range rs {
		require.Equal(t, wire.StatusOK, r.Status)
		b, err := c.Bytes(r.Block)
		require.NoError(t, err)
		binary.LittleEndian.PutUint64(b, stampOf(ks[i]))
		binary.LittleEndian.PutUint64(b[size-8:], stampOf(ks[i]))
		leases[i] = r.Lease
	}
	sts, err := c.FinishWrite(ks, leases)
	require.NoError(t, err)
	for _, st := range sts {
		require.Equal(t, wire.StatusOK, st)
	}
}

// TestHandoffInProcess: a daemon started with Takeover takes the pool of
// the one serving: every finished object reads back its stamps under the
// new epoch, those the old daemon's connections had read-locked still
// read-locked (their readers may still be copying: not evictable until the
// lock lapses); a write in progress is gone, its block held in the
// quarantine (its writer may still be copying into it); the old
// connection sees its end, its leases refused; the new daemon's books
// agree (Check), it serves the same socket, and says it started by a
// handoff.
func TestHandoffInProcess(t *testing.T) {
	const size = 64 << 10
	path := filepath.Join(t.TempDir(), "kvallocd.sock")
	old, err := server.New(server.Config{SocketPath: path, PoolSize: 64 << 20})
	require.NoError(t, err)
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Serve() }()
	c, err := client.Dial(path, client.Options{})
	require.NoError(t, err)
	defer c.Close()
	fin := keys("fin", 40)
	putStamped(t, c, fin, size)
	pending := keys("pending", 3)
	rs, err := c.ReserveWrite(pending, nil, size, l1.ModeAll)
	require.NoError(t, err)
	_, err = c.ReserveRead(fin[:5], 2)
	require.NoError(t, err)
	oldEpoch := c.Epoch()

	nu := start(t, server.Config{SocketPath: path, PoolSize: 64 << 20, Takeover: true})
	require.NoError(t, <-oldDone, "the old daemon's Serve")
	<-old.HandedOff()
	require.NoError(t, old.Close(), "Close after a handoff is a no-op")
	how, why := nu.Start()
	require.Equal(t, "handoff", how, why)
	require.NotEqual(t, oldEpoch, nu.Epoch())

	err = c.Ping()
	require.ErrorIs(t, err, client.ErrDisconnected, "the old connection outlived the handoff")
	c2 := dial(t, nu)
	require.Equal(t, nu.Epoch(), c2.Epoch())
	st := nu.Manager().Stats()
	require.Equal(t, 3, st.QuarantinedObjects, "the reserved blocks held")
	require.Equal(t, int64(3*size), st.QuarantinedBytes)
	for i, k := range fin {
		require.Equal(t, i >= 5, nu.Manager().IsEvictable(k), "%v: evictable after the handoff", k)
	}
	got, err := c2.ReserveRead(fin, 1)
	require.NoError(t, err)
	leases := make([]client.Lease, len(fin))
	for i, r := range got {
		require.Equal(t, wire.StatusOK, r.Status, "key %v", fin[i])
		b, err := c2.Bytes(r.Block)
		require.NoError(t, err)
		require.Equal(t, stampOf(fin[i]), binary.LittleEndian.Uint64(b))
		require.Equal(t, stampOf(fin[i]), binary.LittleEndian.Uint64(b[size-8:]))
		leases[i] = r.Lease
	}
	sts, err := c2.FinishRead(fin, leases, 1)
	require.NoError(t, err)
	for _, st := range sts {
		require.Equal(t, wire.StatusOK, st, "a read lock of the old daemon survived")
	}
	for _, k := range pending {
		_, ok := nu.Manager().State(k)
		require.False(t, ok, "a write in progress survived the handoff")
	}
	// An old lease is refused.
	_, err = c2.FinishWrite(pending[:1], []client.Lease{rs[0].Lease})
	require.True(t, errors.Is(err, wire.ErrWrongEpoch), "%v", err)
	require.NoError(t, nu.Check())
	require.Equal(t, 40, nu.Manager().Len())
	// And the new daemon hands off in its turn.
	third := start(t, server.Config{SocketPath: path, PoolSize: 64 << 20, Takeover: true})
	how, _ = third.Start()
	require.Equal(t, "handoff", how)
	require.Equal(t, 40, third.Manager().Len())
	require.Equal(t, 3, third.Manager().Stats().QuarantinedObjects, "the held blocks are held on by the next daemon")
	require.False(t, third.Manager().IsEvictable(fin[0]), "the read lock is held on by the next daemon")
}

// TestTakeoverCold: with nobody to take over from, or a pool of another
// size, the daemon starts cold and says why.
func TestTakeoverCold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvallocd.sock")
	s := start(t, server.Config{SocketPath: path, PoolSize: 64 << 20, Takeover: true})
	how, why := s.Start()
	require.Equal(t, "cold", how)
	require.Contains(t, why, "no daemon answers")
	c := dial(t, s)
	putStamped(t, c, keys("k", 4), 4096)

	s2 := start(t, server.Config{SocketPath: path, PoolSize: 32 << 20, Takeover: true})
	how, why = s2.Start()
	require.Equal(t, "cold", how)
	require.Contains(t, why, "stale")
	require.Equal(t, 0, s2.Manager().Len())
	c2 := dial(t, s2)
	err := c2.Ping()
	require.NoError(t, err, "the socket handed over is served")
}

// TestHandoffSocketTooLong: a socket path that fits, beside which the
// handoff socket's does not (a Unix socket path is at most 107 bytes), is
// served all the same, without a handoff socket.
func TestHandoffSocketTooLong(t *testing.T) {
	dir := t.TempDir()
	// The main socket's temporary name is dir/.name.<pid>; the handoff
	// socket's is 8 bytes longer.
	name := strings.Repeat("s", 104-len(dir)-len("/.")-len(".")-len(strconv.Itoa(os.Getpid())))
	path := filepath.Join(dir, name)
	s := start(t, server.Config{SocketPath: path, PoolSize: 16 << 20})
	c := dial(t, s)
	require.NoError(t, c.Ping())
	_, err := os.Stat(server.HandoffPath(path))
	require.True(t, os.IsNotExist(err), "a handoff socket at a path too long: %v", err)
}

// TestTakeoverTornTransfer: an old daemon (a stand-in here) that sends
// its descriptors and then only part of its index, and dies: the new
// daemon refuses the index, starts cold with a fresh pool, and serves the
// listening socket it received.
func TestTakeoverTornTransfer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kvallocd.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	hln, err := net.ListenUnix("unix", &net.UnixAddr{Name: server.HandoffPath(path), Net: "unix"})
	require.NoError(t, err)
	defer hln.Close()
	go func() {
		c, err := hln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		var req [16]byte
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		memfd, _ := unix.MemfdCreate("fake-pool", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		defer unix.Close(memfd)
		unix.Ftruncate(memfd, 64<<20)
		unix.FcntlInt(uintptr(memfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		lf, _ := ln.File()
		defer lf.Close()
		var hdr [24]byte
		binary.LittleEndian.PutUint32(hdr[:], 0x4f48564b)
		binary.LittleEndian.PutUint16(hdr[4:], 2)
		binary.LittleEndian.PutUint16(hdr[6:], 2)
		binary.LittleEndian.PutUint64(hdr[8:], 0x1234)
		binary.LittleEndian.PutUint64(hdr[16:], 1000)
		c.WriteMsgUnix(hdr[:], unix.UnixRights(memfd, int(lf.Fd())), nil)
		c.Write(make([]byte, 10)) // then dies
		ln.Close()
	}()
	s := start(t, server.Config{SocketPath: path, PoolSize: 64 << 20, Takeover: true})
	how, why := s.Start()
	require.Equal(t, "cold", how)
	require.Contains(t, why, "sent part of it")
	require.Equal(t, 0, s.Manager().Len())
	c := dial(t, s)
	require.NoError(t, c.Ping(), "the socket handed over is not served")
}

// TestHandoffSocketMode: a successor's SocketMode is the socket's once it
// serves, not the mode the old daemon gave the file.
func TestHandoffSocketMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvallocd.sock")
	old, err := server.New(server.Config{SocketPath: path, PoolSize: 16 << 20, SocketMode: 0o600})
	require.NoError(t, err)
	go old.Serve()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	nu := start(t, server.Config{SocketPath: path, PoolSize: 16 << 20, SocketMode: 0o660, Takeover: true})
	how, why := nu.Start()
	require.Equal(t, "handoff", how, why)
	<-old.HandedOff()
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm(), "the successor's -socket-mode was ignored")
}
