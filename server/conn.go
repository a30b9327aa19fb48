//go:build linux

package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// conn is one client connection, served by one goroutine from accept to
// release: it reads a frame, carries it out, writes the answer, and when
// the connection ends for any reason it aborts the connection's writes and
// releases its read locks before it closes the socket.
type conn struct {
	s       *Server
	c       *net.UnixConn
	id      uint64
	peer    Peer
	peerErr error
	own     *ledger
	opened  time.Time
	hello   bool
	// version is the protocol version the hello chose: wire.Version or
	// wire.Version2 (handles.go).
	version uint32
	stop    atomic.Bool

	dec wire.Decoder
	enc wire.Encoder
	// in and out are the connection's own buffers (connBuf); bigIn and
	// bigOut are lent by the daemon's bufPool for one request whose frame
	// or answer does not fit them, and given back once it is answered
	// (buffers.go).
	in, out       []byte
	bigIn, bigOut []byte
	// retained is what the connection keeps between requests, its buffers
	// and scratch, in bytes, for the metrics.
	retained atomic.Int64
	req      wire.Request
	ans      wire.Answer
	// dispatch's scratch (dispatch.go)
	l1res []l1.Result
	passK []l1.ObjectKey
	passL []l1.Lease
	passI []int
	// a call by handle's scratch (handles.go): its keys as resolved, the
	// handles that named nothing, and the handles of a grant's results
	hkeys []l1.ObjectKey
	hbad  []bool
	hout  []uint32
}

// newConn makes the connection's state; peer and peerErr are its
// credentials, read before the connection is registered, so that the
// metrics read them without a race.
func newConn(s *Server, c *net.UnixConn, id uint64, peer Peer, peerErr error) *conn {
	cn := &conn{s: s, c: c, id: id, peer: peer, peerErr: peerErr, own: newLedger(), opened: time.Now(), in: make([]byte, 0, connBuf)}
	// A lookup's keys alias the frame, which is not read over until the
	// request is done: l1 keeps no key of a lookup, the ledger copies what
	// it keeps.
	cn.dec.Borrow = true
	cn.retained.Store(cn.keeps())
	return cn
}

// shutdown makes the connection's goroutine end: its next or current read
// returns EOF. An answer being written is finished.
func (c *conn) shutdown() {
	c.stop.Store(true)
	_ = c.c.CloseRead()
}

// serve is the connection's goroutine.
func (c *conn) serve() {
	why := c.run()
	c.end(why, time.Now())
}

// run serves frames until the connection ends and returns why it ended.
func (c *conn) run() string {
	if c.peerErr != nil {
		return "peer credentials: " + c.peerErr.Error()
	}
	p := c.peer
	if !c.s.cfg.allowed(p) {
		msg := c.s.cfg.refusal(p)
		c.s.refused.Add(1)
		c.s.log.Warn("refused peer", "conn", c.id, "pid", p.PID, "uid", p.UID, "gid", p.GID, "why", msg)
		c.writeAnswer(&wire.Answer{Type: wire.TypeHello.Answer(), Code: wire.CodeNotAllowed, Message: msg, Epoch: c.s.epoch})
		return "refused: " + msg
	}
	c.s.log.Debug("connected", "conn", c.id, "pid", p.PID, "uid", p.UID, "gid", p.GID)
	defer c.giveBack()
	for {
		frame, why := c.readFrame()
		if why != "" {
			return why
		}
		closes, why := c.handle(frame)
		c.giveBack()
		if closes {
			return why
		}
	}
}

