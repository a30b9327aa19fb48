package trace

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// conversation is the committed Mooncake trace.
const conversation = "../../testdata/traces/mooncake-conversation.jsonl.gz"

// TestConversationTrace replays the first part of the real trace at one
// pool size under every policy and both bounds, and checks what must hold
// whatever the numbers: every miss is classified, Belady hits at least as
// much as anything else, every l1 reservation is accounted for, and
// on-demand eviction with scattered placement stays within 1 pp of the
// ideal LRU (it differs by the slots that in-flight writes take and the
// locked blocks it may not evict).
func TestConversationTrace(t *testing.T) {
	tr, err := ReadFile(conversation, 0)
	require.NoError(t, err)
	require.Len(t, tr.Requests, 12031)
	require.Equal(t, 182790, tr.Distinct)
	require.EqualValues(t, 288500, tr.Refs)

	o := Options{MaxRequests: 2000}
	tables, err := Sweep(tr, []Pool{{Fraction: 0.02}}, Policies, o, 2, 2)
	require.NoError(t, err)
	tab := tables[0]
	require.EqualValues(t, 3655, tab.Slots)
	for _, r := range tab.Rows() {
		require.Equal(t, 2000, r.Requests, r.Policy)
		require.Equal(t, r.Refs-r.Hits, r.Cold+r.EvictPrefill+r.Orphans, r.Policy)
		require.GreaterOrEqual(t, tab.Belady.Hits, r.Hits, r.Policy)
		require.Positive(t, r.Hits, r.Policy)
	}
	require.Positive(t, tab.LRU.EvictPrefill)
	for _, r := range tab.Policies {
		require.Zero(t, r.Lost, r.Policy)
		require.Equal(t, r.Granted, r.Stored, r.Policy)
		require.Equal(t, r.Requested, r.Granted+r.OOMKeys, r.Policy)
		require.Positive(t, r.Evictions, r.Policy)
	}
	od := tab.Policies[0]
	require.Equal(t, "on-demand/scattered", od.Policy)
	require.InDelta(t, tab.LRU.HitRate(), od.HitRate(), 0.01)
}
