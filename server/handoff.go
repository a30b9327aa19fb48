//go:build linux

package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// The direct handoff: a new kvallocd takes the pool of the one serving.
//
// Every daemon listens, beside its socket, on HandoffPath(socket) (mode
// 0600). A new daemon started with Config.Takeover connects there, checks
// that the peer runs under its own uid (SO_PEERCRED), and asks. The old
// one, after checking the same of the new one, commits: it stops
// accepting, ends every connection (a request being carried out is
// finished and answered; a frame not yet read is dropped unanswered, so a
// client that got no answer knows its call did nothing), which aborts
// their writes and releases their read locks; it closes its metrics
// listener; it exports its finished objects; and it sends, in one message,
// the memfd, its listening socket and its socket's lock file
// (SCM_RIGHTS), then the index (index.go). It waits for the new daemon's
// acknowledgement, at most handoffAckTimeout, and its Serve returns: it
// exits without removing the socket, which the new daemon serves from
// then on. A client connecting meanwhile waits in the listening socket's
// backlog and is served by the new daemon; a connected one sees its
// connection end, connects again, and gets the new epoch.
//
// The frames, little-endian:
//
//	request  (new → old)  u32 "KVHO", u16 version 1, u16 0, u64 pool bytes
//	transfer (old → new)  u32 "KVHO", u16 version 1, u16 descriptors (3),
//	                      u64 old epoch, u64 index bytes; SCM_RIGHTS: the
//	                      memfd, the listening socket, the lock file;
//	                      then the index
//	ack      (new → old)  u32 "KVOK", u32 0
//
// Once begun, a handoff ends the old daemon whatever happens next. If the
// old daemon dies before the transfer (SIGKILL), the new one starts cold:
// a fresh pool on a socket of its own (the dead daemon's lock went with
// it). If the transfer arrives but the index is refused, the new one
// serves the listening socket it received with a fresh pool, and logs
// why; it never serves an index it doubts.

const (
	handoffMagic      = 0x4f48564b // "KVHO"
	handoffAckMagic   = 0x4b4f564b // "KVOK"
	handoffVersion    = 1
	handoffFrame      = 24
	handoffAckTimeout = 10 * time.Second
	// handoffDialTimeout bounds the new daemon's wait for the transfer:
	// the old one's drain (a request in progress finishes, an answer is
	// written within WriteTimeout) and its export.
	handoffDialTimeout = 60 * time.Second
	// maxIndexBytes bounds an index announced by the old daemon.
	maxIndexBytes = 4 << 30
)

// HandoffPath is where the daemon serving socket listens for its
// successor: socket + ".handoff", in the same directory.
func HandoffPath(socket string) string { return socket + ".handoff" }

// restartState is the daemon's side of restarts: its handoff socket, the
// handoff in progress, and how it started.
type restartState struct {
	ln        *net.UnixListener
	path      string
	ino       uint64 // the handoff socket's inode, to remove only our own
	mu        sync.Mutex
	running   bool
	done      chan struct{} // closed when a handoff is over (the daemon must exit)
	notify    *notifier     // systemd's notification socket; nil without
	activated bool          // the socket came from systemd
	// Started says how this daemon started ("cold", "handoff", "fdstore"
	// and Why why cold, for logs and tests.
	started, why string
}

// Start says how the daemon started: "handoff" (it took a pool over from
// the daemon before it), "fdstore" (from systemd's fd store), or "cold"; and,
// when cold after a takeover was asked for, why.
func (s *Server) Start() (how, why string) { return s.restart.started, s.restart.why }

// HandedOff is closed once a handoff to a successor has ended, whether or
// not the successor took the pool (a handoff, once begun, ends the
// daemon): it then serves nothing and must exit without Close's cleanup
// (Close is a no-op then). Serve returns once it is closed.
func (s *Server) HandedOff() <-chan struct{} { return s.restart.doneChan() }

func (r *restartState) doneChan() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = make(chan struct{})
	}
	return r.done
}

// listenHandoff binds the handoff socket in the socket's checked
// directory (socketDir): under a temporary name, mode 0600, renamed into
// place (as listen does for the main socket).
func (s *Server) listenHandoff() error {
	dir, err := socketDir(s.cfg.SocketPath) // the socket's checks (socketdir.go)
	if err != nil {
		return err
	}
	path := HandoffPath(filepath.Join(dir, filepath.Base(s.cfg.SocketPath)))
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return fmt.Errorf("kvallocd: handoff socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return fmt.Errorf("kvallocd: handoff socket mode: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return fmt.Errorf("kvallocd: handoff socket: %w", err)
	}
	s.restart.ln, s.restart.path = ln, path
	if fi, err := os.Stat(path); err == nil {
		if sys, ok := fi.Sys().(*unix.Stat_t); ok {
			s.restart.ino = sys.Ino
		}
	}
	go s.acceptHandoffs(ln)
	return nil
}