// readFrame reads one frame. After the hello it waits for the first byte
// without a deadline (a connection may be idle for ever); before, until
// HelloTimeout after accept. Then it gives the rest of the frame
// FrameTimeout (and before the hello no more than HelloTimeout). A frame
// or an answer too large for the connection's own buffers borrows from
// the daemon's pool, waiting up to FrameTimeout; one that gets nothing is
// read and dropped, answered BUSY, and the next frame read. On a failure
// it answers what can be answered and returns why the connection ends.
func (c *conn) readFrame() ([]byte, string) {
	for {
		buf := c.in[:wire.HeaderSize]
		helloBy := c.opened.Add(c.s.cfg.HelloTimeout)
		trim := false
		switch {
		case !c.hello:
			_ = c.c.SetReadDeadline(helloBy)
		case c.retained.Load() > idleKeep:
			// Scratch grown by a large request goes once the connection
			// has been idle for trimAfter; a steady stream of large
			// requests keeps and reuses it.
			_ = c.c.SetReadDeadline(time.Now().Add(trimAfter))
			trim = true
		default:
			_ = c.c.SetReadDeadline(time.Time{})
		}
		n, err := c.c.Read(buf)
		if trim && n == 0 && !c.stop.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			c.trim()
			continue
		}
		if err != nil || c.stop.Load() {
			if !c.hello && !c.stop.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, c.helloLate(wire.Header{Type: wire.TypeHello})
			}
			return nil, endReason(err, c.stop.Load())
		}
		deadline := time.Now().Add(c.s.cfg.FrameTimeout)
		if !c.hello && helloBy.Before(deadline) {
			deadline = helloBy
		}
		_ = c.c.SetReadDeadline(deadline)
		frame := buf
		var h wire.Header // known once the whole header is in
		if _, err = io.ReadFull(c.c, buf[n:]); err == nil {
			h, err = wire.ParseHeader(buf)
		}
		if err == nil {
			if we := c.overFrame(h.Size); we != nil { // Config.MaxFrame (quota.go)
				err = we
			}
		}
		if err == nil {
			var busy bool
			if buf, busy, err = c.borrow(h, buf); busy {
				if why := c.dropBusy(h); why != "" {
					return nil, why
				}
				continue
			}
		}
		if err == nil {
			frame, err = wire.ReadBody(c.c, buf)
		}
		var we *wire.Error
		switch {
		case err == nil:
			return frame, ""
		case errors.As(err, &we):
			c.refuse(h, we)
			return nil, "bad frame: " + we.Error()
		case errors.Is(err, os.ErrDeadlineExceeded) && !c.hello && !time.Now().Before(helloBy):
			return nil, c.helloLate(h)
		case errors.Is(err, os.ErrDeadlineExceeded):
			msg := fmt.Sprintf("a frame was begun and not finished within %v", c.s.cfg.FrameTimeout)
			c.refuse(h, &wire.Error{Code: wire.CodeTimeout, Msg: msg})
			return nil, "timeout: " + msg
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, "truncated frame: the peer closed mid-frame"
		}
		return nil, endReason(err, c.stop.Load())
	}
}

// helloLate answers a connection that did not say hello within
// HelloTimeout, and returns why it ends.
func (c *conn) helloLate(h wire.Header) string {
	c.s.helloTimeouts.Add(1)
	msg := fmt.Sprintf("no hello within %v of connecting", c.s.cfg.HelloTimeout)
	c.refuse(h, &wire.Error{Code: wire.CodeTimeout, Msg: msg})
	return "hello timeout: " + msg
}

// borrow gets the frame's buffers from the daemon's pool when the frame,
// or its answer, may not fit the connection's own, and returns the buffer
// to read the frame into, its header copied. busy reports that the pool
// had nothing for it within FrameTimeout. Before the hello nothing is
// lent: such a frame is not a hello, and is refused NO_HELLO.
func (c *conn) borrow(h wire.Header, buf []byte) ([]byte, bool, error) {
	size := int(h.Size)
	in, out := 0, 0
	if size > cap(c.in) {
		in = size
	}
	if b := answerBound(h.Type, size); h.Type.Keyed() && b > connBuf {
		out = b
	}
	if in == 0 && out == 0 {
		return buf, false, nil
	}
	if !c.hello {
		return buf, false, &wire.Error{Code: wire.CodeNoHello, Msg: fmt.Sprintf("the first request of a connection must be its one hello, not a %d-byte %v", size, h.Type)}
	}
	bin, bout, ok := c.s.bufs.get(in, out, time.Now().Add(c.s.cfg.FrameTimeout))
	if !ok && c.stop.Load() {
		return buf, false, &wire.Error{Code: wire.CodeClosed, Msg: "the daemon is shutting down"}
	}
	if !ok {
		return buf, true, nil
	}
	c.bigIn, c.bigOut = bin, bout
	if bin != nil {
		buf = bin[:copy(bin, buf[:wire.HeaderSize])]
	}
	// The body's time starts once it can be read.
	_ = c.c.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	return buf, false, nil
}

