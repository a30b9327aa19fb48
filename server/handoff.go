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
	"github.com/kvalloc/kvalloc/l1"
)

// The direct handoff: a new kvallocd takes the pool of the one serving.
//
// Every daemon listens, beside its socket, on HandoffPath(socket) (mode
// 0600). A new daemon started with Config.Takeover connects there, checks
// that the peer runs under its own uid (SO_PEERCRED), and asks. The old
// one, after checking the same of the new one (and that it has not hung up
// meanwhile), drains: it stops accepting, ends every connection (a request
// being carried out is finished and answered; a frame not yet read is
// dropped unanswered, so a client that got no answer knows its call did
// nothing), pauses its L2 tier (no prefetch or copy to L2 touches the
// pool from then on: pauseL2), closes its metrics listener, holds every
// block under a live lease (write reservations, read locks, both
// quarantines: their processes may still copy into or out of them;
// l1.Manager.HoldLeases)
// and exports its finished objects and those held blocks; and it sends,
// in one message, the memfd, its listening socket and its socket's lock
// file (SCM_RIGHTS), then the index (index.go).
//
// The new daemon restores the index (or, when it doubts it, makes a
// fresh pool), binds its metrics listener, and says it is ready. Only
// then does the old daemon commit: it answers go, waits for the new
// daemon's "up" (sent once it has told systemd it is the unit's main
// process, and before it serves anything), and its Serve returns: it
// exits 0 without removing the socket, which the new daemon serves from
// then on. A client connecting meanwhile waits in the listening socket's
// backlog and is served by whichever daemon serves next; a connected one
// sees its connection end, connects again, and gets that daemon's epoch.
//
// The frames, little-endian:
//
//	request  (new → old)  u32 "KVHO", u16 version 2, u16 0, u64 pool bytes
//	transfer (old → new)  u32 "KVHO", u16 version 2, u16 descriptors (3),
//	                      u64 old epoch, u64 index bytes; SCM_RIGHTS: the
//	                      memfd, the listening socket, the lock file;
//	                      then the index
//	ready    (new → old)  u32 "KVOK", u32 0
//	verdict  (old → new)  u32 "KVGO" (commit) or "KVNO" (the old daemon
//	                      serves on), u32 0
//	up       (new → old)  u32 "KVUP", u32 0
//
// Until it commits, the old daemon owns the pool and the socket, and the
// new one changes nothing in the pool: a handoff that fails before the
// commit leaves the old daemon serving. It serves on (its connections
// ended, their blocks held until their leases lapse; its L2 tier
// unpaused) when the new daemon
// hangs up or dies before its ready (the connection ends), or says
// nothing within handoffReadyTimeout (it answers KVNO: the new daemon,
// if alive, then exits nonzero and changes nothing), or dies between the
// go and its up. The new daemon serves when it got go, or when the old
// daemon died after the transfer without a verdict (the connection ended
// without KVNO: nothing changed the pool since the transfer). If the old
// daemon dies before the transfer (SIGKILL), the new one starts cold: a
// fresh pool on a socket of its own (the dead daemon's lock went with
// it); if it lives on but does not answer within handoffDialTimeout (it
// is stopped, SIGSTOP), the new one gives up, finds the socket in use and
// exits 1, and the old one, resumed, finds its successor gone and serves
// on. If the transfer arrives but the index is refused, the new one
// serves the listening socket it received with a fresh pool, and logs
// why; it never serves an index it doubts. An old daemon's Serve returns,
// and kvallocd exits 0, only after a successor said it serves.

const (
	handoffMagic      = 0x4f48564b // "KVHO"
	handoffAckMagic   = 0x4b4f564b // "KVOK": ready
	handoffGoMagic    = 0x4f47564b // "KVGO": commit
	handoffNoMagic    = 0x4f4e564b // "KVNO": the old daemon serves on
	handoffUpMagic    = 0x5055564b // "KVUP"
	handoffVersion    = 2
	handoffFrame      = 24
	handoffAckTimeout = 10 * time.Second
	// handoffReadyTimeout bounds the old daemon's wait, after the
	// transfer, for the new one's ready: its restore of the index (Verify
	// included) and its metrics listener.
	handoffReadyTimeout = 60 * time.Second
	// handoffDialTimeout bounds the new daemon's wait for the transfer:
	// the old one's drain (a request in progress finishes, an answer is
	// written within WriteTimeout) and its export.
	defaultHandoffDialTimeout = 60 * time.Second
	// maxIndexBytes bounds an index announced by the old daemon.
	maxIndexBytes = 4 << 30
)

