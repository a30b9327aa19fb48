package bench

import (
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// A serving engine's store batch: the new blocks of many requests, each a
// chain of positions 0..k, named chain after chain.
const (
	storeChains   = 57
	storeChainLen = 100
)

// storeBatch returns the keys and chain positions of storeChains chains of
// storeChainLen keys, chain-major: positions 0..99, 0..99, and so on.
func storeBatch() ([]cycleKey, []uint32) {
	keys := cycleKeys(storeChains*storeChainLen, 8)
	pos := make([]uint32, len(keys))
	for i := range pos {
		pos[i] = uint32(i % storeChainLen)
	}
	return keys, pos
}

// BenchmarkPolicyBatch times the calls that make a store batch's objects
// evictable, under policy=lru and policy=prefix: 57 chains of 100 keys in
// chain-major order, 8 MiB objects filling a 45 GiB MAP_NORESERVE pool.
// op=finish-write is the FinishWrite of the batch (the ReserveWriteChain
// that re-locks it is not timed); op=read is a ReserveRead of the batch
// and its FinishRead. Each object joins the policy's structures once per
// op, so prefix ÷ lru is what ranking a call's keys by chain position
// costs on top of LRU's append; a rank that searched its place among the
// call's keys cost O(keys) each on this order.
func BenchmarkPolicyBatch(b *testing.B) {
	for _, p := range []l1.EvictionPolicy{l1.EvictLRU, l1.EvictPrefix} {
		for _, op := range []string{"finish-write", "read"} {
			b.Run("policy="+p.String()+"/op="+op, func(b *testing.B) {
				m, _ := newProdManager(b, prodKeys, prodObject, l1.Config{Eviction: p})
				keys, pos := storeBatch()
				leases := make([]l1.Lease, len(keys))
				reserve := func() {
					res, err := m.ReserveWriteChain(keys, pos, nil, prodObject, l1.ModeAll)
					if err != nil {
						b.Fatal(err)
					}
					mustGrant(b, res, leases)
				}
				finish := func() {
					sts, err := m.FinishWrite(keys, leases)
					mustAll(b, "FinishWrite", sts, err)
				}
				read := func() {
					res, err := m.ReserveRead(keys, 1)
					if err != nil {
						b.Fatal(err)
					}
					mustGrant(b, res, leases)
					sts, err := m.FinishRead(keys, leases, 1)
					mustAll(b, "FinishRead", sts, err)
				}
				// warm: one op of each kind before timing
				// (TestAllocsPerOpIndependentOfN).
				reserve()
				finish()
				read()
				b.ReportAllocs()
				for b.Loop() {
					if op == "read" {
						read()
						continue
					}
					b.StopTimer()
					reserve()
					b.StartTimer()
					finish()
				}
				perUnit(b, len(keys), "ns/key")
			})
		}
	}
}
