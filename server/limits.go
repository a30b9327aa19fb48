//go:build linux

package server

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/wire"
)

// What a peer can make the daemon hold is bounded:
//
//   - connections: at most Config.MaxConns open, and MaxConnsPerUID from
//     one uid, so that one user (or one runaway engine) cannot take them
//     all; one past a cap is answered TOO_MANY_CONNECTIONS by the accept
//     loop and closed, costing no goroutine;
//   - a connection that does not say hello within Config.HelloTimeout is
//     answered TIMEOUT and closed, so silent connections do not stay;
//   - descriptors: the accept loop keeps one spare descriptor (on
//     /dev/null). When accept fails for want of descriptors (EMFILE,
//     ENFILE), which it does before it looks for a connection, the loop
//     waits until one is pending and tries again; failing again, it closes
//     the spare, accepts the connection with it, answers
//     TOO_MANY_CONNECTIONS, closes it and takes the spare again. So a
//     client is told why instead of waiting in the backlog, and the loop
//     neither spins nor logs a line per failed accept;
//   - memory for frames: bufPool (buffers.go);
//   - the log: logHandler (logger.go).

// refuseTimeout bounds writing a refusal from the accept loop; the answer
// is some 150 bytes into an empty socket buffer, so it does not wait.
const refuseTimeout = 100 * time.Millisecond

// overCapLocked returns why a new connection from peer is past a cap, or
// "". With s.mu held.
func (s *Server) overCapLocked(peer Peer, perr error) string {
	switch {
	case len(s.conns) >= s.cfg.MaxConns:
		return fmt.Sprintf("%d connections are open, the most this kvallocd serves (flag -max-conns)", len(s.conns))
	case perr == nil && s.perUID[peer.UID] >= s.cfg.MaxConnsPerUID:
		return fmt.Sprintf("uid %d has %d connections open, the most this kvallocd serves one uid (flag -max-conns-per-uid)", peer.UID, s.perUID[peer.UID])
	}
	return ""
}

// refuseConn answers TOO_MANY_CONNECTIONS, as a hello answer, and closes
// c.
func (s *Server) refuseConn(c *net.UnixConn, msg string) {
	var enc wire.Encoder
	out, err := enc.AppendAnswer(nil, &wire.Answer{Type: wire.TypeHello.Answer(), Code: wire.CodeTooManyConnections, Message: msg, Epoch: s.epoch})
	if err == nil {
		_ = c.SetWriteDeadline(time.Now().Add(refuseTimeout))
		_, _ = c.Write(out)
	}
	c.Close()
}

// outOfFDs reports whether an accept failed for want of descriptors.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// waitPending waits until a connection is waiting to be accepted (the
// listener is readable), or the daemon is closing. accept(2) fails with
// EMFILE before it looks for a connection, so the accept loop, out of
// descriptors, waits here instead of spinning. A listener's RawConn only
// supports Control, so this polls in steps of 100 ms.
func (s *Server) waitPending() {
	raw, err := s.ln.ln.SyscallConn()
	if err != nil {
		return
	}
	for {
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		ready := false
		if closing || raw.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(p, 100)
			ready = n > 0
		}) != nil || ready {
			return
		}
	}
}

// refuseWithReserve frees the spare descriptor, accepts the connection
// waiting with it, answers TOO_MANY_CONNECTIONS, closes it and takes the
// spare again. It reports whether it refused one.
func (s *Server) refuseWithReserve() bool {
	raw, err := s.ln.ln.SyscallConn()
	if err != nil {
		return false
	}
	s.dropReserve()
	defer s.takeReserve()
	nfd, aerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) {
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	}); err != nil || aerr != nil {
		return false
	}
	defer unix.Close(nfd)
	s.noFDs.Add(1)
	n := s.openConns()
	s.log.Warn("refused connection", "why", "out of file descriptors", "open", n)
	var enc wire.Encoder
	msg := fmt.Sprintf("kvallocd is out of file descriptors (%d connections open); close some, or raise its RLIMIT_NOFILE", n)
	if out, err := enc.AppendAnswer(nil, &wire.Answer{Type: wire.TypeHello.Answer(), Code: wire.CodeTooManyConnections, Message: msg, Epoch: s.epoch}); err == nil {
		_, _ = unix.Write(nfd, out) // a fresh socket's empty buffer takes it at once
	}
	return true
}

// takeReserve opens the spare descriptor if it is not open, unless the
// daemon is closing.
func (s *Server) takeReserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.takeReserveLocked()
}

func (s *Server) takeReserveLocked() {
	if s.reserve >= 0 || s.closing {
		return
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.reserve = fd
	}
}

// dropReserve closes the spare descriptor.
func (s *Server) dropReserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropReserveLocked()
}

func (s *Server) dropReserveLocked() {
	if s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
	}
}

func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
