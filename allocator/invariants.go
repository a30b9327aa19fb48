package allocator

import "github.com/kvalloc/kvalloc/internal/invariants"

// checkLocked verifies the allocator after the call op changed it, and
// panics at that call, naming it, when an invariant fails. Callers guard it
// with invariants.Enabled, so without the invariants build tag it is dead
// code and costs nothing.
func (a *Allocator) checkLocked(op string) {
	if mutation != nil {
		mutation(a, op)
	}
	invariants.Check("allocator."+op, a.verifyLocked())
}

// mutation, when not nil, runs at every check before the verification: the
// invariants tests install mutants here, corruptions the check must catch
// at the call that made them. Nothing else sets it.
var mutation func(a *Allocator, op string)