// HandoffPath is where the daemon serving socket listens for its
// successor: socket + ".handoff", in the same directory.
func HandoffPath(socket string) string { return socket + ".handoff" }

// restartState is the daemon's side of restarts: its handoff socket, the
// handoff in progress, and how it started.
type restartState struct {
	ln      *net.UnixListener
	path    string
	ino     uint64 // the handoff socket's inode, to remove only our own
	mu      sync.Mutex
	running bool
	done    chan struct{} // closed when a handoff committed (the daemon must exit)
	resumed chan struct{} // closed when a handoff failed and the daemon serves on; then replaced
	// ho is a successor's connection to the old daemon from the transfer
	// to its up (confirmTakeover, finishTakeover); nil otherwise.
	ho *net.UnixConn
	// lnHandedOver: the listening socket came from the old daemon.
	lnHandedOver bool
	notify       *notifier // systemd's notification socket; nil without
	activated    bool      // the socket came from systemd
	// Started says how this daemon started ("cold", "handoff", "fdstore"
	// and Why why cold, for logs and tests.
	started, why string
}

// Start says how the daemon started: "handoff" (it took a pool over from
// the daemon before it), "fdstore" (from systemd's fd store), or "cold"; and,
// when cold after a takeover was asked for, why.
func (s *Server) Start() (how, why string) { return s.restart.started, s.restart.why }

// HandedOff is closed once a successor has taken the pool over (it said
// it serves): the daemon then serves nothing and must exit without
// Close's cleanup (Close is a no-op then). Serve returns once it is
// closed. A handoff that fails leaves it open: the daemon serves on.
func (s *Server) HandedOff() <-chan struct{} { return s.restart.doneChan() }

func (r *restartState) doneChan() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.doneLocked()
}

func (r *restartState) doneLocked() chan struct{} {
	if r.done == nil {
		r.done = make(chan struct{})
	}
	return r.done
}

func (r *restartState) resumedLocked() chan struct{} {
	if r.resumed == nil {
		r.resumed = make(chan struct{})
	}
	return r.resumed
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
		return fmt.Errorf("handoff request: magic %#x version %d (this daemon speaks version %d)", le.Uint32(req[:]), le.Uint16(req[4:]), handoffVersion)
	}
	if hungUp(c) && !handoffCommitExitBite {
		// A successor that gave up while this daemon did not answer
		// (it was stopped): nothing to drain for.
		return fmt.Errorf("handoff: %v asked and hung up before it was answered", peer)
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
	idx, err := s.drainAndExport()
	if err != nil {
		s.resume(err)
		return err
	}
	if err := s.transferTo(c, idx); err != nil {
		s.resume(err)
		return err
	}
	// Ready: the successor restored the index (or made a fresh pool) and
	// bound its metrics listener.
	_ = c.SetDeadline(time.Now().Add(handoffReadyTimeout))
	var ack [8]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil || le.Uint32(ack[:]) != handoffAckMagic {
		if err == nil {
			err = fmt.Errorf("magic %#x", le.Uint32(ack[:]))
		}
		var no [8]byte
		le.PutUint32(no[:], handoffNoMagic)
		_ = c.SetDeadline(time.Now().Add(handoffAckTimeout))
		_, _ = c.Write(no[:]) // a successor still there must not serve
		err = fmt.Errorf("handoff: the successor did not say it is ready (%w); serving on", err)
		s.resume(err)
		return err
	}
	// Commit. From the go on the successor may serve; this daemon serves
	// again only if the successor dies before its up (it then changed
	// nothing).
	var commit [8]byte
	le.PutUint32(commit[:], handoffGoMagic)
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write(commit[:]); err != nil {
		err = fmt.Errorf("handoff: the successor is gone before the go (%w); serving on", err)
		s.resume(err)
		return err
	}
	if _, err := io.ReadFull(c, ack[:]); err != nil || le.Uint32(ack[:]) != handoffUpMagic {
		if err == nil {
			err = fmt.Errorf("magic %#x", le.Uint32(ack[:]))
		}
		err = fmt.Errorf("handoff: the successor ended before it served (%w); serving on", err)
		s.resume(err)
		return err
	}
	s.log.Info("handoff: done", "index_bytes", len(idx), "took", time.Since(start))
	r.mu.Lock()
	close(r.doneLocked())
	r.mu.Unlock()
	return nil
}

