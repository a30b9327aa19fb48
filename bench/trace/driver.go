package trace

import (
	"fmt"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// Driver is a cache that a replay drives from outside this package, under
// the same request model, clock and metrics as the l1 replay: the node
// benchmark (bench/node) drives kvallocd's clients through one. Request i
// is the i-th request of the replay. The replay calls Lookup at its
// arrival, Store right after it, and Finish when its prefill is done, with
// the hits Lookup returned; the calls of one replay come from one
// goroutine, in simulated-time order.
type Driver interface {
	// Lookup read-locks the longest readable prefix of r's blocks and
	// returns its length: the hits.
	Lookup(i int, r *Request) (hits int, err error)
	// Store reserves r's blocks from hits on that are missing (and
	// writes them).
	Store(i int, r *Request, hits int) error
	// Finish commits request i's writes, releases its read locks, and
	// returns the blocks that became resident.
	Finish(i int, r *Request, hits int) (stored []int32, err error)
	// Close ends the replay, filling in what it knows of res (the l1
	// counters, sim.Grants), and checks what it can.
	Close(res *Result) error
}

// RunDriver replays tr through d, a result named name, on clock, which
// the replay moves and d's cache may read (as l1.Config.Now). Reservations
// must evict on demand: the replay runs no periodic controller for a
// Driver. A Driver cannot say whether a block is resident without
// changing its recency, so the replay does not ask: Orphans is 0 and
// EvictPrefill counts every miss that is not cold (their sum is the l1
// replay's EvictPrefill + Orphans).
func RunDriver(tr *Trace, name string, d Driver, o Options, clock *sim.Clock) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Trace: tr.Name, Policy: name, Kind: KindL1, Slots: o.Slots, PoolBytes: o.Slots * o.Unit()}
	if err := replay(tr, driverCache{d}, o, false, clock, res); err != nil {
		return nil, fmt.Errorf("trace: %s under %s: %w", tr.Name, name, err)
	}
	return res, nil
}

// driverCache is a Driver as the replay's cache.
type driverCache struct{ d Driver }

func (c driverCache) lookup(f *flight) (err error) {
	f.hits, err = c.d.Lookup(f.idx, f.req)
	if err == nil && (f.hits < 0 || f.hits > len(f.req.Blocks)) {
		err = fmt.Errorf("trace: a driver answered %d hits for a request of %d blocks", f.hits, len(f.req.Blocks))
	}
	return err
}
func (c driverCache) store(f *flight) error { return c.d.Store(f.idx, f.req, f.hits) }
func (c driverCache) finish(f *flight) ([]int32, error) {
	return c.d.Finish(f.idx, f.req, f.hits)
}
func (driverCache) sweep() error        { return nil }
func (driverCache) readable(int32) bool { return false }
func (driverCache) observe(*flight)     {}
func (c driverCache) close(res *Result) error {
	return c.d.Close(res)
}

// Positions returns the chain positions that a store of request r's
// blocks from hits on passes to ReserveWriteChain under policy p, in
// buf[:0]: each block's place in r's chain, the last one's with l1.Partial
// when p passes the partial hint and r's tokens do not fill its blocks
// (blockTokens each). It returns nil when p needs no positions: they
// matter only to l1.EvictPrefix and to the partial hint.
func Positions(buf []uint32, p sim.Policy, blockTokens int64, r *Request, hits int) []uint32 {
	partial := p.Partial && r.Input < int64(len(r.Blocks))*blockTokens
	if p.Eviction != l1.EvictPrefix && !partial {
		return nil
	}
	buf = buf[:0]
	for i := hits; i < len(r.Blocks); i++ {
		buf = append(buf, uint32(i))
	}
	if partial && len(buf) > 0 {
		buf[len(buf)-1] |= l1.Partial
	}
	return buf
}
