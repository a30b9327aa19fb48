package l1_test

import (
	"math"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The clock: a jump either way changes no lock it should not (see the
// package doc, "Time").

// A clock that jumps backwards by any amount neither lapses nor revives a
// lock; one that jumps forward by any amount lapses every finite lock.
// From a hostile review (a clock that jumps).
func TestClockJumps(t *testing.T) {
	for _, back := range []time.Duration{time.Second, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run("back_"+back.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second})
			rs := e.reserve(t, []int{1}, obj)
			e.clk.Advance(4 * time.Second)
			e.m.Len() // the manager reads the clock at +4 s
			e.clk.Advance(-back)
			s := e.state(t, 1)
			assert.True(t, s.WriteLocked, "a jump back does not lapse the lock")
			assert.Equal(t, 6*time.Second, s.WriteExpiry.Sub(e.clk.Now()), "nor extend it")
			e.clk.Advance(5 * time.Second)
			assert.True(t, e.state(t, 1).WriteLocked)
			e.clk.Advance(time.Second)
			_, ok := e.m.State(1)
			assert.False(t, ok, "the lock lapses 10 s of forward time after it was taken")
			st, err := e.m.FinishWrite([]int{1}, []l1.Lease{rs[0].Lease})
			require.NoError(t, err)
			assert.Equal(t, []l1.Status{l1.KeyNotExist}, st)
		})
	}
	for _, fwd := range []time.Duration{11 * time.Second, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run("forward_"+fwd.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second, ReadTTL: l1.NoExpiry})
			e.reserve(t, []int{1}, obj)
			e.put(t, []int{2}, obj)
			e.read(t, []int{2}, 1)
			e.clk.Advance(fwd)
			e.clk.Advance(fwd)
			_, ok := e.m.State(1)
			assert.False(t, ok, "the write lock lapsed")
			assert.Equal(t, 1, e.state(t, 2).ReadLocks, "a lock that never expires still holds")
			assert.Equal(t, obj, e.used())
		})
	}
}
