package trace

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHandTracePrefix replays handTrace through l1's prefix-aware policy
// with on-demand eviction. The policy's list is written first to go first;
// what one call finishes or releases is ranked by chain position, the
// highest first.
//
//	r0: A B C cold; FinishWrite ranks them C B A.             C B A
//	r1: hits A B (locked); D E cold: evict C. FinishWrite
//	    ranks E D, FinishRead B A.                            E D B A
//	r2: hits A B; C evicted before: evict prefill. Full: the
//	    tail E goes first (LRU took D). Stored C.             D C B A
//	r3: D hits; E evicted before: evict prefill. Evict C.     B A E D
//	r4: A hits; F cold: evict B.                              E D F A
//	r5: C evicted before: evict prefill; G cold; D resident
//	    behind the miss: orphan. Evict E, spare D (the call's
//	    own), evict F.                                        D A G C
//	r6: hits C G: 600 tokens.
//
// Hits 2+2+1+1+2 = 8 blocks, 1024+1024+512+512+600 = 3672 tokens, one more
// than LRU's 7: evicting E, a tail, instead of D kept r3's D. Evict
// prefill 3 (C, E, C); orphans 1 (D), against LRU's 2; evictions C, E, C,
// B, E, F = 6.
func TestHandTracePrefix(t *testing.T) {
	tr := parseString(t, handTrace)
	ps, err := SelectPolicies("on-demand/scattered/prefix")
	require.NoError(t, err)
	r, err := Run(tr, ps[0], handOptions)
	require.NoError(t, err)
	require.Equal(t, counts{Hits: 8, HitTokens: 3672, Cold: 7, EvictPrefill: 3, Orphans: 1, Stored: 10, Evictions: 6}, countsOf(r))
	require.EqualValues(t, 6, r.OnDemandEvictions)
	require.Zero(t, r.OOMKeys)
}
