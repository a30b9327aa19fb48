//go:build linux

// Package daemoncheck runs kvallocd (package server), in process, behind
// several client connections (package client), side by side with the
// manager model of package l1ref extended with connection ownership
// (Owners, owners.go), and compares them after every operation: per-key
// results, every object's state in LRU order, and the daemon's own Check
// (every lock a live connection's, the allocator's invariants, no byte
// lost). The fuzz target FuzzDaemonOwnership (package fuzz) drives it with
// random calls on random connections, random disconnects and clock
// advances.
//
// With Setup.L2 the daemon has an L2 tier over an in-memory store, and the
// model the daemon's own locks (owners_l2.go): the copy of each finished
// object, the prefetches of lookups and their loads, which the System
// steps (OpLoad), so that no daemon lock outlives its work, no prefetched
// key is readable before its load finished it with the L2 value's bytes,
// and nothing a connection does releases a daemon lock.
//
// A Variant replaces how a connection ends, or how its delete is carried
// out, which is how the broken daemons of package mutant (a disconnect
// that forgets the read locks, a forced delete that frees a locked block
// at once) are put in, to prove the comparison catches them.
package daemoncheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/l1ref"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// Conns is the number of client connections of a System.
const Conns = 3

// Keys is the size of the key universe: keys are 0 to Keys-1.
const Keys = 16

// Unit is the pool's alignment and the unit of object sizes: one page, the
// memfd's.
const Unit = 4096

// Setup describes a System: a pool of Units units and the manager's
// configuration.
type Setup struct {
	Units             int
	Placement         allocator.Placement
	EvictOnDemand     bool
	Eviction          l1.EvictionPolicy
	WriteTTL, ReadTTL time.Duration
	// L2 gives the daemon an L2 tier over an in-memory store whose
	// prefetch gets wait for OpLoad (owners_l2.go models it): one put
	// worker copying one object a call, so that its calls follow the
	// finishes in order, and one get per prefetch.
	L2 bool
	// Version is the protocol version the clients speak
	// (client.Options.Version): 0, the default, is client.DefaultVersion,
	// version 1; wire.Version2 is version 2, with key handles. The model is
	// the same for both.
	Version uint32
}

// Variant replaces parts of a System; the zero Variant is the real thing.
type Variant struct {
	// Disconnect ends connection i of s and opens a new one in its place;
	// nil means Close and Dial (System.Reconnect).
	Disconnect func(s *System, i int) error
	// Delete sends connection i's delete; nil means the client's Delete.
	Delete func(s *System, i int, keys []l1.ObjectKey, force bool) ([]wire.Status, error)
}

// System is one daemon, its connections and the model.
type System struct {
	Setup   Setup
	Server  *server.Server
	Clients [Conns]*client.Client
	Model   *Owners[int]
	v       Variant
	store   *stepStore // with Setup.L2

	// Book holds each connection's last write and read lease of each key,
	// as its caller keeps them: presented as they are, they go stale.
	Book [Conns]struct{ Write, Read map[int]l1.Lease }

	mu    sync.Mutex
	now   time.Duration
	dead  []*client.Client // connections a Variant left open
	path  string
	ended uint64 // connections the daemon has closed, as far as the System knows
}

var (
	dirOnce sync.Once
	dir     string
	dirErr  error
	serial  atomic.Uint64
)

// socketPath returns a fresh socket path in a directory of this process.
func socketPath() (string, error) {
	dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "kvalloc-daemoncheck-") })
	if dirErr != nil {
		return "", dirErr
	}
	return filepath.Join(dir, fmt.Sprintf("d%d.sock", serial.Add(1))), nil
}

// Epoch is the manual clock's start.
var Epoch = time.Unix(1_700_000_000, 0)

