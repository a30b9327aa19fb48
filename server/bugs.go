//go:build linux

package server

import (
	"fmt"
	"slices"
	"sync"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// A daemon built with the kvalloc_daemon_bugs tag carries one deliberate
// bug, named by the environment variable KVALLOC_DAEMON_BUG when it
// starts, so that the checks that run against a real kvallocd process
// (make soak: cmd/kvallocsoak) can be shown to catch it. Every other build
// has none: bug is the constant bugNone there (bugs_off.go) and these
// hooks compile to nothing.
type daemonBug int

const (
	bugNone daemonBug = iota
	// bugForgetReads: a connection's end forgets its read locks instead
	// of releasing them (it still aborts its writes).
	bugForgetReads
	// bugLeakBlock: a connection's end allocates one block that nothing
	// frees: used bytes drift from the objects'.
	bugLeakBlock
	// bugRetain: every request's keys are kept for ever: the heap grows
	// with the calls served.
	bugRetain
	// bugError: one reserve_read_prefix in 1000 is refused with an
	// INTERNAL error instead of being served.
	bugError
)

// bugNames are the values of KVALLOC_DAEMON_BUG.
var bugNames = map[string]daemonBug{"forget-reads": bugForgetReads, "leak-block": bugLeakBlock, "retain": bugRetain, "error": bugError}

// parseBug reads KVALLOC_DAEMON_BUG's value.
func parseBug(s string) (daemonBug, error) {
	if s == "" {
		return bugNone, nil
	}
	b, ok := bugNames[s]
	if !ok {
		return bugNone, fmt.Errorf("KVALLOC_DAEMON_BUG=%q: want one of forget-reads, leak-block, retain, error", s)
	}
	return b, nil
}

var bugState struct {
	sync.Mutex
	retained [][]l1.ObjectKey
	prefixes uint64
}

// bugRequest is the hook before a request is carried out: it returns the
// error bugError answers, and keeps the keys bugRetain keeps.
func bugRequest(q *wire.Request) error {
	switch bug {
	case bugRetain:
		bugState.Lock()
		bugState.retained = append(bugState.retained, slices.Clone(q.Keys))
		bugState.Unlock()
	case bugError:
		if q.Type != wire.TypeReserveReadPrefix {
			return nil
		}
		bugState.Lock()
		bugState.prefixes++
		n := bugState.prefixes
		bugState.Unlock()
		if n%1000 == 0 {
			return &wire.Error{Code: wire.CodeInternal, Msg: "deliberate bug: a refused reserve_read_prefix"}
		}
	}
	return nil
}

// bugEnd is the hook at a connection's end, under the gate: bugLeakBlock
// allocates a block and drops it.
func (s *Server) bugEnd() {
	if bug == bugLeakBlock {
		_, _ = s.alloc.Allocate(s.alloc.Align())
	}
}

func (b daemonBug) String() string {
	for name, v := range bugNames {
		if v == b {
			return name
		}
	}
	return "none"
}
