package l1

import (
	"runtime"
	"strings"
	"unicode"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// Self-checks under the invariants build tag (internal/invariants).
//
// Every call that takes the manager lock ends in unlock, which, under the
// tag, runs checkInvariantsLocked: verifyLocked (verify.go) over the whole
// state, and on a violation a panic that names the exported method the
// caller called, so a corruption is caught at the call that made it, not
// by a test's Verify many calls later. Without the tag invariants.Enabled
// is a false constant and unlock's guarded call is dead code: release
// builds pay nothing.

// checkInvariantsLocked verifies the manager at the end of a call, under
// the lock, and panics when an invariant fails. Before it panics it drops
// the call's undelivered events and releases the lock, so that the
// panic, not a deadlock, is what a test sees, even one that closes the
// manager in its cleanup. Call it only under invariants.Enabled.
func (m *Manager[K]) checkInvariantsLocked() {
	if mutation != nil {
		mutation(callerOp(), m)
	}
	err := m.verifyLocked()
	if err == nil {
		return
	}
	op := callerOp() // only now: reading the stack costs more than many checks
	d := &m.delivery
	clear(d.queue[d.opStart:])
	d.queue = d.queue[:d.opStart]
	m.mu.Unlock()
	invariants.Check("l1."+op, err)
}

// mutation, when not nil, runs at every check before the verification,
// with the name of the call and its manager: the invariants tests install
// mutants here, corruptions the check must catch at the call that made
// them. Nothing else sets it.
var mutation func(op string, m any)

// managerPrefix begins the names of the manager's methods in a stack.
const managerPrefix = "github.com/kvalloc/kvalloc/l1.(*Manager["

// callerOp returns the name of the exported Manager method that the
// goroutine called and that is now ending: walking out from the check,
// the first exported method of Manager, and then the outermost of the
// methods of Manager around it (ReserveWriteChain, not the
// AppendReserveWriteChain it calls). Frames in between that are not the
// manager's (a panic unwinding, the Memory) are skipped until the first;
// the first frame outside the manager after it ends the walk, so a call a
// listener makes is named, not the call delivering to the listener.
func callerOp() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	op := ""
	for {
		f, more := frames.Next()
		name, ours := strings.CutPrefix(f.Function, managerPrefix)
		if ours {
			name = name[strings.LastIndexByte(name, '.')+1:]
			if r := []rune(name); len(r) > 0 && unicode.IsUpper(r[0]) {
				op = name
			}
		} else if op != "" {
			break
		}
		if !more {
			break
		}
	}
	if op == "" {
		return "?"
	}
	return op
}
