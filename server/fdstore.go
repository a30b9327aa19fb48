//go:build linux

package server

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// systemd: readiness, socket activation and the fd store.
//
// With Config.Systemd the daemon reads what systemd passed it at start,
// $LISTEN_FDS descriptors from 3 on, for this process ($LISTEN_PID), named
// by $LISTEN_FDNAMES:
//
//   - a listening AF_UNIX stream socket (socket activation, a .socket
//     unit): served instead of binding SocketPath; systemd owns the file,
//     so the daemon neither locks nor removes it;
//   - "pool" and "index": the memfd and the index a previous daemon of
//     the unit stored (FDSTORE=1). The index is checked as a handoff's is
//     (index.go) and, once restored, marked consumed (its magic zeroed, in
//     the memfd systemd still holds), so that a later start never trusts
//     it again whatever else happens; a doubtful one, or a pool without
//     one (the previous daemon crashed), and the daemon starts cold with
//     a fresh pool, logging why.
//
// Once Serve runs (the first segment of the pool is served) it sends
// READY=1 to $NOTIFY_SOCKET (Type=notify; after a takeover, with
// MAINPID=, so that a successor started by the unit's ExecReload becomes
// its main process, under NotifyAccess=all), drops the previous "pool" and
// "index" from the fd store (FDSTOREREMOVE=1) and stores its memfd as
// "pool" (FDSTORE=1; the unit needs FDStoreMax=2 or more). Close sends
// STOPPING=1 and, after every connection has been released, stores the
// index of its finished objects, in a memfd of its own, as "index". A
// crash stores nothing: the next start finds the pool without a fresh
// index and starts cold (see DESIGN.md for what keeping the index current
// would cost).

// Names in the fd store.
const (
	fdNamePool  = "pool"
	fdNameIndex = "index"
)

// systemdFDs is what systemd passed.
type systemdFDs struct {
	listener    *net.UnixListener
	pool, index int // -1: none
}

// takeSystemdFDs reads and unsets $LISTEN_FDS, $LISTEN_PID and
// $LISTEN_FDNAMES, and sorts the descriptors out; those it has no use for
// are closed and logged.
func (s *Server) takeSystemdFDs() *systemdFDs {
	out := &systemdFDs{pool: -1, index: -1}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID"))
	names := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")
	for _, v := range []string{"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	if err != nil || n <= 0 || pid != os.Getpid() {
		return out
	}
	for i := range n {
		fd := 3 + i
		unix.CloseOnExec(fd)
		name := ""
		if i < len(names) {
			name = names[i]
		}
		switch {
		case name == fdNamePool && out.pool < 0:
			out.pool = fd
		case name == fdNameIndex && out.index < 0:
			out.index = fd
		case out.listener == nil && isUnixListener(fd):
			f := os.NewFile(uintptr(fd), "listen-"+name)
			fl, err := net.FileListener(f)
			f.Close()
			if ul, ok := fl.(*net.UnixListener); err == nil && ok {
				ul.SetUnlinkOnClose(false)
				out.listener = ul
				continue
			}
			s.log.Warn("systemd passed a socket the daemon cannot serve", "fd", fd, "name", name, "err", err)
		default:
			s.log.Warn("systemd passed a descriptor the daemon has no use for; closing it", "fd", fd, "name", name)
			unix.Close(fd)
		}
	}
	return out
}

// isUnixListener reports whether fd is a listening AF_UNIX stream socket.
func isUnixListener(fd int) bool {
	acc, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	dom, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	return err1 == nil && err2 == nil && err3 == nil && acc == 1 && typ == unix.SOCK_STREAM && dom == unix.AF_UNIX
}