// closeHandoff stops listening for a successor and removes the socket,
// unless a handoff replaced it.
func (s *Server) closeHandoff() {
	if s.restart.ln == nil {
		return
	}
	s.restart.ln.Close()
	if fi, err := os.Stat(s.restart.path); err == nil {
		if sys, ok := fi.Sys().(*unix.Stat_t); ok && s.restart.ino == sys.Ino {
			os.Remove(s.restart.path)
		}
	}
}

// acceptHandoffs serves the handoff socket until it closes; one handoff
// runs at a time, and the first to begin is the last.
func (s *Server) acceptHandoffs(ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			if err := s.handOff(c); err != nil {
				s.log.Warn("handoff refused or failed", "err", err)
			}
		}()
	}
}

// handOff serves one successor on c.
func (s *Server) handOff(c *net.UnixConn) error {
	defer c.Close()
	peer, err := peerOf(c)
	if err != nil {
		return err
	}
	if peer.UID != uint32(os.Geteuid()) {
		return fmt.Errorf("a handoff asked by %v, not this daemon's uid %d", peer, os.Geteuid())
	}
	_ = c.SetDeadline(time.Now().Add(handoffAckTimeout))
	var req [handoffFrame]byte
	if _, err := io.ReadFull(c, req[:16]); err != nil {
		return fmt.Errorf("handoff request: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint32(req[:]) != handoffMagic || le.Uint16(req[4:]) != handoffVersion {
		return fmt.Errorf("handoff request: magic %#x version %d", le.Uint32(req[:]), le.Uint16(req[4:]))
	}
	r := &s.restart
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("a handoff is already running")
	}
	r.running = true
	r.mu.Unlock()
	start := time.Now()
	s.log.Info("handoff: draining", "successor", peer.String())
	defer func() {
		close(r.doneChan())
	}()
	idx, err := s.drainAndExport()
	if err != nil {
		return err
	}
	lnf, err := s.ln.ln.File()
	if err != nil {
		return fmt.Errorf("handoff: the listening socket: %w", err)
	}
	defer lnf.Close()
	fds := []int{s.pool.FD(), int(lnf.Fd())}
	if s.ln.lock != nil {
		fds = append(fds, int(s.ln.lock.Fd()))
	}
	var hdr [handoffFrame]byte
	le.PutUint32(hdr[:], handoffMagic)
	le.PutUint16(hdr[4:], handoffVersion)
	le.PutUint16(hdr[6:], uint16(len(fds)))
	le.PutUint64(hdr[8:], s.epoch)
	le.PutUint64(hdr[16:], uint64(len(idx)))
	_ = c.SetDeadline(time.Now().Add(handoffAckTimeout))
	if _, _, err := c.WriteMsgUnix(hdr[:], unix.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("handoff: sending the descriptors: %w", err)
	}
	if _, err := c.Write(idx); err != nil {
		return fmt.Errorf("handoff: sending the index: %w", err)
	}
	var ack [8]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil || le.Uint32(ack[:]) != handoffAckMagic {
		return fmt.Errorf("handoff: no acknowledgement (%v); exiting all the same", err)
	}
	s.log.Info("handoff: done", "index_bytes", len(idx), "took", time.Since(start))
	return nil
}

// drainAndExport stops the daemon serving: no accept, every connection
// ended and released, no metrics; and returns the index of what is left.
func (s *Server) drainAndExport() ([]byte, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, errors.New("handoff: the daemon is already shutting down")
	}
	s.closing = true
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.bufs.shut()                       // a request waiting for frame buffers ends now
	_ = s.ln.ln.SetDeadline(time.Now()) // Serve's accept returns; it sees closing
	s.wg.Wait()
	if s.http != nil {
		s.http.Close()
	}
	objs, err := s.mgr.Export()
	if err != nil {
		return nil, fmt.Errorf("handoff: export: %w", err)
	}
	if handoffDropBite {
		objs = objs[:len(objs)-len(objs)/100]
	}
	id, err := memfdIdentity(s.pool.FD(), s.alloc.Align())
	if err != nil {
		return nil, err
	}
	return encodeIndex(nil, id, s.mgr.Config().Eviction, s.epoch, objs), nil
}

// handoffDropBite is a deliberate bug, set only by the handoff harness's
// bite test (export_test.go): the index leaves out the last hundredth of
// the objects (their blocks stay free in the successor).
var handoffDropBite bool

