//go:build linux

package cluster

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// DefaultTolerance is how far, in block hit rate, a replay through real
// daemons over Redis may be from the in-process model of the same cell:
// Redis's allkeys-lru samples keys (maxmemory-samples 5) where the model
// is exact LRU, a value's header makes Redis hold fewer blocks in the same
// maxmemory, and a put the daemon drops under load is a miss the model
// does not have.
const DefaultTolerance = 0.02

// ErrDisagree wraps a replay whose hit rates are not the model's within
// the tolerance.
var ErrDisagree = errors.New("cluster: the replay disagrees with the model")

// Agree compares two sweeps of one trace and plan cell by cell, the
// isolated nodes and every write policy: it fails, naming every cell,
// when a block hit rate differs by more than tol.
func Agree(model, got *Report, tol float64) error {
	if len(model.Cells) != len(got.Cells) {
		return fmt.Errorf("%w: %d cells against the model's %d", ErrDisagree, len(got.Cells), len(model.Cells))
	}
	var errs []error
	check := func(what string, m, g *Result) {
		if m == nil || g == nil {
			errs = append(errs, fmt.Errorf("%s: a replay is missing", what))
			return
		}
		if d := g.HitRate() - m.HitRate(); d > tol || d < -tol {
			errs = append(errs, fmt.Errorf("%s: hit rate %s, model %s (%s, tolerance %s)", what,
				sim.Percent(g.HitRate(), 2), sim.Percent(m.HitRate(), 2), sim.PercentPoints(d, 2), sim.PercentPoints(tol, 2)))
		}
	}
	for i, mc := range model.Cells {
		gc := got.Cells[i]
		if mc.Nodes != gc.Nodes || mc.L2 != gc.L2 || mc.Routing.Name != gc.Routing.Name || len(mc.Tiered) != len(gc.Tiered) {
			return fmt.Errorf("%w: cell %d is %d nodes, L2 %d, %s; the model's %d nodes, L2 %d, %s", ErrDisagree, i, gc.Nodes, gc.L2, gc.Routing.Name, mc.Nodes, mc.L2, mc.Routing.Name)
		}
		check(mc.Isolated.Config.Name(), mc.Isolated, gc.Isolated)
		for w := range mc.Tiered {
			check(mc.Tiered[w].Config.Name(), mc.Tiered[w], gc.Tiered[w])
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w on %s:\n%w", ErrDisagree, model.Trace.Name, errors.Join(errs...))
	}
	return nil
}

// AgreeResult compares one replay with the model's of the same
// configuration: it fails when their block hit rates differ by more than
// tol.
func AgreeResult(model, got *Result, tol float64) error {
	if d := got.HitRate() - model.HitRate(); d > tol || d < -tol {
		return fmt.Errorf("%w: %s: hit rate %s, model %s (%s, tolerance %s)", ErrDisagree, model.Config.Name(),
			sim.Percent(got.HitRate(), 2), sim.Percent(model.HitRate(), 2), sim.PercentPoints(d, 2), sim.PercentPoints(tol, 2))
	}
	return nil
}

// BandTolerance is how far outside its band a replay through daemons over
// Redis may fall (AgreeBand).
const BandTolerance = 0.005

// AgreeBand checks a replay with L2 through daemons over a real Redis
// Cluster against the model's band: at least lo's block hit rate (the
// model with random eviction in L2, what Redis's allkeys-lru degrades to
// when its one-second clock sees a replay of an hour in seconds) and at
// most hi's (exact LRU), each by tol.
func AgreeBand(lo, hi, got *Result, tol float64) error {
	g := got.HitRate()
	if g < lo.HitRate()-tol || g > hi.HitRate()+tol {
		return fmt.Errorf("%w: %s: hit rate %s outside the model's band [%s random, %s exact LRU] by more than %s", ErrDisagree,
			hi.Config.Name(), sim.Percent(g, 2), sim.Percent(lo.HitRate(), 2), sim.Percent(hi.HitRate(), 2), sim.PercentPoints(tol, 1))
	}
	return nil
}
