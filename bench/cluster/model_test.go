//go:build linux

package cluster_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/cluster"
	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/scenario"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// The tests replay the first testRequests requests of each trace.
const (
	conversationFile = "../../testdata/traces/mooncake-conversation.jsonl.gz"
	shapeFile        = "../../testdata/scenarios/shared-prefix.shape"
	testRequests     = 3000
)

type loaded struct {
	tr  *trace.Trace
	st  *scenario.ShapeTrace
	err error
}

var (
	loadOnce sync.Once
	traces   map[string]loaded
)

func load(t *testing.T, path string) (*trace.Trace, *scenario.ShapeTrace) {
	t.Helper()
	loadOnce.Do(func() {
		traces = map[string]loaded{}
		for _, p := range []string{conversationFile, shapeFile} {
			tr, st, err := cluster.LoadTrace(p)
			traces[p] = loaded{tr, st, err}
		}
	})
	l := traces[path]
	require.NoError(t, l.err)
	return l.tr, l.st
}

func both(t *testing.T) []*trace.Trace {
	a, _ := load(t, conversationFile)
	b, _ := load(t, shapeFile)
	return []*trace.Trace{a, b}
}

func opts() trace.Options { return trace.Options{MaxRequests: testRequests} }

// slots is a node's l1 for the tests: 5 % of the distinct blocks of the
// replayed prefix's trace, small enough that every l1 evicts.
func slots(tr *trace.Trace) int64 { return int64(0.05 * float64(tr.Distinct)) }

// oneNodeMatchesIdealLRU replays one node without L2 under v and the
// ideal LRU of the same size, and reports whether they agree.
func oneNodeMatchesIdealLRU(t *testing.T, tr *trace.Trace, v cluster.Variant) bool {
	p := slots(tr)
	got, err := cluster.Run(tr, cluster.Config{Nodes: 1, L1: p, Routing: node.RoundRobin, Options: opts(), Variant: v})
	require.NoError(t, err)
	o := opts()
	o.Slots = p
	want, err := trace.RunLRU(tr, o)
	require.NoError(t, err)
	require.Equal(t, got.Hits, got.L1Hits+got.L2Hits)
	require.Equal(t, got.Places, p)
	require.LessOrEqual(t, got.Held, got.Places)
	return got.Hits == want.Hits && got.HitTokens == want.HitTokens && got.Cold == want.Cold && got.Evictions == want.Evictions
}

// TestOneNodeIsTheIdealLRU: a node with no L2 is bench/trace's ideal LRU
// of its size, on both traces, to the block: the model's l1 and the
// ideal bound it is compared with follow the same rules.
func TestOneNodeIsTheIdealLRU(t *testing.T) {
	for _, tr := range both(t) {
		require.True(t, oneNodeMatchesIdealLRU(t, tr, cluster.Variant{}), tr.Name)
	}
}

// TestOneNodeIsTheIdealLRUBites: a node that does not refresh a hit's
// recency is not the ideal LRU.
func TestOneNodeIsTheIdealLRUBites(t *testing.T) {
	tr, _ := load(t, conversationFile)
	require.False(t, oneNodeMatchesIdealLRU(t, tr, clusterNoTouch))
}

// unboundedL2Gap replays 4 nodes routed round-robin over an L2 that holds
// every block, write-through, and returns the ideal unbounded LRU's hit
// rate minus theirs: every block a node finished is in L2 for all.
func unboundedL2Gap(t *testing.T, tr *trace.Trace, v cluster.Variant) (float64, *cluster.Result) {
	p := slots(tr)
	got, err := cluster.Run(tr, cluster.Config{Nodes: 4, L1: p, L2: int64(tr.Distinct), Write: cluster.WriteThrough,
		Routing: node.RoundRobin, Options: opts(), Variant: v})
	require.NoError(t, err)
	o := opts()
	o.Slots = int64(tr.Distinct)
	want, err := trace.RunLRU(tr, o)
	require.NoError(t, err)
	return want.HitRate() - got.HitRate(), got
}

// TestUnboundedL2SharesEverything: with an L2 that never evicts, nodes
// routed round-robin hit what one unbounded cache hits, but for a block
// that a node is computing while another has finished it (then the node's
// own write hides L2's copy): within 0.2 pp; and write-through puts
// exactly the blocks the nodes finished.
func TestUnboundedL2SharesEverything(t *testing.T) {
	for _, tr := range both(t) {
		gap, r := unboundedL2Gap(t, tr, cluster.Variant{})
		require.InDelta(t, 0, gap, 0.002, tr.Name)
		require.Equal(t, r.Stored, r.Puts, tr.Name)
		require.Zero(t, r.L2Evictions)
		// L2 never evicts, so the cluster holds every block put (a block
		// two nodes computed at once is put twice).
		require.LessOrEqual(t, r.Held, r.Puts)
		require.GreaterOrEqual(t, r.Held, r.Puts-r.Puts/100)
	}
}