// memfdIdentity is the poolIdentity of memfd fd under alignment align.
func memfdIdentity(fd int, align int64) (poolIdentity, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return poolIdentity{}, fmt.Errorf("kvallocd: fstat of the pool's memfd: %w", err)
	}
	return poolIdentity{bytes: st.Size, align: align, dev: uint64(st.Dev), ino: st.Ino}, nil
}

// serveEnd is what Serve returns once it stops: after a handoff it first
// waits for the handoff to finish, so that the process exits only then.
func (s *Server) serveEnd() error {
	s.restart.mu.Lock()
	running := s.restart.running
	s.restart.mu.Unlock()
	if running {
		<-s.restart.doneChan()
	}
	return nil
}

// transfer is what a successor received.
type transfer struct {
	memfd    int // -1: none
	ln       *net.UnixListener
	lock     *os.File
	epoch    uint64
	index    []byte
	indexErr error // why the index did not arrive whole
}

// takeover asks the daemon on cfg.SocketPath's handoff socket for its
// pool. It returns nil and why when nothing arrived.
func takeover(cfg Config) (*transfer, error) {
	// The handoff socket is trusted only in a directory no other user can
	// change (socketdir.go), and only from a peer of this uid (below).
	dir, err := socketDir(cfg.SocketPath)
	if err != nil {
		return nil, err
	}
	path := HandoffPath(filepath.Join(dir, filepath.Base(cfg.SocketPath)))
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("no daemon answers on %s: %w", path, err)
	}
	defer c.Close()
	peer, err := peerOf(c)
	if err != nil {
		return nil, err
	}
	if peer.UID != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("the process on %s is %v, not of this daemon's uid %d: refusing its pool", path, peer, os.Geteuid())
	}
	le := binary.LittleEndian
	var req [16]byte
	le.PutUint32(req[:], handoffMagic)
	le.PutUint16(req[4:], handoffVersion)
	le.PutUint64(req[8:], uint64(cfg.PoolSize))
	_ = c.SetDeadline(time.Now().Add(handoffDialTimeout))
	if _, err := c.Write(req[:]); err != nil {
		return nil, fmt.Errorf("handoff request: %w", err)
	}
	var hdr [handoffFrame]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr[:], oob)
	// Whatever else happened, descriptors that arrived are ours to close
	// (a lock file left open would lock this daemon out of its socket).
	fds, ferr := parseRights(oob[:oobn])
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if err != nil || n == 0 {
		closeAll()
		return nil, fmt.Errorf("the old daemon ended the handoff before the transfer (killed?): %v", err)
	}
	t := &transfer{memfd: -1}
	if ferr == nil && flags&unix.MSG_CTRUNC != 0 {
		ferr = errors.New("more descriptors than announced (truncated)")
	}
	if ferr != nil {
		closeAll()
		return nil, fmt.Errorf("handoff transfer: %w", ferr)
	}
	if _, err := io.ReadFull(c, hdr[n:]); err != nil {
		closeAll()
		return nil, fmt.Errorf("handoff transfer: a torn header: %w", err)
	}
	nfd := int(le.Uint16(hdr[6:]))
	if le.Uint32(hdr[:]) != handoffMagic || le.Uint16(hdr[4:]) != handoffVersion || nfd < 2 || nfd != len(fds) {
		closeAll()
		return nil, fmt.Errorf("handoff transfer: magic %#x version %d with %d descriptors announced, %d received", le.Uint32(hdr[:]), le.Uint16(hdr[4:]), nfd, len(fds))
	}
	t.memfd = fds[0]
	lnFile := os.NewFile(uintptr(fds[1]), "kvallocd-listener")
	fl, err := net.FileListener(lnFile)
	lnFile.Close()
	ul, ok := fl.(*net.UnixListener)
	if err != nil || !ok {
		closeAll()
		return nil, fmt.Errorf("handoff transfer: the listening socket: %v", err)
	}
	ul.SetUnlinkOnClose(false)
	t.ln = ul
	if nfd > 2 {
		t.lock = os.NewFile(uintptr(fds[2]), cfg.SocketPath+".lock")
	}
	t.epoch = le.Uint64(hdr[8:])
	size := le.Uint64(hdr[16:])
	if size > maxIndexBytes {
		t.indexErr = fmt.Errorf("%w: %d bytes announced, above the limit %d", errIndex, size, maxIndexBytes)
	} else {
		t.index = make([]byte, size)
		if _, err := io.ReadFull(c, t.index); err != nil {
			t.index, t.indexErr = nil, fmt.Errorf("%w: the old daemon sent part of it (%v)", errIndex, err)
		}
	}
	var ack [8]byte
	le.PutUint32(ack[:], handoffAckMagic)
	_, _ = c.Write(ack[:]) // the old daemon exits either way
	return t, nil
}

