//go:build linux

package daemoncheck

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/wire"
)

// prefetchBatch is the daemon's PrefetchBatch in a System: more keys than
// any op carries, so that a prefetch is one get.
const prefetchBatch = 1024

// applyL2 runs the L2 operations.
func (s *System) applyL2(op Op) error {
	if s.store == nil {
		return fmt.Errorf("%v needs a System with Setup.L2", op.Kind)
	}
	switch op.Kind {
	case OpLookup:
		got, err := s.Clients[op.Conn].Lookup(keysOf(op.Keys), op.Prefetch)
		if err != nil {
			return err
		}
		l1n, l2n, pf := s.Model.Lookup(op.Keys, op.Prefetch)
		if want := (wire.Lookup{N: uint32(len(op.Keys)), L1: uint32(l1n), L2: uint32(l2n), Prefetch: uint32(pf)}); got != want {
			return fmt.Errorf("lookup %+v, model %+v", got, want)
		}
		return nil
	case OpLoad:
		if s.Model.Pending() == 0 {
			return nil
		}
		keys, err := s.Model.NextLoad()
		if err != nil {
			return err
		}
		before := s.Server.L2Work().Loading
		s.store.release(Key(keys[0]))
		for start := time.Now(); s.Server.L2Work().Loading > before-len(keys); time.Sleep(20 * time.Microsecond) {
			if time.Since(start) > 10*time.Second {
				return fmt.Errorf("the daemon is still loading %d keys 10 s after their get, want %d", s.Server.L2Work().Loading, before-len(keys))
			}
		}
		ld, err := s.Model.LoadNext()
		if err != nil {
			return err
		}
		return s.checkLoaded(ld)
	case OpEvictL2:
		s.store.Delete(context.Background(), keysOf(op.Keys))
		s.Model.EvictL2(op.Keys)
		return nil
	}
	return fmt.Errorf("unknown op %v", op.Kind)
}

// checkLoaded checks the bytes of a load: every key the model finished
// holds exactly its L2 value's bytes. (Compare then checks that the keys it
// did not finish are not readable.)
func (s *System) checkLoaded(ld Load[int]) error {
	c := s.Clients[0]
	for i, k := range ld.Keys {
		if !ld.Loaded[i] || ld.Statuses[i] != 0 {
			continue
		}
		want, inL2 := s.store.value(Key(k))
		b, err := c.Bytes(client.Block{Epoch: c.Epoch(), Block: ld.Blocks[i]})
		if err != nil {
			return err
		}
		if !inL2 || int64(len(want)) != ld.Sizes[i] || !bytes.Equal(b[:len(want)], want) {
			return fmt.Errorf("key %d was loaded into [%d, +%d) but does not hold its L2 value's %d bytes", k, ld.Blocks[i].Offset, ld.Blocks[i].Size, len(want))
		}
	}
	return nil
}

// waitL2 waits until the daemon's tier has copied every finished key the
// last op gave it (a lookup starts its prefetch before it answers).
func (s *System) waitL2() error {
	if s.store == nil {
		return nil
	}
	for start := time.Now(); ; time.Sleep(20 * time.Microsecond) {
		w := s.Server.L2Work()
		if w.Queued == 0 {
			return nil
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("the daemon's L2 tier is not idle 10 s after the op: %+v", w)
		}
	}
}

// compareL2 compares the locks the daemon holds of its own with the
// model's: as many write locks as keys being loaded, and no read lock
// between steps (a copy's lock lives for the copy only).
func (s *System) compareL2() error {
	if s.store == nil {
		return nil
	}
	w := s.Server.L2Work()
	writes, reads := s.Model.DaemonHolds()
	if w.Writes != writes || w.Reads != int64(reads) || w.Loading != writes {
		return fmt.Errorf("the daemon holds %d write locks (%d keys loading) and %d read locks of its own; the model %d and %d",
			w.Writes, w.Loading, w.Reads, writes, reads)
	}
	return nil
}