// TestUnboundedL2SharesEverythingBites: dropped puts show, as a gap and in
// the count of puts.
func TestUnboundedL2SharesEverythingBites(t *testing.T) {
	tr, _ := load(t, conversationFile)
	gap, r := unboundedL2Gap(t, tr, clusterDropsPuts)
	require.Greater(t, gap, 0.002)
	require.Less(t, r.Puts, r.Stored)
}

// TestWriteBackPutsOnlyWhatANodeEvicts: under write-back, an l1 that never
// evicts puts nothing and L2 serves nothing; one that does puts at most
// its evictions.
func TestWriteBackPutsOnlyWhatANodeEvicts(t *testing.T) {
	tr, _ := load(t, shapeFile)
	big, err := cluster.Run(tr, cluster.Config{Nodes: 2, L1: int64(tr.Distinct), L2: 100, Write: cluster.WriteBack, Routing: node.RoundRobin, Options: opts()})
	require.NoError(t, err)
	require.Zero(t, big.Puts)
	require.Zero(t, big.L2Hits)
	small, err := cluster.Run(tr, cluster.Config{Nodes: 2, L1: slots(tr), L2: slots(tr), Write: cluster.WriteBack, Routing: node.RoundRobin, Options: opts()})
	require.NoError(t, err)
	require.Positive(t, small.Puts)
	require.LessOrEqual(t, small.Puts, int64(small.Evictions))
	require.Positive(t, small.L2Hits)
}

// TestModelIsDeterministic: two replays of one configuration agree on
// everything but the wall times.
func TestModelIsDeterministic(t *testing.T) {
	tr, _ := load(t, shapeFile)
	cfg := cluster.Config{Nodes: 4, L1: slots(tr), L2: slots(tr), Write: cluster.WriteThrough, Routing: node.BySession, Options: opts()}
	a, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	b, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	require.Equal(t, a.Outcome(), b.Outcome())
	require.Equal(t, [4]int64{a.L1Hits, a.L2Hits, a.Puts, a.L2Evictions}, [4]int64{b.L1Hits, b.L2Hits, b.Puts, b.L2Evictions})
	require.Equal(t, a.Load, b.Load)
}

// TestRunRejects: a configuration out of range is an ErrConfig.
func TestRunRejects(t *testing.T) {
	tr, _ := load(t, conversationFile)
	for _, c := range []cluster.Config{
		{Nodes: 0, L1: 10, Routing: node.RoundRobin},
		{Nodes: 257, L1: 10, Routing: node.RoundRobin},
		{Nodes: 2, L1: 0, Routing: node.RoundRobin},
		{Nodes: 2, L1: 10, L2: -1, Routing: node.RoundRobin},
		{Nodes: 2, L1: 10, Write: 9, Routing: node.RoundRobin},
		{Nodes: 2, L1: 10},
	} {
		_, err := cluster.Run(tr, c)
		require.True(t, errors.Is(err, cluster.ErrConfig), "%+v: %v", c, err)
	}
}

// TestSessionsRecoverTheShapesConversations: routing by conversation
// (bench/node's Sessions rule, from the hash ids alone) finds exactly the
// conversations the shape generated, so the shape's cross-node sharing
// under that routing is sharing between conversations, not a split
// conversation.
func TestSessionsRecoverTheShapesConversations(t *testing.T) {
	tr, st := load(t, shapeFile)
	got, n, err := node.Sessions(tr.Requests, node.MinShared)
	require.NoError(t, err)
	require.Equal(t, st.Conversations, n)
	require.Equal(t, st.Conversation, got)
}

// TestSessionsRecoverTheShapesConversationsBites: with first turns of at
// most one block, a conversation's first prompt but its last block is its
// shared segments alone, and the rule merges conversations that share
// them.
func TestSessionsRecoverTheShapesConversationsBites(t *testing.T) {
	s, err := scenario.ParseShapeFile(shapeFile)
	require.NoError(t, err)
	s.First = scenario.Range{Lo: 100, Hi: 500}
	s.Span /= 6
	var buf bytes.Buffer
	st, err := s.Generate(&buf)
	require.NoError(t, err)
	tr, err := trace.Parse("short-first", &buf, 512)
	require.NoError(t, err)
	got, n, err := node.Sessions(tr.Requests, node.MinShared)
	require.NoError(t, err)
	require.Less(t, n, st.Conversations)
	require.NotEqual(t, st.Conversation, got)
}

// TestTouchRefreshesL2: with Touch, l1 hits refresh L2 (counted), which
// changes what L2 evicts; without it nothing is touched.
func TestTouchRefreshesL2(t *testing.T) {
	tr, _ := load(t, shapeFile)
	cfg := cluster.Config{Nodes: 2, L1: slots(tr), L2: slots(tr) / 4, Write: cluster.WriteThrough, Routing: node.RoundRobin, Options: opts()}
	plain, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	require.Zero(t, plain.Touches)
	cfg.Touch = true
	touched, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	require.Positive(t, touched.Touches)
	require.LessOrEqual(t, touched.Touches, touched.L1Hits)
	require.NotEqual(t, plain.L2Hits, touched.L2Hits)
}