// handoffCommitExitBite is a deliberate bug, set only by the failed
// handoff tests' bites (export_test.go): a handoff once begun ends the
// old daemon, with status 0, whether or not the successor took the pool,
// as every handoff did before the successor's ready and up.
var handoffCommitExitBite bool

// hungUp reports whether c's peer has closed its end, with nothing left
// to read.
func hungUp(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = n == 0 && err == nil
	})
	return gone
}

// transferTo sends the descriptors and the index idx on c. The listening
// socket goes by its own descriptor (SyscallConn), not a File's: a File's
// Fd would make the socket blocking, which a daemon that serves on after
// a failed handoff could then not close.
func (s *Server) transferTo(c *net.UnixConn, idx []byte) error {
	raw, err := s.ln.ln.SyscallConn()
	if err != nil {
		return fmt.Errorf("handoff: the listening socket: %w", err)
	}
	le := binary.LittleEndian
	var hdr [handoffFrame]byte
	var werr error
	cerr := raw.Control(func(lnfd uintptr) {
		fds := []int{s.pool.FD(), int(lnfd)}
		if s.ln.lock != nil {
			fds = append(fds, int(s.ln.lock.Fd()))
		}
		le.PutUint32(hdr[:], handoffMagic)
		le.PutUint16(hdr[4:], handoffVersion)
		le.PutUint16(hdr[6:], uint16(len(fds)))
		le.PutUint64(hdr[8:], s.epoch)
		le.PutUint64(hdr[16:], uint64(len(idx)))
		_ = c.SetDeadline(time.Now().Add(handoffReadyTimeout))
		_, _, werr = c.WriteMsgUnix(hdr[:], unix.UnixRights(fds...), nil)
	})
	if cerr != nil {
		return fmt.Errorf("handoff: the listening socket: %w", cerr)
	}
	if werr != nil {
		return fmt.Errorf("handoff: sending the descriptors: %w", werr)
	}
	if _, err := c.Write(idx); err != nil {
		return fmt.Errorf("handoff: sending the index: %w", err)
	}
	return nil
}

// drainAndExport stops the daemon serving: no accept, every connection
// ended (their leases held, not released), the L2 tier paused (pauseL2),
// no metrics; and returns the index of what is left.
func (s *Server) drainAndExport() ([]byte, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, errors.New("handoff: the daemon is already shutting down")
	}
	s.closing = true
	s.holdLeases.Store(true)
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.bufs.shut()                       // a request waiting for frame buffers ends now
	_ = s.ln.ln.SetDeadline(time.Now()) // Serve's accept returns; it sees closing
	// Before the connections' last requests are waited for: a prefix
	// read waiting for a prefetch sees it cut, not its whole wait.
	s.pauseL2()
	s.wg.Wait()
	if s.http != nil {
		s.http.Close()
	}
	return s.restartIndex()
}

