package allocator

import "sync/atomic"

// Region is the memory an Allocator carves. The allocator never reads,
// writes or maps it: it hands out offsets into Bytes and stores no Go
// pointer in it, so a region may live off the Go heap (mmap, pinned, CUDA
// host memory) without the garbage collector ever scanning or moving it.
// Package hostmem provides the regions of host memory; any type that keeps
// this contract will do.
type Region interface {
	// Bytes returns the whole region, or nil once it is closed. The slice
	// is valid until Close.
	Bytes() []byte
	// Kind names the memory for messages and metrics: "heap", "mmap",
	// "pinned" or "cuda-host" for hostmem's regions.
	Kind() string
	// Close releases the memory. It is idempotent: a second call returns nil
	// and does nothing. Before it gives the memory back it calls
	// State().MarkClosed(). Blocks handed out over the region are invalid
	// after it. A failure to give the memory back wraps ErrRelease; the
	// region counts as closed all the same.
	Close() error
	// State returns the region's state, which it shares with the allocator
	// that carves it: the same non-nil pointer on every call, for the
	// region's whole life.
	State() *RegionState
}

// RegionState is what a Region shares with the allocator that carves it:
// whether the region is closed, and whether an allocator owns it (New
// claims it for good). A Region holds one for its whole life (embedded,
// which provides State, or as a field) and calls MarkClosed in Close
// before it releases the memory. The allocator loads it on every call, one
// atomic load, so a region closed behind its allocator's back makes every
// later call of that allocator return ErrClosed.
//
// The zero value is an open region's state. A RegionState must not be
// copied after first use.
type RegionState struct {
	closed atomic.Bool
	owned  atomic.Bool
}

// State returns s, so that a Region that embeds a RegionState has its
// State method.
func (s *RegionState) State() *RegionState { return s }

// MarkClosed records that the region is closed. It is idempotent and safe
// for concurrent use; the state never reopens.
func (s *RegionState) MarkClosed() { s.closed.Store(true) }

// Closed reports whether MarkClosed has been called.
func (s *RegionState) Closed() bool { return s.closed.Load() }
