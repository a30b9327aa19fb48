package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/sim"
)

func parseString(t *testing.T, s string) *Trace {
	t.Helper()
	tr, err := Parse("hand", strings.NewReader(s), 512)
	require.NoError(t, err)
	return tr
}

// handTrace is seven requests over blocks A..G (hash ids 100..106), 10 s
// apart, each done long before the next: at 512 tokens/s a block of
// prefill takes 1 s. The pool holds 4 blocks.
//
//	r0 t=0   [A B C]   1300 tokens (C partial)
//	r1 t=10  [A B D E] 2048  multi-turn: extends r0's prefix A B
//	r2 t=20  [A B C]   1300
//	r3 t=30  [D E]     1024
//	r4 t=40  [A F]     1024
//	r5 t=50  [C G D]   1536  a miss in the middle: D behind G
//	r6 t=60  [C G]      600  every block hits: 600 tokens, not 1024
const handTrace = `{"timestamp": 0, "input_length": 1300, "output_length": 10, "hash_ids": [100, 101, 102]}
{"timestamp": 10000, "input_length": 2048, "output_length": 10, "hash_ids": [100, 101, 103, 104]}
{"timestamp": 20000, "input_length": 1300, "output_length": 10, "hash_ids": [100, 101, 102]}

{"timestamp": 30000, "input_length": 1024, "output_length": 10, "hash_ids": [103, 104]}
{"timestamp": 40000, "input_length": 1024, "output_length": 10, "hash_ids": [100, 105]}
{"timestamp": 50000, "input_length": 1536, "output_length": 10, "hash_ids": [102, 106, 103]}
{"timestamp": 60000, "input_length": 600, "output_length": 10, "hash_ids": [102, 106]}
`

var handOptions = Options{Slots: 4, BlockSize: 4096, PrefillRate: 512}

// counts is what the hand-worked tests compare.
type counts struct {
	Hits, HitTokens, Cold, EvictPrefill, Orphans, Stored int64
	Evictions                                            uint64
}

func countsOf(r *Result) counts {
	return counts{r.Hits, r.HitTokens, r.Cold, r.EvictPrefill, r.Orphans, r.Stored, r.Evictions}
}

// TestHandTraceL1 replays handTrace through l1 with on-demand eviction.
// LRU order is written least recently used first; (x) marks a read lock.
//
//	r0: A B C cold; stored A B C.                             A B C
//	r1: hits A B (locked); D E cold. 2 slots, 1 free: evict C.
//	    stored D E.                                           A B D E
//	r2: hits A B; C evicted before: evict prefill. Full: evict
//	    D (A B locked). Stored C.                             E A B C
//	r3: D evicted before: evict prefill, 0 hits; E resident
//	    behind the miss: orphan, and ModeNew leaves it alone. D
//	    needs a slot: E is the call's own key and is spared, so
//	    A goes. Stored D.                                     E B C D
//	r4: A evicted before: evict prefill; F cold. 2 slots: evict
//	    E, then B. Stored A F.                                C D A F
//	r5: hit C; G cold; D resident behind the miss: orphan. G
//	    needs a slot: D is the call's own, so A goes.         D F C G
//	r6: hits C G, and the last block is partial: 600 tokens.
//
// Hits 2+2+1+2 = 7 blocks, 1024+1024+512+600 = 3160 tokens; evict
// prefill 3 (C, D, A); orphans 2 (E, D); cold 7 (A..G once each);
// 7+3+2+7 = 19 references. Stored 3+2+1+1+2+1 = 10; evictions C, D, A,
// E, B, A = 6.
//
// l1 calls: one AppendReadPrefix per request, a ReserveWrite when blocks
// miss, a FinishWrite when some were granted, a FinishRead when some hit:
// r0 1+1+1, r1 1+1+1+1, r2 1+1+1+1, r3 1+1+1, r4 1+1+1, r5 1+1+1+1,
// r6 1+1 (everything hit) = 23. A ReserveRead per key up to the first
// miss made 29 (r1, r2 two more each, r5 and r6 one more each).
func TestHandTraceL1(t *testing.T) {
	tr := parseString(t, handTrace)
	require.Equal(t, 7, tr.Distinct)
	require.EqualValues(t, 19, tr.Refs)
	for _, p := range Policies[:2] { // scattered and contiguous-first agree here
		t.Run(p.Name, func(t *testing.T) {
			r, err := Run(tr, p, handOptions)
			require.NoError(t, err)
			require.Equal(t, counts{Hits: 7, HitTokens: 3160, Cold: 7, EvictPrefill: 3, Orphans: 2, Stored: 10, Evictions: 6}, countsOf(r))
			require.EqualValues(t, 19, r.Refs)
			require.EqualValues(t, 8832, r.Tokens)
			require.EqualValues(t, 10, r.Granted)
			require.EqualValues(t, 10, r.Requested)
			require.Zero(t, r.OOMKeys)
			require.Zero(t, r.FailedCalls)
			require.Zero(t, r.Lost)
			require.EqualValues(t, 6, r.OnDemandEvictions)
			require.EqualValues(t, 23, r.L1Calls, "one lookup call per request")
			require.InDelta(t, 7.0/19, r.HitRate(), 1e-12)
			require.InDelta(t, 3160.0/8832, r.TokenHitRate(), 1e-12)
			require.Equal(t, 60*time.Second+time.Duration(0), r.Sim) // r6 needs no prefill
		})
	}
}

