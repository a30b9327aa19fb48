//go:build linux

package client

import (
	"fmt"
	"net"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// checkDaemon reads the credentials of the process serving the socket
// (SO_PEERCRED: the process that listened, as it was then) and refuses a
// uid not in trusted (empty: root and this process's effective uid).
func (c *Client) checkDaemon(trusted []uint32) error {
	own := uint32(os.Geteuid())
	if len(trusted) == 0 {
		trusted = []uint32{0, own}
		if own == 0 {
			trusted = trusted[:1]
		}
	}
	raw, err := c.c.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDisconnected, c.c.path, err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		cerr = err
	}
	if cerr != nil {
		return fmt.Errorf("%w: reading the credentials of the daemon at %s (SO_PEERCRED): %w", ErrDisconnected, c.c.path, cerr)
	}
	if !slices.Contains(trusted, cred.Uid) {
		return fmt.Errorf("%w: %s is served by pid %d of uid %d, and this client (uid %d) trusts only uids %v (Options.DaemonUIDs): refusing to send it anything",
			ErrUntrustedDaemon, c.c.path, cred.Pid, cred.Uid, own, trusted)
	}
	return nil
}

// pathConn is the connection with errors that name the dialled path: the
// kernel reports the daemon's address as the name its socket was bound
// under, which for kvallocd is a temporary name since renamed onto the
// path, so a *net.OpError would name a file that does not exist.
type pathConn struct {
	*net.UnixConn
	path string
}

func (p pathConn) Read(b []byte) (int, error) {
	n, err := p.UnixConn.Read(b)
	return n, p.named(err)
}

func (p pathConn) Write(b []byte) (int, error) {
	n, err := p.UnixConn.Write(b)
	return n, p.named(err)
}

func (p pathConn) ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error) {
	n, oobn, flags, addr, err = p.UnixConn.ReadMsgUnix(b, oob)
	return n, oobn, flags, addr, p.named(err)
}

// named rewrites a *net.OpError's addresses to the dialled path, keeping
// its operation and cause (errors.Is(err, os.ErrDeadlineExceeded) holds).
func (p pathConn) named(err error) error {
	op, ok := err.(*net.OpError)
	if !ok {
		return err
	}
	named := *op
	named.Source, named.Addr = nil, &net.UnixAddr{Name: p.path, Net: "unix"}
	return &named
}
