//go:build linux

package main

import (
	"sync/atomic"

	"github.com/kvalloc/kvalloc/internal/shmpage"
)

// A board is one client seat's page of shared memory, mapped by the
// supervisor and by every generation of the client in the seat: where the
// client is, where it resumes, and what it did, counted across its
// generations. It survives the client's SIGKILL, so what a client counted
// up to its death counts. Atomics only, no pointers: it lives off the Go
// heap.
type board struct {
	phase atomic.Uint64 // the step the client is at: phase*
	// doing is 1 + the trace index of the request the client took and has
	// not finished, or 0: a new generation does that request first.
	doing  atomic.Uint64
	stop   atomic.Uint64 // set by the supervisor: finish the request and exit 0
	counts [numCounts]atomic.Uint64
}

// dispatch is the page all the clients share: the trace's next request,
// counted across the loops (the request is next mod the trace's length).
// Each client takes the next request when it is free, as a load balancer
// hands each arrival to a free engine, so that together they replay the
// trace in order.
type dispatch struct {
	next atomic.Uint64
}

// Phases: where a client is, read by the supervisor when it kills.
const (
	phaseStart       = iota // starting: loading its share, dialing
	phaseIdle               // between requests
	phasePrefix             // reserve_read_prefix sent, its answer not read
	phaseVerify             // holding read locks, checking stamps
	phaseFinishRead         // finish_read sent
	phaseReserve            // reserve_write sent
	phaseStamp              // holding write reservations, writing stamps
	phaseFinishWrite        // finish_write sent
	numPhases
)

var phaseNames = [numPhases]string{"starting", "idle", "mid reserve_read_prefix", "holding read locks",
	"mid finish_read", "mid reserve_write", "holding write reservations", "mid finish_write"}

// Counters of a board.
const (
	cRequests    = iota // requests done
	cCalls              // calls answered
	cLookups            // keys reserve_read_prefix named
	cHits               // of them, locked (the prefix)
	cWriteKeys          // keys reserve_write named
	cGrants             // of them, granted
	cOOM                // of them, answered OUT_OF_MEMORY
	cNotWritable        // of them, answered KEY_NOT_WRITABLE (present, or being written)
	cVerified           // objects whose stamps were checked
	cStamped            // objects stamped
	cDials              // connections made
	numCounts
)

// totals are boards' counters, summed.
type totals [numCounts]uint64

func (b *board) add(c int, n int) { b.counts[c].Add(uint64(n)) }

// read returns the board's counters.
func (b *board) read() totals {
	var t totals
	for i := range t {
		t[i] = b.counts[i].Load()
	}
	return t
}

func (t *totals) plus(u totals) {
	for i := range t {
		t[i] += u[i]
	}
}

// mapBoard maps the board file at path, creating it when create.
func mapBoard(path string, create bool) (*board, func(), error) {
	p, unmap, err := shmpage.Map(path, create)
	return (*board)(p), unmap, err
}

// mapDispatch maps the dispatch file at path, creating it when create.
func mapDispatch(path string, create bool) (*dispatch, func(), error) {
	p, unmap, err := shmpage.Map(path, create)
	return (*dispatch)(p), unmap, err
}
