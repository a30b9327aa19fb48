//go:build linux

package server

import (
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// Peer is who is at the other end of a connection, by SO_PEERCRED: the
// credentials of the process that connected, at the time it connected. The
// pid is for logs only; pids are reused, and the connection, not the pid,
// owns what the peer takes.
type Peer struct {
	PID      int32
	UID, GID uint32
}

func (p Peer) String() string { return fmt.Sprintf("pid %d uid %d gid %d", p.PID, p.UID, p.GID) }

// peerOf reads the credentials of c's peer.
func peerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

// allowed reports whether p is on the allowlists.
func (c *Config) allowed(p Peer) bool {
	return slices.Contains(c.AllowUIDs, p.UID) || slices.Contains(c.AllowGIDs, p.GID)
}

// refusal is the message a refused peer gets, and the log line.
func (c *Config) refusal(p Peer) string {
	return fmt.Sprintf("peer %v is not allowed: this kvallocd serves uids %v and gids %v (flags -allow-uid, -allow-gid)", p, c.AllowUIDs, c.AllowGIDs)
}