// pauseL2 pauses the L2 tier for a handoff's export (l2tier.pause): the
// index is taken once no prefetch writes into a block and no copy to L2
// reads one, so that it holds no block this daemon still writes or reads
// and no lock of its own. Otherwise a load would go on writing into a
// block the index holds only until its lease lapses, and a copy would
// read, under a read lock the successor does not know, a block the
// successor may have given another object: its bytes stored in L2 under
// the old key, with a valid MAC.
func (s *Server) pauseL2() {
	t := s.l2
	if t == nil {
		return
	}
	if l2PauseSkipBite {
		s.log.Warn("handoff: the L2 tier is not paused (a deliberate bug)")
		return
	}
	start := time.Now()
	running, wait := t.pause()
	w := s.L2Work()
	s.log.Info("handoff: pausing the L2 tier: no prefetch or copy starts; those running are cut", "running", running,
		"keys_loading", w.Loading, "copy_read_locks", w.Reads, "queued", w.Queued)
	wait()
	s.log.Info("handoff: the L2 tier is paused: no prefetch or copy touches the pool", "queued", s.L2Work().Queued,
		"took", time.Since(start))
}

// restartIndex holds every block under a live lease (l1's HoldLeases,
// bounded by Config.RestartHold for a lease with no expiry) and returns
// the index of the finished objects and of the held blocks. The
// connections are ended: nothing else changes the manager meanwhile.
func (s *Server) restartIndex() ([]byte, error) {
	var held []l1.HeldBlock
	if !restartReleaseBite {
		n, err := s.mgr.HoldLeases(s.cfg.RestartHold)
		if err != nil {
			return nil, fmt.Errorf("restart: holding the leased blocks: %w", err)
		}
		if held, err = s.mgr.Held(); err != nil {
			return nil, fmt.Errorf("restart: the held blocks: %w", err)
		}
		s.noteRestartReads()
		if len(held) > 0 {
			s.log.Info("restart: blocks under live leases are held until their leases lapse", "locked_objects_dropped", n,
				"held_blocks", len(held), "held_bytes", s.mgr.Stats().QuarantinedBytes, "no_expiry_hold", s.cfg.RestartHold)
		}
	}
	objs, err := s.mgr.Export()
	if err != nil {
		return nil, fmt.Errorf("restart: export: %w", err)
	}
	if handoffDropBite {
		objs = objs[:len(objs)-len(objs)/100]
	}
	id, err := memfdIdentity(s.pool.FD(), s.alloc.Align())
	if err != nil {
		return nil, err
	}
	now := monotonicNow()
	lapses := make([]int64, len(objs))
	for i := range objs {
		lapses[i] = lapseOf(now, objs[i].ReadLeft)
	}
	return encodeIndex(nil, id, s.mgr.Config().Eviction, s.epoch, objs, lapses, heldOf(held)), nil
}

// restartRead is a read lock a restart carried over: its key, and its
// holds.
type restartRead struct {
	key l1.ObjectKey
	n   int64
}

// noteRestartReads records the manager's read locks as a restart's
// (Check), forgetting those that lapsed.
func (s *Server) noteRestartReads() {
	m := map[l1.Lease]restartRead{}
	for _, e := range s.mgr.Snapshot() {
		if e.ReadLocks > 0 {
			m[e.ReadLease] = restartRead{key: e.Key, n: int64(e.ReadLocks)}
		}
	}
	s.mu.Lock()
	s.restartReads = m
	s.mu.Unlock()
}

// restartReleaseBite is a deliberate bug, set only by the restart tests'
// bites (export_test.go): a restart releases its connections' leases, as
// any end of a connection does, and holds nothing: the successor gives
// the blocks of live writers and readers to the next writer.
var restartReleaseBite bool

