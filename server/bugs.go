//go:build linux

package server

import (
	"fmt"
	"slices"
	"strings"
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
	// bugNoEvict: one reserve_write in 200 answers OUT_OF_MEMORY for
	// every key without asking l1, as an allocator that gave up while
	// evictable objects were present would.
	bugNoEvict
	// bugSwapBlocks: one reserve_read_prefix in 1000 with two hits or
	// more answers the first two hits with each other's blocks.
	bugSwapBlocks
	// bugKeepConn: one connection's end in 10 goes unnoticed: the socket
	// is closed, but the connection stays among the open ones with every
	// lock it held, as a daemon that waits for a heartbeat would.
	bugKeepConn
	// bugCloseError: Close reports a failure, so kvallocd exits 1 on
	// SIGTERM.
	bugCloseError
)

// bugNames are the values of KVALLOC_DAEMON_BUG.
var bugNames = map[string]daemonBug{"forget-reads": bugForgetReads, "leak-block": bugLeakBlock, "retain": bugRetain,
	"error": bugError, "no-evict": bugNoEvict, "swap-blocks": bugSwapBlocks, "keep-conn": bugKeepConn, "close-error": bugCloseError}

// parseBug reads KVALLOC_DAEMON_BUG's value.
func parseBug(s string) (daemonBug, error) {
	if s == "" {
		return bugNone, nil
	}
	b, ok := bugNames[s]
	if !ok {
		return bugNone, fmt.Errorf("KVALLOC_DAEMON_BUG=%q: want one of forget-reads, leak-block, retain, error, no-evict, swap-blocks, keep-conn, close-error", s)
	}
	return b, nil
}

var bugState struct {
	sync.Mutex
	retained                      [][]l1.ObjectKey
	prefixes, writes, swaps, ends uint64
}

// bugCount counts one more of *n and reports whether it is a multiple of
// every.
func bugCount(n *uint64, every uint64) bool {
	bugState.Lock()
	defer bugState.Unlock()
	*n++
	return *n%every == 0
}

// bugRequest is the hook before a request is carried out: it returns the
// error bugError answers, and keeps the keys bugRetain keeps.
func bugRequest(q *wire.Request) error {
	switch bug {
	case bugRetain:
		bugState.Lock()
		// Copies: a lookup's keys alias the frame (wire.Decoder.Borrow).
		keys := slices.Clone(q.Keys)
		for i := range keys {
			keys[i].ChunkHash = strings.Clone(keys[i].ChunkHash)
		}
		bugState.retained = append(bugState.retained, keys)
		bugState.Unlock()
	case bugError:
		if q.Type != wire.TypeReserveReadPrefix {
			return nil
		}
		if bugCount(&bugState.prefixes, 1000) {
			return &wire.Error{Code: wire.CodeInternal, Msg: "deliberate bug: a refused reserve_read_prefix"}
		}
	}
	return nil
}

// bugServe is the hook in place of l1: it reports whether it answered q
// itself (bugNoEvict's OUT_OF_MEMORY answers).
func bugServe(q *wire.Request, a *wire.Answer) bool {
	if bug != bugNoEvict || q.Type != wire.TypeReserveWrite || !bugCount(&bugState.writes, 200) {
		return false
	}
	for range q.Keys {
		a.Results = append(a.Results, wire.Result{Status: wire.StatusOutOfMemory})
	}
	return true
}

// bugAnswer is the hook after l1 answered q: bugSwapBlocks swaps two
// hits' blocks.
func bugAnswer(q *wire.Request, a *wire.Answer) {
	if bug != bugSwapBlocks || q.Type != wire.TypeReserveReadPrefix || a.Prefix < 2 || !bugCount(&bugState.swaps, 1000) {
		return
	}
	a.Results[0].Block, a.Results[1].Block = a.Results[1].Block, a.Results[0].Block
}

// bugEnd is the hook at a connection's end, under the gate: bugLeakBlock
// allocates a block and drops it.
func (s *Server) bugEnd() {
	if bug == bugLeakBlock {
		_, _ = s.alloc.Allocate(s.alloc.Align())
	}
}

// bugUnnoticed is the hook before a connection's end: it reports whether
// bugKeepConn leaves this end unnoticed.
func bugUnnoticed() bool {
	return bug == bugKeepConn && bugCount(&bugState.ends, 10)
}

// bugClose is the hook at the end of Close: bugCloseError's failure.
func bugClose(err error) error {
	if bug == bugCloseError && err == nil {
		return &wire.Error{Code: wire.CodeInternal, Msg: "deliberate bug: Close fails"}
	}
	return err
}

func (b daemonBug) String() string {
	for name, v := range bugNames {
		if v == b {
			return name
		}
	}
	return "none"
}
