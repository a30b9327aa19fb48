//go:build linux

package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Server is one daemon: one pool, one allocator, one l1 manager, one
// socket, and the connections it serves. Its methods are safe for
// concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	epoch uint64
	pool  pool
	alloc *allocator.Allocator
	mgr   *l1.Manager[l1.ObjectKey]
	ln    *listener
	http  *http.Server
	// metricsAddr is where /metrics is served, or "".
	metricsAddr string

	// gate is held shared by every request and every release, and
	// exclusively by Check and by a connection's release, so that they see
	// l1 and every ledger in step.
	gate sync.RWMutex

	mu      sync.Mutex
	conns   map[*conn]struct{}
	perUID  map[uint32]int // open connections by peer uid
	closing bool
	nextID  uint64
	closes  []CloseRecord // the most recent, for tests and the kill harness
	wg      sync.WaitGroup

	// forgetReads is a deliberate bug, set only by the kill harness's
	// bite test (export_test.go): a connection's end forgets its read
	// locks instead of releasing them.
	forgetReads bool
	// countUnpaidL2 is a deliberate bug, set only by the break-even
	// rule's bite test (export_test.go): a lookup counts and prefetches
	// every L2 hit, paying or not.
	countUnpaidL2 atomic.Bool
	// l2PutKeepsRead and l2PublishUnchecked are deliberate bugs of the
	// daemon's own locks, set only by the ownership model's bite tests
	// (export_test.go): a copy to L2 that never releases its read lock,
	// and a prefetch that finishes a key whose value failed to load.
	l2PutKeepsRead, l2PublishUnchecked atomic.Bool
	// l2IgnoreSizes and l2DirtyTail are deliberate bugs, set only by the
	// expected sizes' bite test (export_test.go): lookups and prefix
	// reads that ignore the expected sizes, and L2 loads that leave a
	// block's bytes past the payload as they were.
	l2IgnoreSizes, l2DirtyTail atomic.Bool
	// handlesAnyLease is a deliberate bug, set only by the handle tests'
	// bite (ResolveHandlesAnyLease): a call by handle takes the hold the
	// handle names now, without checking the lease presented.
	handlesAnyLease bool

	accepted, closed, refused               atomic.Uint64
	releasedWrites, releasedReads, relBytes atomic.Uint64
	dbg                                     debugCounts
	overLimit                               atomic.Uint64 // keys answered OVER_LIMIT (quota.go)

	// restart is the handoff socket and how the daemon started (handoff.go).
	restart restartState

	// Limits (limits.go, buffers.go, logger.go).
	logs                                  *logState
	bufs                                  *bufPool
	reserve                               int // the spare descriptor the accept loop frees on EMFILE, or -1; under mu
	overCap, noFDs, helloTimeouts, busies atomic.Uint64
	stopTrim                              chan struct{}

	// The L2 tier (l2*.go).
	l2    *l2tier  // nil without an L2 store (l2.go)
	l2cnt l2counts // the lookups' figures (l2metrics.go)
}

// CloseRecord says when a connection ended and what its release freed.
type CloseRecord struct {
	ID   uint64
	Peer Peer
	// Ended is when the daemon saw the connection end (EOF, error,
	// shutdown); Released when it had aborted the connection's writes and
	// released its read locks.
	Ended, Released time.Time
	// Writes and ReadLocks are what was aborted and released; Bytes what
	// that freed.
	Writes, ReadLocks, Bytes int64
	// Why is the reason the connection ended.
	Why string
}

// socketBuffer is the send and receive buffer asked for each connection;
// the kernel caps it at net.core.wmem_max and rmem_max.
const socketBuffer = 4 << 20

// maxCloses is how many CloseRecords the server keeps.
const maxCloses = 4096

