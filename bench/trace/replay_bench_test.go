package trace

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkConversation replays the whole conversation trace, one replay
// per iteration, at a quarter of its distinct blocks (KVALLOC_BENCH_POOL
// sets another fraction), under every policy
// and the ideal LRU. It reports the cache's time per block reference
// (ns/blockref: l1 and the allocator, or the bound) and the hit rate; the
// ideal LRU's ns/blockref is the floor to compare against. Policy names
// have "_" for "/", so that -bench patterns can select them.
func BenchmarkConversation(b *testing.B) {
	tr, err := ReadFile(conversation, 0)
	if err != nil {
		b.Fatal(err)
	}
	o := Options{Slots: Pool{Fraction: benchPool()}.Slots(tr, Options{})}
	bench := func(name string, run func() (*Result, error)) {
		b.Run(name, func(b *testing.B) {
			var busy, refs int64
			var hit float64
			for b.Loop() {
				r, err := run()
				if err != nil {
					b.Fatal(err)
				}
				busy += r.Busy.Nanoseconds()
				refs += r.Refs
				hit = r.HitRate()
			}
			b.ReportMetric(float64(busy)/float64(refs), "ns/blockref")
			b.ReportMetric(100*hit, "hit%")
		})
	}
	bench("policy=ideal-lru", func() (*Result, error) { return RunLRU(tr, o) })
	for _, p := range Policies {
		bench("policy="+strings.ReplaceAll(p.Name, "/", "_"), func() (*Result, error) { return Run(tr, p, o) })
	}
}

// benchPool is the pool of BenchmarkConversation, a fraction of the
// trace's distinct blocks: KVALLOC_BENCH_POOL (e.g. 0.1), or 0.25.
func benchPool() float64 {
	if s := os.Getenv("KVALLOC_BENCH_POOL"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil {
			return f
		}
	}
	return 0.25
}