// dropBusy reads and drops the body of a frame the pool had no buffers
// for, and answers BUSY; it returns why the connection ends, or "".
func (c *conn) dropBusy(h wire.Header) string {
	_ = c.c.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	if _, err := io.CopyN(io.Discard, c.c, int64(h.Size)-wire.HeaderSize); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			msg := fmt.Sprintf("a frame was begun and not finished within %v", c.s.cfg.FrameTimeout)
			c.refuse(h, &wire.Error{Code: wire.CodeTimeout, Msg: msg})
			return "timeout: " + msg
		}
		return "truncated frame: the peer closed mid-frame"
	}
	c.s.busies.Add(1)
	msg := fmt.Sprintf("no frame buffers for a %d-byte %v within %v: the %d bytes all connections share (flag -buffer-budget) stayed in use; nothing was done, send the request again",
		h.Size, h.Type, c.s.cfg.FrameTimeout, c.s.cfg.BufferBudget)
	c.refuse(h, &wire.Error{Code: wire.CodeBusy, Msg: msg})
	return ""
}

// idleKeep is what a connection may keep between requests without being
// trimmed: its own buffers and some 300 keys' scratch. trimAfter is how
// long a connection that keeps more must be idle before trim.
const (
	idleKeep  = 64 << 10
	trimAfter = time.Second
)

// giveBack returns what the request borrowed, after it is answered. The
// request's borrowed keys alias the lent frame: they are cleared, so that
// the frame, back in the pool or dropped by it, is not kept alive by them.
func (c *conn) giveBack() {
	if c.bigIn != nil || c.bigOut != nil {
		c.s.bufs.put(c.bigIn, c.bigOut)
		c.bigIn, c.bigOut = nil, nil
		clear(c.req.Keys[:cap(c.req.Keys)])
		clear(c.passK[:cap(c.passK)])
		clear(c.hkeys[:cap(c.hkeys)])
	}
	if cap(c.out) > connBuf {
		c.out = nil
	}
	c.retained.Store(c.keeps())
}

// trim drops the scratch a large request made grow (the decoder's keys and
// interned strings, the request's and the answer's slices, the l1 call's),
// so that an idle connection keeps only its own buffers, whatever it sent
// before.
func (c *conn) trim() {
	c.dec = wire.Decoder{Borrow: true, Version: c.dec.Version}
	c.req = wire.Request{}
	c.ans = wire.Answer{}
	c.l1res, c.passK, c.passL, c.passI = nil, nil, nil, nil
	c.hkeys, c.hbad, c.hout = nil, nil, nil
	if cap(c.out) > connBuf {
		c.out = nil
	}
	c.retained.Store(c.keeps())
}

// keeps is what the connection holds in buffers and scratch, in bytes
// (its ledger aside).
func (c *conn) keeps() int64 {
	n := cap(c.in) + cap(c.out) + cap(c.bigIn) + cap(c.bigOut) +
		cap(c.req.Keys)*int(unsafe.Sizeof(l1.ObjectKey{})) + cap(c.req.Leases)*8 + cap(c.req.Temporary) + cap(c.req.Positions)*4 +
		cap(c.ans.Results)*int(unsafe.Sizeof(wire.Result{})) + cap(c.ans.Statuses) +
		cap(c.l1res)*int(unsafe.Sizeof(l1.Result{})) + cap(c.passK)*int(unsafe.Sizeof(l1.ObjectKey{})) + cap(c.passL)*8 + cap(c.passI)*8 +
		cap(c.req.Handles)*4 + cap(c.hkeys)*int(unsafe.Sizeof(l1.ObjectKey{})) + cap(c.hbad) + cap(c.hout)*4
	return int64(n)
}

// endReason names the end of a connection at a frame boundary.
func endReason(err error, stopping bool) string {
	switch {
	case stopping:
		return "daemon shutting down"
	case errors.Is(err, io.EOF):
		return "closed by the peer"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset by the peer"
	}
	return "read: " + err.Error()
}

// refuse answers a frame that cannot be served, with the request's answer
// type when the header named a request, else the error answer.
func (c *conn) refuse(h wire.Header, e *wire.Error) {
	t := wire.TypeError
	if h.Type&wire.AnswerBit == 0 && h.Type.Known() {
		t = h.Type.Answer()
	}
	c.s.log.Warn("refused frame", "conn", c.id, "pid", c.peer.PID, "code", e.Code.String(), "msg", e.Msg)
	c.writeAnswer(&wire.Answer{Type: t, ID: h.ID, Code: e.Code, Message: e.Msg, Epoch: c.s.epoch})
}