// New makes the pool (the memfd, sealed, mapped MAP_SHARED, populated in
// the background when cfg.Pool.Populate is set, and then waited for until
// its first segment is ready), the allocator and the manager over it, takes
// the socket (see listen), and starts the metrics listener when asked. The
// rest of the pool joins the allocator as it becomes ready. It serves
// nothing until Serve.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkBug(); err != nil {
		return nil, err
	}
	var eb [8]byte
	for binary.LittleEndian.Uint64(eb[:]) == 0 {
		if _, err := rand.Read(eb[:]); err != nil {
			return nil, err
		}
	}
	lh := newLogHandler(cfg.Logger.Handler(), time.Now)
	s := &Server{cfg: cfg, log: slog.New(lh), logs: lh.st, epoch: binary.LittleEndian.Uint64(eb[:]),
		conns: map[*conn]struct{}{}, perUID: map[uint32]int{}, bufs: newBufPool(cfg.BufferBudget), reserve: -1,
		stopTrim: make(chan struct{})}
	// A takeover (handoff.go) sets the pool, the allocator and the
	// manager when it can, the socket when it arrived.
	s.openWarm(cfg)
	if s.mgr == nil {
		if err := s.openCold(cfg); err != nil {
			if s.ln != nil {
				s.ln.close()
			}
			return nil, err
		}
	}
	if s.ln == nil {
		if s.ln, err = s.listenCold(cfg); err != nil {
			s.mgr.Close()
			s.alloc.Close()
			return nil, err
		}
	}
	if err := s.listenHandoff(); err != nil {
		// Serving matters more than a successor's convenience.
		s.log.Warn("no handoff socket: a successor cannot take this pool over (-takeover)", "err", err)
	}
	if cfg.MetricsAddr != "" {
		if err := s.serveMetrics(cfg.MetricsAddr); err != nil {
			s.ln.close()
			s.mgr.Close()
			s.alloc.Close()
			return nil, err
		}
	}
	if err := s.startL2(); err != nil {
		s.Close()
		return nil, err
	}
	if bug != bugNone {
		s.log.Warn("this daemon carries a deliberate bug (built with the kvalloc_daemon_bugs tag)", "bug", bug)
	}
	s.takeReserve()
	go s.trimLoop()
	s.log.Info("kvallocd ready", "socket", cfg.SocketPath, "pool_bytes", cfg.PoolSize, "align", s.alloc.Align(),
		"epoch", fmt.Sprintf("%#x", s.epoch), "allow_uids", cfg.AllowUIDs, "allow_gids", cfg.AllowGIDs,
		"metrics", s.metricsAddr, "max_conns", cfg.MaxConns, "max_conns_per_uid", cfg.MaxConnsPerUID,
		"hello_timeout", cfg.HelloTimeout, "buffer_budget", cfg.BufferBudget)
	return s, nil
}

// openCold makes a fresh pool, its allocator and an empty manager.
func (s *Server) openCold(cfg Config) error {
	p, err := newPool(cfg.PoolSize, cfg.Pool)
	if err != nil {
		return err
	}
	s.pool = p
	s.alloc, err = allocator.New(p, allocator.Options{Align: cfg.Align})
	if err != nil {
		p.Close()
		return err
	}
	// A lapsed write's owner may still be filling its block: keep the
	// block from every other writer until the owner finishes, aborts or
	// disconnects.
	lc := cfg.L1
	lc.QuarantineLapsedWrites = true
	s.mgr, err = l1.New[l1.ObjectKey](s.alloc, lc)
	if err != nil {
		s.alloc.Close()
		return err
	}
	return nil
}

// Serve accepts connections until Close, serving each on its own
// goroutine. It returns nil after Close, or the accept error that stopped
// it. A connection past a cap (Config.MaxConns, MaxConnsPerUID), or
// accepted with the spare descriptor when the daemon is out of them, is
// answered TOO_MANY_CONNECTIONS and closed here, without a goroutine.
func (s *Server) Serve() error {
	s.notifyReady()  // systemd (fdstore.go)
	pending := false // out of descriptors, a connection was seen waiting
	for {
		c, err := s.ln.ln.AcceptUnix()
		if err == nil || !outOfFDs(err) {
			pending = false
		}
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return s.serveEnd()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if outOfFDs(err) {
				if pending {
					pending = false
					if !s.refuseWithReserve() {
						s.log.Error("accept: out of file descriptors, and no spare one to refuse with", "err", err)
						time.Sleep(10 * time.Millisecond)
					}
				} else {
					s.waitPending()
					pending = true
				}
				continue
			}
			s.log.Error("accept", "err", err)
			time.Sleep(10 * time.Millisecond) // do not spin
			continue
		}
		// A 5700-key frame is 400 KB: with buffers that hold it the
		// write is one copy and the reader one wake-up.
		_ = c.SetWriteBuffer(socketBuffer)
		_ = c.SetReadBuffer(socketBuffer)
		peer, perr := peerOf(c)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return s.serveEnd()
		}
		if msg := s.overCapLocked(peer, perr); msg != "" {
			s.mu.Unlock()
			s.overCap.Add(1)
			s.log.Warn("refused connection", "pid", peer.PID, "uid", peer.UID, "why", msg)
			s.refuseConn(c, msg)
			continue
		}
		s.nextID++
		cn := newConn(s, c, s.nextID, peer, perr)
		s.conns[cn] = struct{}{}
		if perr == nil {
			s.perUID[peer.UID]++
		}
		s.wg.Add(1)
		s.mu.Unlock()
		s.accepted.Add(1)
		go cn.serve()
	}
}