// openSystemd is openWarm's systemd half: the activated socket, and a
// warm start from the fd store when no takeover was asked for. It
// reports whether it restored the pool.
func (s *Server) openSystemd(cfg Config) bool {
	s.restart.notify = newNotifier()
	sd := s.takeSystemdFDs()
	if sd.listener != nil {
		// systemd owns the socket file: no lock, and "" is never removed.
		s.ln = &listener{ln: sd.listener}
		s.restart.activated = true
		s.log.Info("serving the socket systemd passed (socket activation)", "socket", cfg.SocketPath)
	}
	if sd.pool < 0 {
		if sd.index >= 0 {
			unix.Close(sd.index)
		}
		return false
	}
	if cfg.Takeover {
		unix.Close(sd.pool)
		if sd.index >= 0 {
			unix.Close(sd.index)
		}
		return false
	}
	idx, err := readIndexFD(sd.index)
	if err == nil {
		err = s.adopt(cfg, sd.pool, idx, nil, 0)
	} else {
		unix.Close(sd.pool)
	}
	if err != nil {
		if sd.index >= 0 {
			unix.Close(sd.index)
		}
		s.restart.why = err.Error()
		s.log.Warn("starting cold: the fd store's pool is not restored", "why", err)
		return false
	}
	// Consumed: whatever happens from now on, this index is stale.
	_, _ = unix.Pwrite(sd.index, make([]byte, 4), 0)
	unix.Close(sd.index)
	s.restart.started = "fdstore"
	s.log.Info("restored the pool from systemd's fd store", "objects", s.mgr.Len())
	return true
}

// readIndexFD reads the index memfd fd whole.
func readIndexFD(fd int) ([]byte, error) {
	if fd < 0 {
		return nil, fmt.Errorf("%w: the fd store holds a pool but no index (the daemon before crashed, or was killed)", errIndex)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat: %w", errIndex, err)
	}
	if st.Size < 0 || st.Size > maxIndexBytes {
		return nil, fmt.Errorf("%w: %d bytes", errIndex, st.Size)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w: reading it: %v", errIndex, err)
		}
		off += n
	}
	return b, nil
}

// notifyReady tells systemd the daemon serves, and stores the pool.
func (s *Server) notifyReady() {
	n := s.restart.notify
	if n == nil {
		return
	}
	how, _ := s.Start()
	status := fmt.Sprintf("STATUS=serving %d objects (started %s), epoch %#x", s.mgr.Len(), how, s.epoch)
	ready := "READY=1\n" + status
	if how == "handoff" {
		// A successor started inside the unit (ExecReload=kvallocd
		// -takeover) becomes its main process; the unit needs
		// NotifyAccess=all for systemd to take it.
		ready = fmt.Sprintf("MAINPID=%d\n", os.Getpid()) + ready
	}
	if err := n.send(ready); err != nil {
		s.log.Warn("READY=1", "err", err)
	}
	for _, name := range []string{fdNamePool, fdNameIndex} {
		if err := n.send("FDSTOREREMOVE=1\nFDNAME=" + name); err != nil {
			s.log.Warn("FDSTOREREMOVE", "name", name, "err", err)
		}
	}
	if err := n.send("FDSTORE=1\nFDNAME="+fdNamePool, s.pool.FD()); err != nil {
		s.log.Warn("storing the pool in systemd's fd store", "err", err)
	}
}

// storeIndex, at Close after every connection has been released, stores
// the index of the finished objects in systemd's fd store.
func (s *Server) storeIndex() {
	n := s.restart.notify
	if n == nil {
		return
	}
	start := time.Now()
	idx, err := s.restartIndex()
	if err == nil {
		err = storeMemfd(n, fdNameIndex, idx)
	}
	if err != nil {
		s.log.Warn("the index is not stored: the next start is cold", "err", err)
		return
	}
	s.log.Info("stored the index in systemd's fd store", "objects", s.mgr.Len(), "held_blocks", s.mgr.Stats().QuarantinedObjects, "index_bytes", len(idx), "took", time.Since(start))
}

// storeMemfd writes b into a new memfd and stores it as name.
func storeMemfd(n *notifier, name string, b []byte) error {
	fd, err := unix.MemfdCreate("kvallocd-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for off := 0; off < len(b); {
		m, err := unix.Write(fd, b[off:])
		if err != nil {
			return err
		}
		off += m
	}
	return n.send("FDSTORE=1\nFDNAME="+name, fd)
}

// notifyStopping tells systemd the daemon is stopping.
func (s *Server) notifyStopping() {
	if err := s.restart.notify.send("STOPPING=1"); err != nil {
		s.log.Warn("STOPPING=1", "err", err)
	}
}
