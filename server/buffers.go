//go:build linux

package server

import (
	"math/bits"
	"sync"
	"time"

	"github.com/kvalloc/kvalloc/wire"
)

// Frame buffers. Each connection owns two small buffers, of connBuf bytes
// each, for its requests and its answers; they are all an idle connection
// keeps. A frame larger than connBuf, or a keyed request whose answer may
// be larger (40 bytes a key for results), borrows its buffers from the
// daemon's bufPool for the time of that one request and gives them back
// once its answer is written. The pool's bytes, lent and kept for reuse,
// never exceed Config.BufferBudget: a frame whose buffers do not fit
// waits for others to give theirs back, up to the frame timeout, and is
// then read into the small buffer, dropped and answered BUSY.

// connBuf is the size of a connection's own buffers: a request of some
// 300 keys with 32-byte hashes.
const connBuf = 16 << 10

// minClass is the smallest buffer the pool lends.
const minClass = 32 << 10

// maxLoan is the most one request borrows: a MaxFrame frame and the
// largest answer (results for MaxKeys keys), each rounded up to its class.
// Config.BufferBudget must be at least this, so that every legal frame can
// be served.
var maxLoan = class(wire.MaxFrame) + class(answerBound(wire.TypeReserveRead, wire.MaxFrame))

// class rounds n up to the pool's size class, a power of two.
func class(n int) int {
	if n <= minClass {
		return minClass
	}
	return 1 << bits.Len(uint(n-1))
}

// answerBound is the largest answer a request of type t in a frame of
// size bytes can have: every key takes at least its 16-byte header, or
// 12 bytes (a handle and a lease) in a call by handle (protocol version
// 2), and answers with 40 bytes (a result) or 1 (a status); any answer may
// be an error with a message instead.
func answerBound(t wire.Type, size int) int {
	const errAnswer = wire.HeaderSize + 2 + wire.MaxMessageLen
	if !t.Keyed() {
		return errAnswer
	}
	perKey := 16
	if t.ByHandle() {
		perKey = 12
	}
	keys := min(wire.MaxKeys, max(size-wire.HeaderSize-16-8, 0)/perKey)
	per := 1
	if t.HasResults() {
		per = 40
	}
	return max(errAnswer, wire.HeaderSize+8+per*keys)
}

// bufPool lends large frame buffers within a byte budget and keeps those
// given back, by class, for the next request, within the same budget.
type bufPool struct {
	budget int64

	mu      sync.Mutex
	used    int64 // bytes lent and kept
	kept    int64 // of them, kept for reuse
	free    map[int][][]byte
	wake    chan struct{} // closed when bytes are given back and someone waits
	waiters int
	closed  chan struct{} // closed by shut: every wait ends; replaced by reopen
	isShut  bool
	peak    int64
	busy    uint64 // requests that found no budget within their wait
	waited  uint64 // requests that had to wait

	lastGet time.Time // the last loan
	dropped int64     // bytes dropped since memory was last given back
}

// keepIdle is how long kept buffers outlive the last loan; trimBytes how
// many bytes must have been dropped before a quiet pool has the runtime
// give freed memory back to the system (trim).
const (
	keepIdle  = 2 * time.Second
	trimBytes = 32 << 20
)

func newBufPool(budget int64) *bufPool {
	return &bufPool{budget: budget, free: map[int][][]byte{}, wake: make(chan struct{}), closed: make(chan struct{})}
}

// shut ends every wait for budget, and every later one, at once: the
// daemon is shutting down.
func (p *bufPool) shut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isShut {
		p.isShut = true
		close(p.closed)
	}
}

// reopen undoes shut, for a daemon that serves on after a handoff that
// failed (handoff.go).
func (p *bufPool) reopen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isShut {
		p.isShut = false
		p.closed = make(chan struct{})
	}
}