// writeAnswer encodes and writes an answer within WriteTimeout; a failure
// is left to the next read to find.
func (c *conn) writeAnswer(a *wire.Answer) bool {
	dst := c.out
	if c.bigOut != nil {
		dst = c.bigOut
	}
	out, err := c.enc.AppendAnswer(dst[:0], a)
	if err != nil {
		out, _ = c.enc.AppendAnswer(dst[:0], &wire.Answer{Type: a.Type, ID: a.ID, Epoch: a.Epoch, Code: wire.CodeInternal, Message: err.Error()})
	}
	if c.bigOut == nil {
		c.out = out // a lent buffer stays as lent (giveBack returns it)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.c.Write(out); err != nil {
		c.s.log.Debug("write", "conn", c.id, "err", err)
		return false
	}
	return true
}

// writeHello writes the hello answer with the memfd attached to its first
// byte (SCM_RIGHTS).
func (c *conn) writeHello(a *wire.Answer) bool {
	out, _ := c.enc.AppendAnswer(c.out[:0], a)
	c.out = out
	_ = c.c.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	n, _, err := c.c.WriteMsgUnix(out, unix.UnixRights(c.s.pool.FD()), nil)
	if err == nil && n < len(out) {
		_, err = c.c.Write(out[n:])
	}
	return err == nil
}

// handle decodes and carries out one frame. It reports whether the
// connection must close, and why.
func (c *conn) handle(frame []byte) (bool, string) {
	q := &c.req
	if err := c.dec.DecodeRequest(frame, q); err != nil {
		we := wire.AsError(err)
		h, _ := wire.ParseHeader(frame)
		c.refuse(h, we)
		return true, "bad frame: " + we.Error()
	}
	a := &c.ans
	*a = wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: c.s.epoch, Results: a.Results[:0], Statuses: a.Statuses[:0]}
	switch {
	case q.Type == wire.TypeHello && !c.hello:
		c.hello = true
		// The decoder accepted version 1 or 2: the connection speaks it
		// from now on, and a version 2 connection's holds get handles.
		c.version = q.Version
		a.Hello = wire.Hello{Version: q.Version, MaxKeys: wire.MaxKeys, MaxFrame: uint32(c.s.cfg.MaxFrame),
			PoolSize: int64(len(c.s.pool.Bytes())), Align: c.s.alloc.Align()}
		if q.Version >= wire.Version2 {
			a.Hello.Versions = wire.Versions
			c.dec.Version = q.Version
			c.own.useHandles(c.s.handlesAnyLease)
		}
		if !c.writeHello(a) {
			return true, "hello answer not delivered"
		}
		return false, ""
	case q.Type == wire.TypeHello || !c.hello:
		msg := "the first request of a connection must be its one hello"
		c.refuse(wire.Header{Type: q.Type, ID: q.ID}, &wire.Error{Code: wire.CodeNoHello, Msg: msg})
		return true, "no hello: " + msg
	case q.Epoch != c.s.epoch:
		a.Code = wire.CodeWrongEpoch
		a.Message = fmt.Sprintf("epoch %#x is not this daemon's %#x: leases and blocks from an earlier daemon are void; connect again", q.Epoch, c.s.epoch)
	case q.Type == wire.TypeLookup:
		// Outside the gate: it takes the gate around its l1 calls only,
		// never across L2's network calls (l2read.go).
		c.s.lookup(q, a)
	case q.Type == wire.TypeReserveReadPrefixWait && !c.s.l2wait(q, a):
		// The wait was refused (INVALID_ARGUMENT, in a): nothing changed.
	default:
		// With DebugVerify a reserve_write holds every other request off,
		// so that its OUT_OF_MEMORY keys are judged against the state it
		// left (debug.go).
		excl := c.s.cfg.DebugVerify && q.Type == wire.TypeReserveWrite
		if excl {
			c.s.gate.Lock()
		} else {
			c.s.gate.RLock()
		}
		var err error
		if c.stop.Load() {
			err = &wire.Error{Code: wire.CodeClosed, Msg: "the daemon is shutting down"}
		} else if err = bugRequest(q); err == nil && !bugServe(q, a) {
			if q.ByHandles() {
				c.resolveHandles(q) // handles.go: q.Keys, as the handles name them
			}
			if err = c.dispatchLimited(q, a); err == nil {
				bugAnswer(q, a)
			}
		}
		c.own.publish()
		if excl {
			if err == nil {
				c.s.noteOOM(q, a)
			}
			c.s.gate.Unlock()
		} else {
			c.s.gate.RUnlock()
		}
		if err != nil {
			a.Results, a.Statuses, a.Prefix = a.Results[:0], a.Statuses[:0], 0
			a.Code, a.Message = codeOf(err), err.Error()
			if we, ok := err.(*wire.Error); ok {
				a.Message = we.Msg
			}
		}
	}
	if !c.writeAnswer(a) {
		return true, "answer not delivered"
	}
	if a.Code.Closes() {
		return true, a.Code.String() + ": " + a.Message
	}
	return false, ""
}