// New starts a daemon with setup's pool and configuration, on a manual
// clock, and opens the connections.
func New(setup Setup, v Variant) (*System, error) {
	if setup.WriteTTL == 0 {
		setup.WriteTTL = l1.DefaultWriteTTL
	}
	if setup.ReadTTL == 0 {
		setup.ReadTTL = l1.DefaultReadTTL
	}
	path, err := socketPath()
	if err != nil {
		return nil, err
	}
	s := &System{Setup: setup, v: v, path: path}
	cfg := l1.Config{Placement: setup.Placement, EvictOnDemand: setup.EvictOnDemand,
		Eviction: setup.Eviction, WriteTTL: setup.WriteTTL, ReadTTL: setup.ReadTTL, Now: s.clock}
	scfg := server.Config{SocketPath: path, PoolSize: int64(setup.Units) * Unit, Align: Unit,
		FrameTimeout: time.Minute, WriteTimeout: time.Minute, L1: cfg}
	if setup.L2 {
		s.store = newStepStore()
		scfg.L2 = server.L2Config{Store: s.store, Batch: 1, Workers: 1, PrefetchBatch: prefetchBatch}
	}
	srv, err := server.New(scfg)
	if err != nil {
		return nil, err
	}
	s.Server = srv
	go srv.Serve()
	cfg.QuarantineLapsedWrites = true // as the daemon always runs it
	s.Model = NewOwners(l1ref.New[int](allocref.NewAlloc(int64(setup.Units)*Unit, Unit), l1ref.Config{Config: cfg, Epoch: Epoch}))
	if setup.L2 {
		s.Model.EnableL2()
	}
	for i := range Conns {
		if err := s.dial(i); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *System) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Epoch.Add(s.now)
}

// Advance moves the daemon's clock and the model's, either way.
func (s *System) Advance(d time.Duration) {
	s.mu.Lock()
	s.now = l1ref.AddClock(s.now, d)
	s.mu.Unlock()
	s.Model.M.Advance(d)
}

func (s *System) dial(i int) error {
	c, err := client.Dial(s.path, client.Options{Timeout: time.Minute, Version: s.Setup.Version})
	if err != nil {
		return err
	}
	s.Clients[i] = c
	s.Book[i].Write, s.Book[i].Read = map[int]l1.Lease{}, map[int]l1.Lease{}
	return nil
}

// Close ends everything.
func (s *System) Close() {
	for _, c := range s.Clients {
		if c != nil {
			c.Close()
		}
	}
	for _, c := range s.dead {
		c.Close()
	}
	if s.Server != nil {
		s.Server.Close()
	}
	os.Remove(s.path + ".lock")
}

// Reconnect is the genuine disconnect: connection i closes, the System
// waits until the daemon has released it, and a new connection takes its
// place. The model releases the same.
func (s *System) Reconnect(i int) error {
	s.Clients[i].Close()
	s.ended++
	if err := s.waitEnded(); err != nil {
		return err
	}
	s.Model.Disconnect(i)
	return s.dial(i)
}

// Abandon leaves connection i open and unused for the rest of the run, as
// if forgotten, and opens a new one in its place; the model releases it as
// a disconnect would. For broken variants.
func (s *System) Abandon(i int) error {
	s.dead = append(s.dead, s.Clients[i])
	s.Model.Disconnect(i)
	return s.dial(i)
}

// waitEnded waits until the daemon has closed as many connections as the
// System closed.
func (s *System) waitEnded() error {
	for start := time.Now(); s.Server.Stats().ConnsClosed < s.ended; time.Sleep(50 * time.Microsecond) {
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("the daemon closed %d connections in 10 s, want %d", s.Server.Stats().ConnsClosed, s.ended)
		}
	}
	return nil
}

// Disconnect ends connection i as the Variant says.
func (s *System) Disconnect(i int) error {
	if s.v.Disconnect != nil {
		return s.v.Disconnect(s, i)
	}
	return s.Reconnect(i)
}

// Key is the daemon's key for model key k.
func Key(k int) l1.ObjectKey { return l1.ObjectKey{ChunkHash: string([]byte{byte(k)}), Model: "m"} }

// keyOf is the model key of a daemon key.
func keyOf(k l1.ObjectKey) (int, error) {
	if len(k.ChunkHash) != 1 || k.Model != "m" || k.CacheSalt != "" || k.KVRank != 0 || k.GroupID != 0 {
		return 0, fmt.Errorf("key %v is none of the System's", k)
	}
	return int(k.ChunkHash[0]), nil
}

func keysOf(ks []int) []l1.ObjectKey {
	out := make([]l1.ObjectKey, len(ks))
	for i, k := range ks {
		out[i] = Key(k)
	}
	return out
}