// resume makes the daemon serve on after a handoff that failed before
// its commit (why): it accepts again, its L2 tier loads and copies again,
// and it serves metrics again; the blocks of the connections it ended
// stay held until their leases lapse.
func (s *Server) resume(why error) {
	if handoffCommitExitBite {
		s.log.Warn("handoff failed: exiting all the same (a deliberate bug)", "why", why)
		os.Exit(0)
	}
	s.log.Warn("handoff failed: this daemon serves on", "why", why)
	s.holdLeases.Store(false)
	if l2ResumeSkipBite {
		s.log.Warn("handoff failed: the L2 tier stays paused (a deliberate bug)")
	} else if s.l2.unpause() {
		s.log.Info("handoff failed: the L2 tier loads and copies again", "queued", s.L2Work().Queued)
	}
	s.bufs.reopen()
	_ = s.ln.ln.SetDeadline(time.Time{})
	if s.cfg.MetricsAddr != "" {
		if err := s.serveMetrics(s.cfg.MetricsAddr); err != nil {
			s.log.Warn("handoff failed: /metrics is not served again", "err", err)
		}
	}
	r := &s.restart
	s.mu.Lock()
	s.closing = false
	s.mu.Unlock()
	r.mu.Lock()
	r.running = false
	close(r.resumedLocked())
	r.resumed = nil
	r.mu.Unlock()
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

// serveEnd is Serve's answer to seeing the daemon closing: stop (true)
// after Close, or once a handoff committed; serve on (false) after a
// handoff that failed.
func (s *Server) serveEnd() bool {
	r := &s.restart
	r.mu.Lock()
	running := r.running
	done, resumed := r.doneLocked(), r.resumedLocked()
	r.mu.Unlock()
	if running {
		select {
		case <-done:
			return true
		case <-resumed:
			return false
		}
	}
	select {
	case <-done:
		return true
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing // false: a handoff failed and the daemon resumed
}

// transfer is what a successor received.
type transfer struct {
	memfd    int // -1: none
	ln       *net.UnixListener
	lock     *os.File
	epoch    uint64
	index    []byte
	indexErr error // why the index did not arrive whole
	conn     *net.UnixConn
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
	kept := false
	defer func() {
		if !kept {
			c.Close()
		}
	}()
	peer, err := peerOf(c)
	if err != nil {
		return nil, err
	}
	if peer.UID != uint32(os.Geteuid()) && !takeoverAnyUIDBite {
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
	dieAt("asked")
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
	dieAt("transfer")
	// The ready, the verdict and the up follow (confirmTakeover,
	// finishTakeover).
	t.conn, kept = c, true
	return t, nil
}

// handoffDialTimeout is defaultHandoffDialTimeout but in tests of a
// stopped old daemon (export_test.go).
var handoffDialTimeout = defaultHandoffDialTimeout

// takeoverDieAt names the point of a takeover at which the successor
// SIGKILLs itself, for the tests of a handoff whose successor dies
// (export_test.go): "asked", "transfer", "ready" or "go"; "" for none.
var takeoverDieAt string

// dieAt kills the process at the point takeoverDieAt names.
func dieAt(point string) {
	if takeoverDieAt == point {
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		select {}
	}
}

// takeoverAnyUIDBite is a deliberate bug, set only by the uid test's bite
// (export_test.go): a successor takes over from a process of any uid.
var takeoverAnyUIDBite bool

// confirmTakeover, at the end of a successor's New, tells the old daemon
// it can serve and waits for its verdict: nil when it may serve (the old
// daemon committed, or died after the transfer without a verdict: nothing
// changed the pool since), an error when the old daemon serves on. It
// then applies Config.SocketMode to a socket handed over. Without a
// handoff in progress it does nothing.
func (s *Server) confirmTakeover() error {
	r := &s.restart
	c := r.ho
	if c == nil {
		return nil
	}
	le := binary.LittleEndian
	var b [8]byte
	le.PutUint32(b[:], handoffAckMagic)
	// No deadline: the old daemon answers within handoffReadyTimeout, or
	// dies, or is stopped (and then nothing serves either way); a
	// successor that gave up here could not know the old daemon had not
	// committed meanwhile.
	_ = c.SetDeadline(time.Time{})
	_, werr := c.Write(b[:])
	dieAt("ready")
	_, err := io.ReadFull(c, b[:])
	switch {
	case err == nil && le.Uint32(b[:]) == handoffGoMagic:
		dieAt("go")
	case err == nil && le.Uint32(b[:]) == handoffNoMagic:
		s.abandonTakeover()
		return errors.New("kvallocd: the takeover failed: the daemon handing over gave up waiting for this one and serves on")
	case err == nil:
		s.abandonTakeover()
		return fmt.Errorf("kvallocd: the takeover failed: the daemon handing over answered %#x", le.Uint32(b[:]))
	default:
		s.log.Warn("the daemon handing over ended without a verdict after the transfer (killed?): serving", "ready", werr, "verdict", err)
		c.Close()
		r.ho = nil
	}
	s.applySocketMode()
	return nil
}

// finishTakeover, at the start of a successor's Serve (after systemd
// was told of its MAINPID), tells the old daemon it serves: the old one
// exits then.
func (s *Server) finishTakeover() {
	r := &s.restart
	if r.ho == nil {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], handoffUpMagic)
	_ = r.ho.SetDeadline(time.Now().Add(handoffAckTimeout))
	_, _ = r.ho.Write(b[:]) // an old daemon already gone left nothing to tell
	r.ho.Close()
	r.ho = nil
}

// abandonTakeover: the successor will not serve (New fails before the
// old daemon committed): it hangs up, and leaves the socket file and its
// lock to the old daemon, which serves on.
func (s *Server) abandonTakeover() {
	r := &s.restart
	if r.ho == nil {
		return
	}
	r.ho.Close()
	r.ho = nil
	if r.lnHandedOver && s.ln != nil {
		s.ln.path = "" // not ours to remove
	}
}

// applySocketMode gives a socket handed over this daemon's
// Config.SocketMode (the old daemon's is the file's until then); a socket
// systemd passed keeps its unit's SocketMode.
func (s *Server) applySocketMode() {
	if !s.restart.lnHandedOver || s.restart.activated {
		return
	}
	fi, err := os.Lstat(s.cfg.SocketPath)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		s.log.Warn("the socket handed over is not at its path: its mode is not set", "socket", s.cfg.SocketPath, "err", err)
		return
	}
	if fi.Mode().Perm() == s.cfg.SocketMode {
		return
	}
	if err := os.Chmod(s.cfg.SocketPath, s.cfg.SocketMode); err != nil {
		s.log.Warn("the socket handed over keeps its mode", "socket", s.cfg.SocketPath, "mode", fi.Mode().Perm(), "err", err)
		return
	}
	s.log.Info("the socket handed over takes this daemon's mode", "socket", s.cfg.SocketPath, "was", fi.Mode().Perm(), "mode", s.cfg.SocketMode)
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
		s.restart.lnHandedOver = true
	}
	s.restart.ho = t.conn
	if err := s.adopt(cfg, t.memfd, t.index, t.indexErr, t.epoch); err != nil {
		s.restart.why = err.Error()
		s.log.Warn("starting cold: the index handed over is refused; serving the socket handed over with a fresh pool", "why", err, "old_epoch", fmt.Sprintf("%#x", t.epoch))
		return
	}
	s.restart.started = "handoff"
	s.log.Info("took over the pool", "objects", s.mgr.Len(), "old_epoch", fmt.Sprintf("%#x", t.epoch), "took", time.Since(start))
}

