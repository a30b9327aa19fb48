//go:build linux

package l1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// Issue 9's defects at production size: 8 MiB objects (a KV chunk) in a
// 45 GiB pool, 5760 objects when full.
const (
	prodObject = 8 * MiB
	prodPool   = 45 << 30
	prodN      = int(prodPool / prodObject)
)

func prodEnv(t *testing.T, cfg l1.Config) *env {
	t.Helper()
	a := newBigAlloc(t, prodPool)
	return newEnvOver(t, a, a, cfg)
}

func leasesOf(rs []l1.Result) []l1.Lease {
	out := make([]l1.Lease, len(rs))
	for i, r := range rs {
		out[i] = r.Lease
	}
	return out
}

// Writer A fills the pool and stalls; writer B reserves every key again and
// gets the same blocks; A's late FinishWrite commits none of B's objects.
func TestProductionLateWriterCommitsNothing(t *testing.T) {
	e := prodEnv(t, l1.Config{WriteTTL: time.Minute})
	ks := keys(0, prodN)
	a := e.reserve(t, ks, prodObject)
	require.Equal(t, repeat(l1.OK, prodN), statuses(a))
	require.Equal(t, int64(prodPool), e.used(), "the pool is full")
	e.clk.Advance(time.Minute)
	b := e.reserve(t, ks, prodObject)
	require.Equal(t, repeat(l1.OK, prodN), statuses(b))
	st, err := e.m.FinishWrite(ks, leasesOf(a))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.StaleLease, prodN), st)
	assert.Equal(t, prodN, e.m.Stats().WriteLocked, "B's reservations stand")
	st, err = e.m.FinishWrite(ks, leasesOf(b))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, prodN), st)
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, prodN, n)
	assert.Zero(t, e.used())
}

// A pool full of finished, never-read temporary objects is reclaimed by
// EvictTo and by on-demand eviction.
func TestProductionFinishedTemporariesAreEvictable(t *testing.T) {
	e := prodEnv(t, l1.Config{EvictOnDemand: true})
	e.putTemp(t, keys(0, prodN), prodObject)
	e.clk.Advance(24 * time.Hour)
	rs := e.reserve(t, keys(prodN, 16), prodObject)
	assert.Equal(t, repeat(l1.OK, 16), statuses(rs), "evicted on demand")
	assert.Equal(t, uint64(16), e.m.Stats().OnDemandEvictions)
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, prodN-16, n)
	assert.Equal(t, 16*prodObject, e.used(), "only the write-locked objects stay")
}

// Locks with a TTL of math.MaxInt64 hold a full pool for 1000 years of
// clock.
func TestProductionNoExpiryHoldsAFullPool(t *testing.T) {
	e := prodEnv(t, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry})
	ks := keys(0, prodN)
	rs := e.reserve(t, ks, prodObject)
	for range 4 {
		e.clk.Advance(250 * 365 * 24 * time.Hour)
		e.m.Len()
	}
	st, err := e.m.FinishWrite(ks, leasesOf(rs))
	require.NoError(t, err)
	assert.Equal(t, repeat(l1.OK, prodN), st)
	e.read(t, ks, 1)
	e.clk.Advance(1 << 62)
	e.clk.Advance(-1 << 62)
	assert.Equal(t, repeat(l1.KeyIsLocked, prodN), e.del(ks, false))
	assert.Equal(t, int64(prodPool), e.used())
}
