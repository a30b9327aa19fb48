// Package invariants says whether this build checks a package's invariants
// after every mutation, as Pebble's invariants package does. Build with
// -tags invariants (make test runs the race suite once more so) and
// Enabled is true: the allocator verifies itself after every call that
// changes it, and an l1.Manager after every call, and each panics at that
// call, naming it, when the state is wrong.
// Without the tag Enabled is a false constant, so every check guarded by
// it is dead code the compiler removes, and release builds pay nothing.
//
// A package adds its checks in the same shape:
//
//	if invariants.Enabled {
//		invariants.Check("Free", a.verifyLocked())
//	}
package invariants

import "errors"

// Check panics when err is not nil, with a message that names op, the call
// that left the state wrong. Call it only under Enabled.
func Check(op string, err error) {
	if err != nil {
		panic(&Violation{Op: op, Err: err})
	}
}

// Violation is the value Check panics with.
type Violation struct {
	Op  string // the call after which the invariant failed
	Err error  // the failed invariant
}

// Error says which call broke which invariant.
func (v *Violation) Error() string {
	return "invariants: after " + v.Op + ": " + v.Err.Error()
}

// Unwrap returns the failed invariant.
func (v *Violation) Unwrap() error { return v.Err }

// Catch runs f and returns the *Violation it panics with, or nil when f
// returns; any other panic goes on. It is for tests that show a check
// catching a corruption at the call that made it.
func Catch(f func()) (v *Violation) {
	defer func() {
		if p := recover(); p != nil {
			err, _ := p.(error)
			if !errors.As(err, &v) {
				panic(p)
			}
		}
	}()
	f()
	return nil
}
