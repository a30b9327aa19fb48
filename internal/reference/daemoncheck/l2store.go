//go:build linux

package daemoncheck

import (
	"context"
	"sync"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// stepStore is the L2 store of a System with Setup.L2: values in memory,
// checked as the daemon sends them (l2.Decode), and prefetch gets that
// wait until the System lets them through, one prefetch at a time, so
// that the daemon's loads happen at steps the model can follow.
type stepStore struct {
	mu    sync.Mutex
	vals  map[l1.ObjectKey][]byte        // payloads
	gates map[l1.ObjectKey]chan struct{} // a prefetch's get waits on its first key's gate
}

var _ l2.Store = (*stepStore)(nil)

func newStepStore() *stepStore {
	return &stepStore{vals: map[l1.ObjectKey][]byte{}, gates: map[l1.ObjectKey]chan struct{}{}}
}

func (s *stepStore) gate(k l1.ObjectKey) chan struct{} {
	g := s.gates[k]
	if g == nil {
		g = make(chan struct{})
		s.gates[k] = g
	}
	return g
}

// release lets the get whose first key is k through.
func (s *stepStore) release(k l1.ObjectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate(k))
}

// Head implements l2.Store.
func (s *stepStore) Head(_ context.Context, keys []l1.ObjectKey) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = -1
		if v, ok := s.vals[k]; ok {
			out[i] = int64(len(v))
		}
	}
	return out
}

// Get implements l2.Store: it waits for its release, then answers.
func (s *stepStore) Get(ctx context.Context, keys []l1.ObjectKey) [][]byte {
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out
	}
	s.mu.Lock()
	g := s.gate(keys[0])
	s.mu.Unlock()
	select {
	case <-g:
	case <-ctx.Done():
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.gates, keys[0])
	for i, k := range keys {
		if v, ok := s.vals[k]; ok {
			out[i] = append([]byte{}, v...)
		}
	}
	return out
}

// Load implements l2.Store: Get, each payload copied into its dst when
// the lengths agree.
func (s *stepStore) Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	ok := make([]bool, len(keys))
	for i, v := range s.Get(ctx, keys) {
		if v != nil && len(v) == len(dst[i]) {
			ok[i] = copy(dst[i], v) == len(v)
		}
	}
	return ok
}

// Encode implements l2.Store: values without MACs (l2.Encode).
func (s *stepStore) Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error) {
	return l2.Encode(dst, k, p)
}

// Put implements l2.Store: a value that does not decode for its key is
// not stored.
func (s *stepStore) Put(_ context.Context, keys []l1.ObjectKey, values [][]byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, k := range keys {
		p, err := l2.Decode(&k, values[i])
		if err != nil {
			continue
		}
		s.vals[k] = append([]byte{}, p...)
		n++
	}
	return n
}

// Drop implements l2.Store.
func (s *stepStore) Drop(int) {}

// Delete implements l2.Store.
func (s *stepStore) Delete(_ context.Context, keys []l1.ObjectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.vals, k)
	}
}

// value returns k's payload, if the store holds one.
func (s *stepStore) value(k l1.ObjectKey) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[k]
	return v, ok
}

// Stats implements l2.Store.
func (s *stepStore) Stats() l2.Stats { return l2.Stats{} }

// Close implements l2.Store.
func (s *stepStore) Close() error { return nil }