// codeOf maps an l1 error to the answer's code.
func codeOf(err error) wire.Code {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return we.Code
	case errors.Is(err, l1.ErrInvalidArgument):
		return wire.CodeInvalidArgument
	case errors.Is(err, l1.ErrClosed):
		return wire.CodeClosed
	}
	return wire.CodeInternal
}

// end releases what the connection holds, then closes it and records the
// close. The release runs under the gate held exclusively, so that the
// bytes it frees are measured exactly and Check never sees half of it.
func (c *conn) end(why string, ended time.Time) {
	s := c.s
	if bugUnnoticed() {
		c.c.Close()
		return
	}
	s.gate.Lock()
	before := s.mgr.Stats().Held
	var writes, reads int64
	if !s.holdLeases.Load() || restartReleaseBite {
		writes, reads = c.release()
	} else {
		// A restart: the peer may still copy into or out of its blocks;
		// HoldLeases keeps them from every other writer (handoff.go).
		c.own.clear()
	}
	freed := before - s.mgr.Stats().Held
	s.bugEnd()
	s.gate.Unlock()
	released := time.Now()
	// Counted before the close, so that a peer that has seen the socket
	// close finds the release in the daemon's stats.
	s.releasedWrites.Add(uint64(writes))
	s.releasedReads.Add(uint64(reads))
	s.relBytes.Add(uint64(max(freed, 0)))
	c.c.Close()
	r := CloseRecord{ID: c.id, Peer: c.peer, Ended: ended, Released: released, Writes: writes, ReadLocks: reads, Bytes: max(freed, 0), Why: why}
	lvl := s.log.Debug
	if writes > 0 || reads > 0 {
		lvl = s.log.Info
	}
	lvl("connection ended", "conn", c.id, "pid", c.peer.PID, "uid", c.peer.UID, "why", why,
		"aborted_writes", writes, "released_read_locks", reads, "freed_bytes", r.Bytes, "release", released.Sub(ended))
	s.ended(c, r)
}

// release aborts the connection's write reservations and releases its read
// locks, and returns how many l1 honoured (a lock that lapsed meanwhile is
// someone else's now, or nobody's, and l1 leaves it alone).
func (c *conn) release() (writes, reads int64) {
	m := c.s.mgr
	l := c.own
	// Writes in lease order (the order they were granted), then reads in
	// one FinishRead per lock count (at most MaxReadLocks each: larger
	// holds are split), counts ascending, each in lease order, so that the
	// recency a release leaves is determined (the model does the same).
	if ws := l.writes.all(); len(ws) > 0 {
		keys, leases := c.passK[:0], c.passL[:0]
		for _, h := range ws {
			keys, leases = append(keys, h.key), append(leases, h.lease)
		}
		sts, err := m.AbortWrite(keys, leases)
		if err != nil {
			c.s.log.Error("aborting a closed connection's writes", "conn", c.id, "err", err)
		}
		for _, st := range sts {
			if st == l1.OK {
				writes++
			}
		}
		c.passK, c.passL = keys[:0], leases[:0]
	}
	if rs := l.reads.all(); len(rs) > 0 && !c.s.forgetReads && bug != bugForgetReads {
		byCount := map[int][]leaseHold{}
		for _, h := range rs {
			for left := h.n; left > 0; {
				n := int(min(left, l1.MaxReadLocks))
				byCount[n] = append(byCount[n], h)
				left -= int64(n)
			}
		}
		counts := make([]int, 0, len(byCount))
		for n := range byCount {
			counts = append(counts, n)
		}
		slices.Sort(counts)
		for _, n := range counts {
			keys, leases := c.passK[:0], c.passL[:0]
			for _, h := range byCount[n] { // in lease order, as all returns them
				keys, leases = append(keys, h.key), append(leases, h.lease)
			}
			sts, err := m.FinishRead(keys, leases, n)
			if err != nil {
				c.s.log.Error("releasing a closed connection's read locks", "conn", c.id, "err", err)
			}
			for _, st := range sts {
				if st == l1.OK {
					reads += int64(n)
				}
			}
			c.passK, c.passL = keys[:0], leases[:0]
		}
	}
	l.clear()
	return writes, reads
}
