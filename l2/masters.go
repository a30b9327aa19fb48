package l2

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sharded is a Backend whose names live on several servers, as a Redis
// Cluster's keys live on its masters. A Tier gives each server a circuit
// breaker and a deadline of its own: a batch is cut into one call per
// server, all at once, so a server that hangs or fails costs the names
// it holds, not the batch, and its breaker opens on its own failures
// whatever the others answer.
type Sharded interface {
	Backend
	// Shards groups the indexes of names by the server that holds each
	// now, in order of first appearance; ids[g] names groups[g]'s
	// server. A backend that cannot tell (no map of its servers yet)
	// returns one group of every name under the id "".
	Shards(ctx context.Context, names []string) (ids []string, groups [][]int)
	// Suspect tells the backend that a call to server id failed with err
	// (not a reply of the server: a connection error or a timeout), or,
	// with err nil, was skipped because id's breaker is open: its map of
	// names to servers may be stale (a failover moved them). It returns
	// at once.
	Suspect(id string, err error)
}

// maxBreakers bounds the breakers a Tier keeps, one per server it has
// called: past it, the breakers idle longest are forgotten (their opens
// stay counted), so a cluster whose addresses churn cannot grow the map.
const maxBreakers = 256

// serverBreaker is one server's breaker and when it was last asked.
type serverBreaker struct {
	br   *Breaker
	used atomic.Int64 // the tier's clock, UnixNano, at the last Allow
}

// breakers are a Tier's breakers by server id.
type breakers struct {
	mu   sync.Mutex
	m    map[string]*serverBreaker
	gone uint64 // opens of the breakers forgotten
}

// breaker returns server id's breaker, made closed on first use; it
// marks it used now.
func (t *Tier) breaker(id string) *Breaker {
	now := t.clock().Now()
	bs := &t.brs
	bs.mu.Lock()
	sb := bs.m[id]
	if sb == nil {
		if len(bs.m) >= maxBreakers {
			bs.forget(len(bs.m) - maxBreakers + 1)
		}
		sb = &serverBreaker{br: NewBreaker(t.opts.BreakerFailures, t.opts.BreakerCooldown, t.opts.Clock)}
		bs.m[id] = sb
	}
	bs.mu.Unlock()
	sb.used.Store(now.UnixNano())
	return sb.br
}

// refusing returns the ids of the servers whose breakers refuse calls
// now (Breaker.Refuses), or nil when none does: a look at each breaker,
// no call.
func (t *Tier) refusing() map[string]bool {
	bs := &t.brs
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var out map[string]bool
	for id, sb := range bs.m {
		if sb.br.Refuses() {
			if out == nil {
				out = map[string]bool{}
			}
			out[id] = true
		}
	}
	return out
}

// forget drops the n breakers idle longest. Under mu.
func (bs *breakers) forget(n int) {
	ids := make([]string, 0, len(bs.m))
	for id := range bs.m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		ua, ub := bs.m[a].used.Load(), bs.m[b].used.Load()
		switch {
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return 0
	})
	for _, id := range ids[:n] {
		bs.gone += bs.m[id].br.Opens()
		delete(bs.m, id)
	}
}

func (t *Tier) clock() Clock {
	if t.opts.Clock != nil {
		return t.opts.Clock
	}
	return wallClock{}
}

// ServerBreaker is one server's breaker as Stats reports it.
type ServerBreaker struct {
	// ID names the server ("" for calls routed to no server: a Backend
	// that is not Sharded, or one without a map yet).
	ID string
	// State is the breaker's state now, Opens how often it opened.
	State BreakerState
	Opens uint64
	// Live is whether the tier asked this breaker within the last two
	// cooldowns and two timeouts: a server that still holds names.
	Live bool
}

// serverBreakers returns every breaker, by id, with the opens of those
// forgotten.
func (t *Tier) serverBreakers() ([]ServerBreaker, uint64) {
	live := t.clock().Now().Add(-2 * (t.opts.BreakerCooldown + t.opts.Timeout)).UnixNano()
	bs := &t.brs
	bs.mu.Lock()
	defer bs.mu.Unlock()
	out := make([]ServerBreaker, 0, len(bs.m))
	for id, sb := range bs.m {
		out = append(out, ServerBreaker{ID: id, State: sb.br.State(), Opens: sb.br.Opens(), Live: sb.used.Load() >= live})
	}
	slices.SortFunc(out, func(a, b ServerBreaker) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, bs.gone
}

// each runs f on names: once for all of them, or, on a Sharded backend,
// once per server's group, all groups at once. Each call goes through
// its server's breaker with a deadline of its own (Options.Timeout, or
// the caller's if sooner); f gets the call's context and the indexes of
// its names, and must touch only their entries of any slice it shares.
// each returns the indexes of the names whose call the breaker skipped.
func (t *Tier) each(ctx context.Context, names []string, f func(ctx context.Context, idx []int) error) (skipped []int) {
	ids, groups := []string{""}, [][]int{seq(len(names))}
	if s, ok := t.b.(Sharded); ok {
		sctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
		ids, groups = s.Shards(sctx, names)
		cancel()
	}
	if len(groups) == 1 {
		if !t.call(ctx, ids[0], groups[0], f) {
			return groups[0]
		}
		return nil
	}
	ran := make([]bool, len(groups))
	var wg sync.WaitGroup
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ran[g] = t.call(ctx, ids[g], groups[g], f)
		}()
	}
	wg.Wait()
	for g, ok := range ran {
		if !ok {
			skipped = append(skipped, groups[g]...)
		}
	}
	return skipped
}