// listenCold takes the socket (listen). After a takeover that failed
// before the transfer, the old daemon may be dying (killed mid-handoff)
// and hold the socket's lock a moment longer: ErrInUse is retried for up
// to handoffExitWait. An old daemon that lives on serves on and keeps its
// lock: the new one then fails (kvallocd exits 1).
func (s *Server) listenCold(cfg Config) (*listener, error) {
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		ln, err := listen(cfg.SocketPath, cfg.SocketMode)
		if err == nil || !cfg.Takeover || !errors.Is(err, ErrInUse) || time.Since(start) > handoffExitWait {
			return ln, err
		}
	}
}

// maxHold is the longest a held block's lease may have left in an index
// this daemon restores: its longest lease, a minute more.
func maxHold(cfg Config) time.Duration {
	w, r := cfg.L1.WriteTTL, cfg.L1.ReadTTL
	if w == 0 {
		w = l1.DefaultWriteTTL
	}
	if r == 0 {
		r = l1.DefaultReadTTL
	}
	h := max(w, r, cfg.RestartHold)
	if h > l1.NoExpiry-time.Minute {
		return l1.NoExpiry
	}
	return h + time.Minute
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
	m, err := restoreIndex(a, lc, x, maxHold(cfg))
	if err != nil {
		a.Close()
		return err
	}
	s.pool, s.alloc, s.mgr = r, a, m
	s.noteRestartReads()
	return nil
}