// get lends a buffer of at least in bytes and one of at least out bytes
// (0: none), both or neither, waiting until deadline for budget (or until
// shut).
func (p *bufPool) get(in, out int, deadline time.Time) (bin, bout []byte, ok bool) {
	ci, co := 0, 0
	if in > 0 {
		ci = class(in)
	}
	if out > 0 {
		co = class(out)
	}
	need := int64(ci + co)
	p.mu.Lock()
	p.lastGet = time.Now()
	waited := false
	for {
		// What is kept for reuse counts in used: take the classes wanted
		// from it, and drop kept buffers of other classes to make room.
		if ci > 0 {
			bin = p.take(ci)
		}
		if co > 0 {
			bout = p.take(co)
		}
		fresh := need - int64(cap(bin)) - int64(cap(bout))
		for p.used+fresh > p.budget && p.kept > 0 {
			p.dropOne()
		}
		if p.used+fresh <= p.budget {
			p.used += fresh
			p.peak = max(p.peak, p.used)
			p.mu.Unlock()
			if ci > 0 && bin == nil {
				bin = make([]byte, ci)
			}
			if co > 0 && bout == nil {
				bout = make([]byte, co)
			}
			return bin, bout, true
		}
		// Not enough: give back what was taken, and wait.
		p.restore(bin)
		p.restore(bout)
		bin, bout = nil, nil
		if !waited {
			waited = true
			p.waited++
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			p.busy++
			p.mu.Unlock()
			return nil, nil, false
		}
		wake, closed := p.wake, p.closed
		p.waiters++
		p.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-wake:
		case <-t.C:
		case <-closed:
			deadline = time.Time{}
		}
		t.Stop()
		p.mu.Lock()
		p.waiters--
	}
}

// put gives back buffers lent by get (nil ones are skipped): each is kept
// for reuse while the kept bytes stay within a quarter of the budget, and
// dropped otherwise.
func (p *bufPool) put(bs ...[]byte) {
	p.mu.Lock()
	for _, b := range bs {
		if b == nil {
			continue
		}
		c := cap(b)
		if p.kept+int64(c) > p.budget/4 {
			p.used -= int64(c)
			p.dropped += int64(c)
			continue
		}
		p.kept += int64(c)
		p.free[c] = append(p.free[c], b[:c])
	}
	if p.waiters > 0 {
		close(p.wake)
		p.wake = make(chan struct{})
	}
	p.mu.Unlock()
}

// The pool's books: used = lent + kept. take moves a kept buffer to lent,
// restore moves it back, dropOne drops a kept one. All with p.mu held.

// take returns a kept buffer of class c, or nil.
func (p *bufPool) take(c int) []byte {
	l := p.free[c]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	p.free[c] = l[:len(l)-1]
	p.kept -= int64(c)
	return b
}

// restore undoes take.
func (p *bufPool) restore(b []byte) {
	if b != nil {
		p.kept += int64(cap(b))
		p.free[cap(b)] = append(p.free[cap(b)], b)
	}
}

// dropOne drops one kept buffer, the largest.
func (p *bufPool) dropOne() {
	best := 0
	for c, l := range p.free {
		if len(l) > 0 && c > best {
			best = c
		}
	}
	if best > 0 {
		p.take(best)
		p.used -= int64(best)
		p.dropped += int64(best)
	}
}

// trim runs every second (Server.trimLoop): once nothing was lent for
// keepIdle it drops the kept buffers, and once trimBytes were dropped and
// nothing was lent for a second it reports that the runtime should give
// the freed memory back (debug.FreeOSMemory), so that after a burst of
// large frames an idle daemon returns to its idle size instead of
// keeping the burst's peak until the runtime's next forced collection.
func (p *bufPool) trim(now time.Time) (giveBack bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	quiet := now.Sub(p.lastGet)
	if quiet >= keepIdle {
		for p.kept > 0 {
			p.dropOne()
		}
	}
	if p.dropped >= trimBytes && quiet >= time.Second {
		p.dropped = 0
		return true
	}
	return false
}

// bufStats are the pool's figures.
type bufStats struct {
	used, kept, peak, budget int64
	busy, waited             uint64
}

func (p *bufPool) stats() bufStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bufStats{used: p.used, kept: p.kept, peak: p.peak, budget: p.budget, busy: p.busy, waited: p.waited}
}