// call runs f on one server's group through its breaker, with the
// timeout; false when the breaker refused it. The verdict: a success
// closes a half-open breaker and ends a run of failures; a call that ran
// out its own whole deadline trips the breaker at once; any other
// failure counts one against it; and a call the caller's own deadline or
// cancellation cut short (a lookup's budget, the daemon's end) says
// nothing about the server and counts neither way.
func (t *Tier) call(ctx context.Context, id string, idx []int, f func(ctx context.Context, idx []int) error) bool {
	br := t.breaker(id)
	if !br.Allow() {
		t.c.skipped.Add(1)
		t.suspect(id, nil)
		return false
	}
	own := true
	if d, ok := ctx.Deadline(); ok && time.Until(d) < t.opts.Timeout {
		own = false // the caller's deadline comes first
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	err := f(cctx, idx)
	// By the clock, not by ctx.Err() alone: a connection's deadline is
	// the context's, and its read can fail at the deadline before the
	// context's own timer has marked it done; that call was cut all the
	// same, not failed by the server.
	expired := cctx.Err() != nil || past(cctx)
	cancel()
	switch {
	case err == nil:
		br.Done(true)
	case ctx.Err() != nil || past(ctx) || (expired && !own):
		t.c.cut.Add(1)
		br.Release()
	case expired:
		t.c.errors.Add(1)
		t.c.timeouts.Add(1)
		br.Trip()
		t.suspect(id, err)
	default:
		t.c.errors.Add(1)
		br.Done(false)
		t.suspect(id, err)
	}
	return true
}

// past reports whether ctx has a deadline that has passed.
func past(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Backend returns the tier's backend.
func (t *Tier) Backend() Backend { return t.b }

func (t *Tier) suspect(id string, err error) {
	if s, ok := t.b.(Sharded); ok {
		s.Suspect(id, err)
	}
}

// pick returns s's entries at idx; s itself when idx is all of it (idx
// is always increasing).
func pick[T any](s []T, idx []int) []T {
	if len(idx) == len(s) {
		return s
	}
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = s[i]
	}
	return out
}

// ReloadEvery is the least time between two reloads of a cluster's slot
// map that Redis.Suspect starts.
const ReloadEvery = 100 * time.Millisecond

// reloads limits Redis.Suspect's reloads to one per ReloadEvery.
type reloads struct {
	mu   sync.Mutex
	last time.Time
	n    atomic.Uint64
}

var _ Sharded = (*Redis)(nil)

// Shards implements Sharded: on a cluster, names grouped by their slot's
// master in go-redis's slot map, each master named by its address; one
// group, "", on a plain Redis or while the slot map cannot be had.
func (r *Redis) Shards(ctx context.Context, names []string) ([]string, [][]int) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return []string{""}, [][]int{seq(len(names))}
	}
	var ids []string
	var groups [][]int
	at := map[string]int{}
	for i, n := range names {
		m, err := cc.MasterForKey(ctx, n)
		if err != nil {
			return []string{""}, [][]int{seq(len(names))}
		}
		id := m.Options().Addr
		g, ok := at[id]
		if !ok {
			g = len(groups)
			at[id] = g
			ids, groups = append(ids, id), append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return ids, groups
}

// Suspect implements Sharded: on a cluster, unless err is a reply of the
// server (it is up, and answered: an OOM, a LOADING), it starts a reload
// of the slot map in the background, at most one per ReloadEvery.
// go-redis reloads its map on a MOVED, and otherwise once a minute
// (ClusterStateReloadInterval): a master that died and whose replica was
// promoted answers no MOVED, so without this the tier would dial the
// dead address, and miss or drop its slots' keys, for up to a minute.
func (r *Redis) Suspect(id string, err error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	var reply redis.Error
	if err != nil && errors.As(err, &reply) {
		return
	}
	now := time.Now()
	r.reload.mu.Lock()
	if now.Sub(r.reload.last) < ReloadEvery {
		r.reload.mu.Unlock()
		return
	}
	r.reload.last = now
	r.reload.mu.Unlock()
	r.reload.n.Add(1)
	cc.ReloadState(context.Background())
}

// Reloads is how many reloads of the slot map Suspect has started.
func (r *Redis) Reloads() uint64 { return r.reload.n.Load() }
