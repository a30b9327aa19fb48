//go:build linux

package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/trace"
)

const conversation = "../../testdata/traces/mooncake-conversation.jsonl.gz"

func TestSmoke(t *testing.T) {
	tr, err := trace.ReadFile(conversation, 0)
	require.NoError(t, err)
	ps, err := trace.SelectPolicies("on-demand/scattered/prefix+partial")
	require.NoError(t, err)
	o := trace.Options{MaxRequests: 1500}
	want, err := trace.Run(tr, ps[0], trace.Options{Slots: 2500, MaxRequests: 1500})
	require.NoError(t, err)
	for _, cfg := range []Config{
		{Setup: DP, Pools: Shared, Routing: RoundRobin, Policy: ps[0], Slots: 2500, Options: o},
		{Setup: DP, Pools: Private, Routing: RoundRobin, Policy: ps[0], Slots: 2500, Options: o},
		{Setup: DP, Pools: Private, Routing: BySession, Policy: ps[0], Slots: 2500, Options: o},
		{Setup: TP, Pools: Shared, Policy: ps[0], Slots: 2500, Options: o},
	} {
		got, err := Run(tr, cfg)
		require.NoError(t, err)
		t.Logf("%s: hits %d (in process %d) tokens %d/%d used %.3g peak %.3g stamps %d splits %d load %v wall %v busy %v",
			cfg.Name(), got.Hits, want.Hits, got.HitTokens, got.Tokens, got.UsedMean, got.UsedPeak, got.Stamps, got.RankSplits, got.Load, got.Wall, got.Busy)
	}
}
