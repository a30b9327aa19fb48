//go:build linux

package node_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// sessionTrace: every prompt begins with block 0 (the system prompt).
//
//	r0 [0 1 2 3]      conversation A, turn 1 (3 partial)
//	r1 [0 1 2 4 5]    A, turn 2: resends 0 1 2, 3 rehashed as 4
//	r2 [0 6 7]        B, turn 1
//	r3 [0 1 2 4 8 9]  A, turn 3: begins with r1's 0 1 2 4
//	r4 [0 10]         C: shares only the system prompt
//	r5 [0 10 11]      C's 2-block first turn cannot be linked: D
//	r6 [0 6 12]       B, turn 2: r2's 0 6 is 2 blocks, enough
//	r7 [0 1 13]       shares 0 1 with A, but not A's every block but the
//	                  last: a branch, E
const sessionTrace = `{"timestamp": 0, "input_length": 2000, "output_length": 1, "hash_ids": [0, 1, 2, 3]}
{"timestamp": 1, "input_length": 2500, "output_length": 1, "hash_ids": [0, 1, 2, 4, 5]}
{"timestamp": 2, "input_length": 1500, "output_length": 1, "hash_ids": [0, 6, 7]}
{"timestamp": 3, "input_length": 3000, "output_length": 1, "hash_ids": [0, 1, 2, 4, 8, 9]}
{"timestamp": 4, "input_length": 1000, "output_length": 1, "hash_ids": [0, 10]}
{"timestamp": 5, "input_length": 1500, "output_length": 1, "hash_ids": [0, 10, 11]}
{"timestamp": 6, "input_length": 1500, "output_length": 1, "hash_ids": [0, 6, 12]}
{"timestamp": 7, "input_length": 1500, "output_length": 1, "hash_ids": [0, 1, 13]}
`

func TestSessions(t *testing.T) {
	tr, err := trace.Parse("sessions", strings.NewReader(sessionTrace), 512)
	require.NoError(t, err)
	s, n, err := node.Sessions(tr.Requests, node.MinShared)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 0, 1, 0, 2, 3, 1, 4}, s)
	require.Equal(t, 5, n)
	// With one shared block enough, the system prompt links what shares
	// nothing longer to the latest request registered at it: r4 (2
	// blocks, registered at block 0) takes r5 and r7; r6 still continues
	// B by its longer match.
	s, _, err = node.Sessions(tr.Requests, 1)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 0, 1, 0, 2, 2, 1, 2}, s)
	_, _, err = node.Sessions(tr.Requests, 0)
	require.Error(t, err)

	rt, err := node.BySession.Assign(tr.Requests, 3)
	require.NoError(t, err)
	require.Equal(t, []uint8{0, 0, 1, 0, 2, 0, 1, 1}, rt)
	rr, err := node.RoundRobin.Assign(tr.Requests, 3)
	require.NoError(t, err)
	require.Equal(t, []uint8{0, 1, 2, 0, 1, 2, 0, 1}, rr)
}

// TestSessionsNeedChainedIDs: a block that follows two different blocks
// is refused.
func TestSessionsNeedChainedIDs(t *testing.T) {
	tr, err := trace.Parse("unchained", strings.NewReader(`{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}
{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [2, 1]}
`), 512)
	require.NoError(t, err)
	_, _, err = node.Sessions(tr.Requests, node.MinShared)
	require.ErrorContains(t, err, "chained hash ids")
}

// TestSessionsOnTheTrace: the counts the package documents.
func TestSessionsOnTheTrace(t *testing.T) {
	s, n, err := node.Sessions(conversationTrace(t).Requests, node.MinShared)
	require.NoError(t, err)
	turns := make([]int, n)
	for _, c := range s {
		turns[c]++
	}
	multi, in := 0, 0
	for _, k := range turns {
		if k > 1 {
			multi++
			in += k
		}
	}
	require.Equal(t, [3]int{8057, 2012, 5986}, [3]int{n, multi, in})
}

func TestPoolsSlots(t *testing.T) {
	require.Equal(t, []int64{13}, node.Shared.Slots(13))
	require.Equal(t, []int64{2, 2, 2, 2, 2, 1, 1, 1}, node.Private.Slots(13))
	require.Equal(t, []int64{13, 13, 13, 13, 13, 13, 13, 13}, node.Replicated.Slots(13))
	require.Equal(t, "shared private replicated Pools(9)",
		strings.Join([]string{node.Shared.String(), node.Private.String(), node.Replicated.String(), node.Pools(9).String()}, " "))
	require.Equal(t, 35_979_264, node.BlockBytes)
	require.Zero(t, node.BlockBytes%4096)
}

// TestRunRefusesBadConfigs: a periodic policy, an empty pool, a DP
// replay without a routing and a routing that answers short are errors.
func TestRunRefusesBadConfigs(t *testing.T) {
	tr := conversationTrace(t)
	ps, err := trace.SelectPolicies("periodic/scattered")
	require.NoError(t, err)
	cfg := config(t, node.DP, node.Shared, node.RoundRobin)
	bad := []node.Config{cfg, cfg, cfg, cfg, cfg}
	bad[0].Policy = ps[0]
	bad[1].Slots = 0
	bad[2].Routing = node.Routing{}
	bad[3].Routing = node.Routing{Name: "short", Assign: func(r []trace.Request, _ int) ([]uint8, error) { return make([]uint8, len(r)-1), nil }}
	bad[4].Pools, bad[4].Slots = node.Private, 7
	for i, c := range bad {
		_, err := node.Run(tr, c)
		require.Error(t, err, "config %d", i)
	}
}