// TestHandTraceLRU replays handTrace through the ideal LRU bound. It
// differs from l1 at r3: the bound does not spare E, which r3 named.
//
//	r0: stored A B C at its finish.                           A B C
//	r1: hits A B; D E stored at t=12: D fits, E evicts C.     A B D E
//	r2: hits A B; C evict prefill; C evicts D.                E A B C
//	r3: D evict prefill; E orphan; D evicts E.                A B C D
//	r4: hit A; F cold; F evicts B.                            C D A F
//	r5: hit C; G cold; D orphan; G evicts D.                  A F C G
//	r6: hits C G: 600 tokens.
//
// Hits 2+2+1+1+2 = 8 blocks, 1024+1024+512+512+600 = 3672 tokens; evict
// prefill 2 (C, D); orphans 2 (E, D); cold 7; stored 3+2+1+1+1+1 = 9;
// evictions C, D, E, B, D = 5.
func TestHandTraceLRU(t *testing.T) {
	tr := parseString(t, handTrace)
	r, err := RunLRU(tr, handOptions)
	require.NoError(t, err)
	require.Equal(t, counts{Hits: 8, HitTokens: 3672, Cold: 7, EvictPrefill: 2, Orphans: 2, Stored: 9, Evictions: 5}, countsOf(r))
}

// cyclicTrace asks for A, B, C, A, B, C, A, one block each, 10 s apart.
const cyclicTrace = `{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 10000, "input_length": 512, "output_length": 1, "hash_ids": [2]}
{"timestamp": 20000, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 30000, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 40000, "input_length": 512, "output_length": 1, "hash_ids": [2]}
{"timestamp": 50000, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 60000, "input_length": 512, "output_length": 1, "hash_ids": [1]}
`

// TestBeladyBeatsLRU: with 2 slots, LRU (the bound and l1 alike) always
// evicts the block asked for next and hits nothing; each of its last four
// misses is eviction-induced. Belady does not admit C (its next use, at 50
// s, is later than A's and B's), hits A and B, then does not admit C again
// (never used again, like B: a tie, so no change), and hits A: 3 hits, and
// no block it stored is missed later.
func TestBeladyBeatsLRU(t *testing.T) {
	tr := parseString(t, cyclicTrace)
	o := Options{Slots: 2, BlockSize: 4096, PrefillRate: 512}
	lru, err := RunLRU(tr, o)
	require.NoError(t, err)
	bel, err := RunBelady(tr, o)
	require.NoError(t, err)
	l1r, err := Run(tr, Policies[0], o)
	require.NoError(t, err)
	require.Equal(t, counts{Hits: 0, Cold: 3, EvictPrefill: 4, Stored: 7, Evictions: 5}, countsOf(lru))
	require.Equal(t, countsOf(lru), countsOf(l1r))
	require.Equal(t, counts{Hits: 3, HitTokens: 3 * 512, Cold: 4, Stored: 2}, countsOf(bel))
	require.Greater(t, bel.Hits, lru.Hits)
}

// fragTrace stores A, B, C, D one request each into a 4-block pool, reads
// A and C (so B and D are least recently used), and after the periodic
// sweep at 1 s (usage 100 % ≥ the 50 % watermark: evict half) asks for
// two new blocks E F at 1.5 s.
const fragTrace = `{"timestamp": 100, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 200, "input_length": 512, "output_length": 1, "hash_ids": [2]}
{"timestamp": 300, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 400, "input_length": 512, "output_length": 1, "hash_ids": [4]}
{"timestamp": 500, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 600, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 1500, "input_length": 1024, "output_length": 1, "hash_ids": [5, 6]}
`