// sameErr compares the daemon's error with the model's.
func sameErr(got, want error) error {
	switch {
	case want == nil && got != nil:
		return fmt.Errorf("unexpected error %v", got)
	case want != nil && got == nil:
		return fmt.Errorf("no error; the model refused the call: %v", want)
	case errors.Is(want, l1.ErrInvalidArgument) && !errors.Is(got, l1.ErrInvalidArgument):
		return fmt.Errorf("error %v, want one wrapping l1.ErrInvalidArgument", got)
	}
	return nil
}

func sameStatuses(got []wire.Status, want []l1.Status) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d statuses for %d keys", len(got), len(want))
	}
	for i := range got {
		if uint8(got[i]) != uint8(want[i]) {
			return fmt.Errorf("key #%d: %v, model %v (all %v, model %v)", i, got[i], wire.Status(want[i]), got, want)
		}
	}
	return nil
}

func sameResults(got []client.Result, want []l1.Result) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d results for %d keys", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if uint8(g.Status) != uint8(w.Status) || uint64(g.Lease.ID) != uint64(w.Lease) ||
			g.Block.Offset != w.Block.Offset || g.Block.Size != w.Block.Size {
			return fmt.Errorf("key #%d: %v block [%d, +%d) lease %d; model %v [%d, +%d) lease %d", i, g.Status, g.Block.Offset, g.Block.Size, g.Lease.ID,
				wire.Status(w.Status), w.Block.Offset, w.Block.Size, w.Lease)
		}
	}
	return nil
}

// Compare compares every object's state, in LRU order, and the blocks
// held in no object (lapsed writes, and keys deleted with force under a
// live lock), and runs the daemon's Check. Both sides reclaim expired
// objects first.
func (s *System) Compare() error {
	if err := s.Server.Check(); err != nil {
		return fmt.Errorf("daemon check: %w", err)
	}
	if err := s.compareL2(); err != nil {
		return err
	}
	got := s.Server.Manager().Snapshot()
	s.Model.M.Sweep()
	want := s.Model.M.Snapshot()
	st := s.Server.Manager().Stats()
	if qn, qb := s.Model.M.Quarantine(); st.QuarantinedObjects != qn || st.QuarantinedBytes != qb {
		return fmt.Errorf("the daemon holds %d blocks of %d bytes in no object, model %d of %d", st.QuarantinedObjects, st.QuarantinedBytes, qn, qb)
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d objects, model %d: %v vs %v", len(got), len(want), describe(got), want)
	}
	for i, g := range got {
		k, err := keyOf(g.Key)
		if err != nil {
			return err
		}
		w := want[i]
		if gs, ws := stateLine(k, g.ObjectState), stateLine(w.Key, w.ObjectState); gs != ws {
			return fmt.Errorf("object #%d in LRU order: %s; model %s", i, gs, ws)
		}
	}
	return nil
}

// stateLine is what Compare compares of one object: every field of its
// state but the expiries and the block's generation (the model predicts
// none).
func stateLine(k int, st l1.ObjectState) string {
	return fmt.Sprintf("key %d block [%d,+%d) size %d write %v reads %d temp %v finished %v evictable %v wlease %d rlease %d",
		k, st.Block.Offset, st.Block.Size, st.Size, st.WriteLocked, st.ReadLocks, st.Temporary, st.Finished, st.Evictable, st.WriteLease, st.ReadLease)
}

func describe(es []l1.Entry[l1.ObjectKey]) string {
	out := "["
	for _, e := range es {
		k, _ := keyOf(e.Key)
		out += fmt.Sprintf(" %d(w%v r%d)", k, e.WriteLocked, e.ReadLocks)
	}
	return out + " ]"
}

// notHeld checks the rule of forced deletes and lapsed writes on a
// reserve_write's grants: no block under a live lease is reissued, so no
// granted block overlaps one the model holds for a holder that has not
// let go.
func (s *System) notHeld(got []client.Result) error {
	held := s.Model.M.QuarantinedWrites()
	for i, r := range got {
		if r.Status != wire.StatusOK {
			continue
		}
		for l, q := range held {
			if r.Block.Offset < q.Block.End() && q.Block.Offset < r.Block.Offset+r.Block.Size {
				return fmt.Errorf("key #%d got %+v, over the block %+v held for lease %d of key %v (deleted %v, read %v)",
					i, r.Block, q.Block, l, q.Key, q.Deleted, q.Read)
			}
		}
	}
	return nil
}
