package scenario

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// The traffic streams: seeded request generators (math/rand/v2 PCG
// seeded with the scenario's seed and the stream's index) whose arrivals
// are events of the runner's queue.

// histEntry is one store of a stream, kept for later re-reads.
type histEntry struct {
	req    uint32
	chunks uint32
}

// streamState is one stream's generator during a run.
type streamState struct {
	s          *Stream
	group      int
	rng        *rand.Rand
	next       int         // next request number
	hist       []histEntry // ring of the newest Window stores
	head       int         // next write position in hist
	start, end time.Duration
}

// arrival handles one traffic request of stream st.
func (r *runner) arrival(st *streamState) {
	s := st.s
	if len(st.hist) > 0 && s.Reads > 0 && st.rng.Float64() < s.Reads {
		h := st.pick()
		keys := r.groupKeys(st.group, int(h.req), 0, int(h.chunks))
		ok := r.reserveRead(keys, 1)
		if s.Hold == 0 {
			r.finishRead(ok, 1)
		} else if len(ok) > 0 {
			r.q.Push(r.clock.Now()+s.Hold, evFinishRead, payload{keys: ok})
		}
		return
	}
	n := s.MinChunks + st.rng.IntN(s.MaxChunks-s.MinChunks+1)
	req := st.next
	st.next++
	if req >= 1<<reqBits {
		r.err = fmt.Errorf("stream %s: more than 2^32 requests", s.Name)
		return
	}
	keys := r.groupKeys(st.group, req, 0, n)
	ok := r.reserve(keys, s.Layout, false, l1.ModeNew)
	r.finishWrite(ok)
	e := histEntry{req: uint32(req), chunks: uint32(n)}
	if len(st.hist) < s.Window {
		st.hist = append(st.hist, e)
	} else {
		st.hist[st.head] = e
		st.head = (st.head + 1) % s.Window
	}
}

// pick draws an earlier request by recency rank.
func (st *streamState) pick() histEntry {
	n := len(st.hist)
	var rank int
	switch st.s.Reuse.Kind {
	case ReuseUniform:
		rank = st.rng.IntN(n)
	case ReuseZipf:
		if n > 1 {
			rank = int(rand.NewZipf(st.rng, st.s.Reuse.S, 1, uint64(n-1)).Uint64())
		}
	}
	// The newest entry is just before head once the ring is full, else last.
	newest := n - 1
	if n == st.s.Window {
		newest = (st.head - 1 + n) % n
	}
	return st.hist[(newest-rank+n)%n]
}

// nextArrival returns the next arrival after t, before the traffic ends:
// a Poisson process whose rate changes at burst edges.
func (st *streamState) nextArrival(t time.Duration) (time.Duration, bool) {
	for t < st.end {
		rate, until := st.rateAt(t)
		if rate > 0 {
			gap := time.Duration(st.rng.ExpFloat64() / rate * float64(time.Second))
			if gap >= 0 && t+gap < until {
				return t + gap, true
			}
		}
		t = until
	}
	return 0, false
}

// rateAt returns the arrival rate at t and when it next changes (at most
// the end of the traffic).
func (st *streamState) rateAt(t time.Duration) (float64, time.Duration) {
	s, b := st.s, st.s.Burst
	rel := t - st.start
	if b.Every == 0 {
		return s.Rate, st.end
	}
	if rel < b.At {
		return s.Rate, min(st.end, st.start+b.At)
	}
	ph := (rel - b.At) % b.Every
	if ph < b.Len {
		return s.Rate * b.X, min(st.end, t+b.Len-ph)
	}
	return s.Rate, min(st.end, t+b.Every-ph)
}