// TestPeriodicFailsWithFree: the sweep evicts B and D, which lie apart, so
// two blocks are free but not adjacent. Contiguous placement grants the
// one a free extent holds and answers the other OutOfMemory: a failed call
// made while the bytes for the whole call were free. Scattered placement
// grants both.
func TestPeriodicFailsWithFree(t *testing.T) {
	tr := parseString(t, fragTrace)
	o := Options{Slots: 4, BlockSize: 4096, PrefillRate: 1e6, Watermark: 0.5, SweepRatio: 0.5}
	pol := func(name string) sim.Policy {
		ps, err := SelectPolicies(name)
		require.NoError(t, err)
		return ps[0]
	}
	r, err := Run(tr, pol("periodic/contiguous"), o)
	require.NoError(t, err)
	require.EqualValues(t, 2, r.Hits)
	require.EqualValues(t, 1, r.OOMKeys)
	require.EqualValues(t, 1, r.FailedCalls)
	require.EqualValues(t, 1, r.FailedWithFree)
	require.EqualValues(t, 5, r.Granted)
	require.GreaterOrEqual(t, r.SweepsFired, int64(1))

	r, err = Run(tr, pol("periodic/scattered"), o)
	require.NoError(t, err)
	require.Zero(t, r.OOMKeys)
	require.Zero(t, r.FailedCalls)
	require.EqualValues(t, 6, r.Granted)
}

// inflightTrace: two requests for the same two blocks half a second apart,
// and a third at 3 s. At 512 tokens/s the first prefills until 2 s.
const inflightTrace = `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 500, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 3000, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
`

// TestInFlightBlocksMissAndAreStoredOnce: at the trace's rate the second
// request arrives while the first is still writing both blocks, so it
// misses them (a block is readable only once its store finishes) and
// stores nothing (the blocks exist); the third hits both. At a tenth of
// the rate (-rate 0.1: 5 s apart) the second request hits too.
func TestInFlightBlocksMissAndAreStoredOnce(t *testing.T) {
	tr := parseString(t, inflightTrace)
	o := Options{Slots: 4, BlockSize: 4096, PrefillRate: 512}
	for _, rate := range []float64{1, 0.1} {
		hits := int64(2)
		if rate < 1 {
			hits = 4
		}
		l1r, err := Run(tr, Policies[0], Options{Slots: o.Slots, BlockSize: o.BlockSize, PrefillRate: o.PrefillRate, Rate: rate})
		require.NoError(t, err)
		lru, err := RunLRU(tr, Options{Slots: o.Slots, BlockSize: o.BlockSize, PrefillRate: o.PrefillRate, Rate: rate})
		require.NoError(t, err)
		for _, r := range []*Result{l1r, lru} {
			require.Equal(t, counts{Hits: hits, HitTokens: 512 * hits, Cold: 6 - hits, Stored: 2}, countsOf(r), "rate %v %s", rate, r.Policy)
		}
		require.EqualValues(t, 2, l1r.Granted)
		require.EqualValues(t, 2, l1r.Requested)
	}
}

// partialTrace shows the Partial hint on four requests 10 s apart, each
// done long before the next, in a pool of 3 blocks:
//
//	r0 t=0   [A B]  700 tokens: B is partial
//	r1 t=10  [C]    512
//	r2 t=20  [D]    512
//	r3 t=30  [A X] 1024
const partialTrace = `{"timestamp": 0, "input_length": 700, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 10000, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 20000, "input_length": 512, "output_length": 1, "hash_ids": [4]}
{"timestamp": 30000, "input_length": 1024, "output_length": 1, "hash_ids": [1, 5]}
`

// TestHandTracePartial replays partialTrace under LRU with and without the
// Partial hint. LRU order is written least recently used first.
//
//	      LRU                               LRU + Partial
//	r0    A B cold; stored.        A B      A B cold; B stored partial:
//	                                        the cold end.             B A
//	r1    C cold; stored.          A B C    the same.                 B A C
//	r2    D cold; full: evict A.   B C D    full: evict B.            A C D
//	r3    A evicted before: evict  C D A X  A hits (read-locked); X
//	      prefill; X cold. Two          cold; full: evict C (A is
//	      slots: evict B, C.            locked).                  D A X
//
// LRU: hits 0, cold 5 (A B C D X), evict prefill 1, stored 6, evictions
// 3. With the hint: hits 1 (512 tokens), cold 5, evict prefill 0, stored
// 5, evictions 2. The prefix policy with the hint agrees.
func TestHandTracePartial(t *testing.T) {
	tr := parseString(t, partialTrace)
	o := Options{Slots: 3, BlockSize: 4096, PrefillRate: 512}
	want := map[string]counts{
		"on-demand/scattered":                {Cold: 5, EvictPrefill: 1, Stored: 6, Evictions: 3},
		"on-demand/scattered/lru+partial":    {Hits: 1, HitTokens: 512, Cold: 5, Stored: 5, Evictions: 2},
		"on-demand/scattered/prefix+partial": {Hits: 1, HitTokens: 512, Cold: 5, Stored: 5, Evictions: 2},
	}
	for _, p := range Policies {
		w, ok := want[p.Name]
		if !ok {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			r, err := Run(tr, p, o)
			require.NoError(t, err)
			require.Equal(t, w, countsOf(r))
			require.Zero(t, r.Lost)
		})
	}
	r, err := RunLRU(tr, o)
	require.NoError(t, err)
	require.Equal(t, want["on-demand/scattered"], countsOf(r), "the ideal LRU agrees with l1's LRU here")
}