// parseRights returns the descriptors of SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// openWarm is New's first step: with cfg.Systemd it takes what systemd
// passed (fdstore.go); when cfg asks for a takeover, it tries one and
// sets what it got (the pool, the allocator and the manager when
// the index is sound; the listening socket whenever it arrived). It says
// how the daemon starts in s.restart. New makes whatever is left unset.
func (s *Server) openWarm(cfg Config) {
	s.restart.started = "cold"
	if cfg.Systemd && s.openSystemd(cfg) {
		return
	}
	if !cfg.Takeover {
		return
	}
	start := time.Now()
	t, err := takeover(cfg)
	if err != nil {
		s.restart.why = err.Error()
		s.log.Warn("starting cold: the takeover failed", "why", err)
		return
	}
	switch {
	case t.ln != nil && s.ln != nil: // systemd's socket is served
		t.ln.Close()
		t.lock.Close()
	case t.ln != nil:
		s.ln = &listener{ln: t.ln, path: cfg.SocketPath, lock: t.lock}
	}
	if err := s.adopt(cfg, t.memfd, t.index, t.indexErr, t.epoch); err != nil {
		s.restart.why = err.Error()
		s.log.Warn("starting cold: the index handed over is refused; serving the socket handed over with a fresh pool", "why", err, "old_epoch", fmt.Sprintf("%#x", t.epoch))
		return
	}
	s.restart.started = "handoff"
	s.log.Info("took over the pool", "objects", s.mgr.Len(), "old_epoch", fmt.Sprintf("%#x", t.epoch), "took", time.Since(start))
}

// listenCold takes the socket (listen). After a takeover that failed, the
// old daemon is exiting (a handoff, once begun, ends it) but may hold the
// socket's lock a moment longer: ErrInUse is retried for up to
// handoffExitWait.
func (s *Server) listenCold(cfg Config) (*listener, error) {
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		ln, err := listen(cfg.SocketPath, cfg.SocketMode)
		if err == nil || !cfg.Takeover || !errors.Is(err, ErrInUse) || time.Since(start) > handoffExitWait {
			return ln, err
		}
	}
}

// handoffExitWait bounds listenCold's wait for an old daemon's exit.
const handoffExitWait = 5 * time.Second

// adopt maps memfd (which it owns from then on: on failure it closes it),
// checks the index against it (and, when epoch is not 0, against the epoch
// of the daemon that sent it) and restores the allocator and the manager
// into s.
func (s *Server) adopt(cfg Config, memfd int, idx []byte, idxErr error, epoch uint64) error {
	if memfd < 0 {
		return errors.New("no memfd was handed over")
	}
	if idxErr != nil {
		unix.Close(memfd)
		return idxErr
	}
	align := cfg.Align
	if align == 0 {
		align = allocator.DefaultAlign
	}
	id, err := memfdIdentity(memfd, align)
	if err != nil {
		unix.Close(memfd)
		return err
	}
	if page := int64(os.Getpagesize()); !cfg.Pool.HugePages && id.bytes != (cfg.PoolSize+page-1)/page*page {
		unix.Close(memfd)
		return fmt.Errorf("%w: the pool handed over has %d bytes, this daemon is configured for %d: stale", errIndex, id.bytes, cfg.PoolSize)
	}
	x, err := decodeIndex(idx, id)
	if err == nil && epoch != 0 && x.epoch != epoch {
		err = fmt.Errorf("%w: it was written by epoch %#x, the daemon handing over is %#x: stale", errIndex, x.epoch, epoch)
	}
	if err != nil {
		unix.Close(memfd)
		return err
	}
	r, err := hostmem.NewSegmentedRegion(cfg.PoolSize, hostmem.SegmentedOptions{
		SegmentSize: cfg.Pool.SegmentSize,
		// The pages are the old daemon's, populated: map them as they are.
		NoReserve: true,
		Memfd:     &hostmem.MemfdOptions{Name: "kvallocd-pool", HugeTLB: cfg.Pool.HugePages, FD: memfd},
	})
	if err != nil {
		unix.Close(memfd)
		return fmt.Errorf("%w: mapping the pool handed over: %w", errIndex, err)
	}
	<-r.Done()
	a, err := allocator.New(r, allocator.Options{Align: cfg.Align})
	if err != nil {
		r.Close()
		return err
	}
	lc := cfg.L1
	lc.QuarantineLapsedWrites = true
	m, err := restoreIndex(a, lc, x)
	if err != nil {
		a.Close()
		return err
	}
	s.pool, s.alloc, s.mgr = r, a, m
	return nil
}
