//go:build linux

package cluster_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/cluster"
	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/trace"
)

func smallPlan() cluster.Plan {
	p := cluster.DefaultPlan()
	p.Nodes, p.Q = []int{2}, []float64{1}
	p.Options = opts()
	return p
}

// TestSweepWritesTablesAndAVerdict: a small sweep fills every cell, its
// report names every policy and routing, and the verdict recommends the
// policy with the best mean.
func TestSweepWritesTablesAndAVerdict(t *testing.T) {
	tr, _ := load(t, shapeFile)
	rep, err := cluster.Sweep(tr, smallPlan())
	require.NoError(t, err)
	require.Len(t, rep.Cells, 2)
	for _, c := range rep.Cells {
		require.NotNil(t, c.Isolated)
		require.NotNil(t, c.Ideal)
		require.Equal(t, c.Nodes*int(rep.L1)+int(c.L2), int(c.Ideal.Slots))
		for _, x := range c.Tiered {
			require.NotNil(t, x)
			require.GreaterOrEqual(t, x.Hits, c.Isolated.Hits-c.Isolated.Hits/50, "an L2 loses no more than 2 %% of the hits")
		}
	}
	v := cluster.Judge([]*cluster.Report{rep})
	for w := range v.Mean {
		require.LessOrEqual(t, v.Mean[w], v.Mean[indexOf(rep.Plan.Writes, v.Recommend)])
	}
	var buf bytes.Buffer
	require.NoError(t, cluster.Write(&buf, []*cluster.Report{rep}, false))
	for _, s := range []string{"write-through", "write-back", "write-both", "round-robin", "session", "ideal: hit", "Recommended default"} {
		require.Contains(t, buf.String(), s)
	}
}

func indexOf(ws []cluster.WritePolicy, w cluster.WritePolicy) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
}

// TestAgree: a sweep agrees with itself, and not with one whose hit rate
// is moved past the tolerance.
func TestAgree(t *testing.T) {
	tr, _ := load(t, conversationFile)
	p := smallPlan()
	model, err := cluster.Sweep(tr, p)
	require.NoError(t, err)
	require.NoError(t, cluster.Agree(model, model, cluster.DefaultTolerance))
	// A replay that loses every fifth L2 hit: the daemons' replay as
	// Plan.Replay would run it, broken.
	p.Replay = func(tr *trace.Trace, c cluster.Config) (*cluster.Result, error) {
		r, err := cluster.Run(tr, c)
		if err == nil {
			r.Hits -= r.Refs / 20
		}
		return r, err
	}
	got, err := cluster.Sweep(tr, p)
	require.NoError(t, err)
	err = cluster.Agree(model, got, cluster.DefaultTolerance)
	require.True(t, errors.Is(err, cluster.ErrDisagree), "%v", err)
	require.Contains(t, err.Error(), "isolated")
	require.Equal(t, 1+len(p.Writes), strings.Count(err.Error(), "tolerance")/len(p.Routings))
}

// TestBreakEven: the break-even bandwidth is the KV bytes per token times
// the prefill rate (Kimi K2: 70,272 B × 10,000 tokens/s = 0.70 GB/s), and
// the table says no below it and yes above.
func TestBreakEven(t *testing.T) {
	require.InDelta(t, 702.72e6, cluster.BreakEven(node.TokenBytes, 10000), 1)
	k2 := []cluster.KVModel{cluster.KVModels[0]}
	bws := []cluster.Bandwidth{{ValueBytes: 1 << 20, Get: 0.6e9, Set: 1}, {ValueBytes: 64 << 10, Get: 0.8e9, Set: 1}}
	tab := cluster.BreakEvenTable(bws, k2, 512, 10000)
	require.Len(t, tab.Rows, 2)
	require.Equal(t, "no", tab.Rows[0][len(tab.Rows[0])-1])
	require.Equal(t, "yes", tab.Rows[1][len(tab.Rows[1])-1])
}

// TestMeasureRedis measures one small value size through a real
// redis-server; without one it fails, naming make redis.
func TestMeasureRedis(t *testing.T) {
	bws, err := cluster.MeasureRedis(t.Context(), []int64{16 << 10}, 2, 4<<20)
	require.NoError(t, err)
	require.Len(t, bws, 1)
	require.Positive(t, bws[0].Get)
	require.Positive(t, bws[0].Set)
}

// TestDaemonTableFlagsDisagreement: a row beyond the tolerance says NO.
func TestDaemonTableFlagsDisagreement(t *testing.T) {
	tr, _ := load(t, conversationFile)
	cfg := cluster.Config{Nodes: 2, L1: slots(tr), Routing: node.RoundRobin, Options: opts()}
	m, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	far := *m
	far.Hits += far.Refs / 10
	tab := cluster.DaemonTable([]cluster.DaemonRow{{Model: m, Daemons: m}, {Model: m, Daemons: &far}}, cluster.DefaultTolerance)
	require.Equal(t, "yes", tab.Rows[0][6])
	require.Equal(t, "NO", tab.Rows[1][6])
	require.Equal(t, tr.Name, tab.Rows[0][0])
}

// TestMeasureTier measures one small value size through the l2 package
// over a real Redis Cluster, as whole values and in pieces; without Redis
// it fails, naming make redis.
func TestMeasureTier(t *testing.T) {
	for _, piece := range []int64{0, 16 << 10} {
		bws, err := cluster.MeasureTier(t.Context(), []int64{64 << 10}, 8, 2<<20, piece)
		require.NoError(t, err)
		require.Len(t, bws, 1)
		require.Positive(t, bws[0].Get)
		require.Positive(t, bws[0].Set)
		require.Equal(t, cluster.TierSourceOf(piece), bws[0].Source)
	}
	require.Equal(t, cluster.TierSource, cluster.TierSourceOf(0))
}
