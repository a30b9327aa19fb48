package fuzz

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// variants picks the Variant of each prefix strategy's system; genuine
// returns the zero Variant for all.
type variants func(baseline.Strategy) l1check.Variant

func genuine(baseline.Strategy) l1check.Variant { return l1check.Variant{} }

func FuzzL1Lifecycle(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		setup, ops := decodeL1Ops(data)
		if err := checkL1Lifecycle(setup, ops, genuine); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzReserveWrite(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		setup, ops := decodeL1Ops(data)
		if err := checkReserveWrite(setup, ops, genuine); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzPrefixStrategies(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		setup, ops := decodeL1Ops(data)
		if err := checkPrefixStrategies(setup, ops, genuine); err != nil {
			t.Fatal(err)
		}
	})
}

// checkL1Lifecycle is FuzzL1Lifecycle's body: it runs ops against one
// system configured by setup and its model, comparing after every op.
func checkL1Lifecycle(setup l1check.Setup, ops []l1check.Op, v variants) error {
	// One suite, every eviction policy: only the order of victims differs,
	// and the model knows each policy's.
	for _, p := range l1.EvictionPolicies {
		setup.Eviction = p
		if err := func() error {
			sys, err := l1check.New(setup, v(setup.Prefix))
			if err != nil {
				return err
			}
			defer sys.Close()
			return sys.Run(ops)
		}(); err != nil {
			return fmt.Errorf("policy %v: %w", p, err)
		}
	}
	return nil
}

// checkReserveWrite is FuzzReserveWrite's body. Under each prefix strategy
// it builds the starting state from every op but the last, then sends the
// last op as a ReserveWrite request, reading the state just before it from
// the manager, and checks every ReserveWrite contract on the outcome.
func checkReserveWrite(setup l1check.Setup, ops []l1check.Op, v variants) error {
	if len(ops) == 0 {
		return nil
	}
	req := ops[len(ops)-1]
	req.Kind, req.Observe = l1check.OpReserveWrite, true
	for _, p := range l1.EvictionPolicies {
		setup.Eviction = p
		for _, s := range baseline.Strategies {
			setup.Prefix = s
			if err := func() error {
				sys, err := l1check.New(setup, v(s))
				if err != nil {
					return err
				}
				defer sys.Close()
				for i, op := range ops[:len(ops)-1] {
					if err := sys.Apply(op); err != nil {
						return fmt.Errorf("setup op %d: %w", i, err)
					}
				}
				if err := sys.Apply(req); err != nil {
					return fmt.Errorf("request: %w", err)
				}
				return sys.Drain()
			}(); err != nil {
				return fmt.Errorf("%v: %w", setup, err)
			}
		}
	}
	return nil
}

// checkPrefixStrategies is FuzzPrefixStrategies' body: it runs ops on three
// systems in lockstep, one per prefix strategy. At every ReserveWrite,
// before comparing each system with its model, it checks the strategies
// against each other: the one pass and the binary search give the same
// answer, blocks included; all or nothing grants all of its needing keys or
// none, and, when its state is the one-pass system's, all exactly when the
// one-pass system grants all.
func checkPrefixStrategies(setup l1check.Setup, ops []l1check.Op, v variants) error {
	for _, p := range l1.EvictionPolicies {
		setup.Eviction = p
		if err := checkPrefixStrategiesUnder(setup, ops, v); err != nil {
			return fmt.Errorf("policy %v: %w", p, err)
		}
	}
	return nil
}

// checkPrefixStrategiesUnder is checkPrefixStrategies under one eviction
// policy.
func checkPrefixStrategiesUnder(setup l1check.Setup, ops []l1check.Op, v variants) error {
	systems := make([]*l1check.System, len(baseline.Strategies))
	for i, s := range baseline.Strategies {
		setup.Prefix = s
		sys, err := l1check.New(setup, v(s))
		if err != nil {
			return err
		}
		defer sys.Close()
		systems[i] = sys
	}
	for i, op := range ops {
		if op.Kind != l1check.OpReserveWrite {
			for _, sys := range systems {
				if err := sys.Apply(op); err != nil {
					return fmt.Errorf("%v: op %d: %w", sys.Setup.Prefix, i, err)
				}
			}
			continue
		}
		obs := make([]*l1check.Observation, len(systems))
		for j, sys := range systems {
			obs[j] = sys.ObserveReserve(op.Keys, op.Temporary, op.Size, op.Mode, true)
			sys.Book.Record(op, obs[j].Results, obs[j].Err)
		}
		if err := comparePrefixes(obs[0], obs[1], obs[2]); err != nil {
			return fmt.Errorf("op %d %v: differential: %w", i, op, err)
		}
		for j, sys := range systems {
			if err := sys.CheckReserveWithModel(obs[j]); err != nil {
				return fmt.Errorf("%v: op %d %v: %w", sys.Setup.Prefix, i, op, err)
			}
			if err := sys.AfterApply(op.Observe); err != nil {
				return fmt.Errorf("%v: after op %d %v: %w", sys.Setup.Prefix, i, op, err)
			}
		}
	}
	for _, sys := range systems {
		if err := sys.Drain(); err != nil {
			return fmt.Errorf("%v: %w", sys.Setup.Prefix, err)
		}
	}
	return nil
}

// comparePrefixes is the differential check of one ReserveWrite observed
// under the one pass (a), the binary search (b) and all or nothing (c)
// (baseline.OnePass, BinarySearch, None).
func comparePrefixes(a, b, c *l1check.Observation) error {
	if (a.Err == nil) != (b.Err == nil) || (a.Err == nil) != (c.Err == nil) {
		return fmt.Errorf("errors differ: onepass %v, binarysearch %v, none %v", a.Err, b.Err, c.Err)
	}
	if a.Err != nil {
		return nil
	}
	if len(a.Results) != len(b.Results) {
		return fmt.Errorf("onepass answered %d keys, binarysearch %d", len(a.Results), len(b.Results))
	}
	for i := range a.Results {
		// Generations differ by design: binarysearch's probes consume some.
		if a.Results[i].Status != b.Results[i].Status || allocref.WithoutGen(a.Results[i].Block) != allocref.WithoutGen(b.Results[i].Block) {
			return fmt.Errorf("key #%d: onepass %v %+v, binarysearch %v %+v (granted %d and %d of %d)",
				i, a.Results[i].Status, a.Results[i].Block, b.Results[i].Status, b.Results[i].Block, a.Granted(), b.Granted(), len(a.Need))
		}
	}
	n, k := len(c.Need), c.Granted()
	if k != 0 && k != n {
		return fmt.Errorf("none granted %d of %d needing keys; want all or none", k, n)
	}
	if sameBefore(a, c) && (k == n) != (a.Granted() == len(a.Need)) {
		return fmt.Errorf("on the same state none granted %d of %d, onepass %d of %d", k, n, a.Granted(), len(a.Need))
	}
	return nil
}

// sameBefore reports whether two observations started from the same state.
func sameBefore(a, c *l1check.Observation) bool {
	if !slices.Equal(a.ExtentsBefore, c.ExtentsBefore) || len(a.Before) != len(c.Before) {
		return false
	}
	for k, s := range a.Before {
		if t, ok := c.Before[k]; !ok || allocref.WithoutGen(t.Block) != allocref.WithoutGen(s.Block) || t.WriteLocked != s.WriteLocked || t.ReadLocks != s.ReadLocks ||
			t.Temporary != s.Temporary || t.Finished != s.Finished {
			return false
		}
	}
	return true
}