// Close shuts the daemon down: it stops accepting, ends every connection
// (each aborts its writes and releases its read locks, as on any end),
// closes the manager, the allocator and the pool, and removes the socket.
// It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.notifyStopping() // systemd (fdstore.go)
	s.closeHandoff()
	s.bufs.shut()
	err := s.ln.close()
	if s.http != nil {
		s.http.Close()
	}
	s.wg.Wait()
	s.stopL2()
	s.storeIndex() // systemd's fd store (fdstore.go)
	close(s.stopTrim)
	s.dropReserve()
	s.mgr.Close()
	if e := s.alloc.Close(); err == nil {
		err = e
	}
	s.log.Info("kvallocd stopped", "socket", s.cfg.SocketPath, "connections", s.accepted.Load())
	return bugClose(err)
}

// trimLoop trims the frame-buffer pool every second until Close.
func (s *Server) trimLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stopTrim:
			return
		case now := <-t.C:
			if s.bufs.trim(now) {
				debug.FreeOSMemory()
			}
		}
	}
}

// Epoch is the pool's epoch: random, nonzero, new at each New.
func (s *Server) Epoch() uint64 { return s.epoch }

// Manager is the daemon's manager, for tests and checks that look at it in
// process; calls made on it bypass every connection's ledger. The keys of
// the events its listeners get from a connection's lookups (every keyed
// request but reserve_write) alias that connection's frame buffer, which
// the next request overwrites: a listener that keeps such a key past its
// call must copy its ChunkHash (strings.Clone).
func (s *Server) Manager() *l1.Manager[l1.ObjectKey] { return s.mgr }

// Allocator is the daemon's allocator.
func (s *Server) Allocator() *allocator.Allocator { return s.alloc }

// SocketPath is where the daemon listens.
func (s *Server) SocketPath() string { return s.cfg.SocketPath }

// Pool returns the pool's memory (the daemon's own mapping) and its
// progress.
func (s *Server) Pool() ([]byte, hostmem.SegmentProgress) { return s.pool.Bytes(), s.pool.Progress() }

// ConnInfo is one open connection: its peer and what it holds.
type ConnInfo struct {
	ID                uint64
	Peer              Peer
	Opened            time.Time
	Writes, ReadLocks int64 // write reservations and read locks held
}

// Connections returns the open connections.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnInfo, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, ConnInfo{ID: c.id, Peer: c.peer, Opened: c.opened, Writes: c.own.nwrites.Load(), ReadLocks: c.own.reads.total.Load()})
	}
	return out
}

// ConnectionBufferBytes is what the open connections keep between
// requests in buffers and scratch (their ledgers aside), in bytes: at
// most some 2·16 KiB and the scratch of a 16 KiB frame's keys each,
// whatever frames they sent before.
func (s *Server) ConnectionBufferBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for c := range s.conns {
		n += c.retained.Load()
	}
	return n
}

// Closes returns the records of the connections that ended, oldest first
// (the last 4096).
func (s *Server) Closes() []CloseRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CloseRecord(nil), s.closes...)
}

// Stats returns the figures of the stats answer.
func (s *Server) Stats() wire.Stats {
	st := s.mgr.Stats()
	as := s.alloc.Stats()
	pr := s.pool.Progress()
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	return wire.Stats{
		Objects: uint64(st.Objects), WriteLocked: uint64(st.WriteLocked), TemporaryReadLocked: uint64(st.TemporaryReadLocked),
		HeldBytes: uint64(st.Held), UsedBytes: uint64(as.Used), CapacityBytes: uint64(as.Capacity),
		QuarantinedBytes: uint64(st.QuarantinedBytes),
		PoolBytes:        uint64(len(s.pool.Bytes())), ReadyBytes: uint64(pr.ReadyBytes),
		ConnsOpen: uint64(open), ConnsAccepted: s.accepted.Load(), ConnsClosed: s.closed.Load(), ConnsRefused: s.refused.Load(),
		ReleasedWrites: s.releasedWrites.Load(), ReleasedReadLocks: s.releasedReads.Load(), ReleasedBytes: s.relBytes.Load(),
		WriteReservations: st.WriteReservations, PartialGrants: st.PartialGrants, FailedReservations: st.FailedReservations,
		OOMKeys: st.OOMKeys, Evictions: st.Evictions, OnDemandEvictions: st.OnDemandEvictions, Expired: st.Expired,
		FreeErrors: st.FreeErrors, Quarantines: st.Quarantines, Lookups: st.Lookups,
	}
}

// ended records a connection's end, after its release.
func (s *Server) ended(c *conn, r CloseRecord) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.peerErr == nil {
		if s.perUID[c.peer.UID]--; s.perUID[c.peer.UID] <= 0 {
			delete(s.perUID, c.peer.UID)
		}
	}
	if len(s.closes) == maxCloses {
		s.closes = append(s.closes[:0], s.closes[1:]...)
	}
	s.closes = append(s.closes, r)
	s.mu.Unlock()
	s.closed.Add(1)
	s.wg.Done()
}
