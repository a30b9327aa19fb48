//go:build linux

package cluster_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/cluster"
	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// daemonRequests is the prefix the daemons replay under the race
// detector.
const daemonRequests = 1500

// TestDaemonsAgreeWithTheModel: isolated nodes through real kvallocd
// daemons and clients (lookup, the prefix read that waits, every byte of
// every hit checked) hit what the in-process model hits, within the
// tolerance, on both traces and both routings; every block stored and
// every lock released.
func TestDaemonsAgreeWithTheModel(t *testing.T) {
	for _, tr := range both(t) {
		for _, rt := range node.Routings {
			cfg := cluster.Config{Nodes: 2, L1: slots(tr), Routing: rt, Options: trace.Options{MaxRequests: daemonRequests}}
			model, err := cluster.Run(tr, cfg)
			require.NoError(t, err)
			got, err := cluster.RunDaemons(tr, cfg)
			require.NoError(t, err, "%s %s", tr.Name, rt.Name)
			require.Zero(t, got.Lost)
			require.Zero(t, got.L2Hits)
			require.Equal(t, got.Hits, got.L1Hits)
			require.Equal(t, model.Load, got.Load)
			require.NoError(t, cluster.AgreeResult(model, got, cluster.DefaultTolerance), "%s %s", tr.Name, rt.Name)
			t.Logf("%s %s: model %.2f%%, daemons %.2f%%", tr.Name, rt.Name, 100*model.HitRate(), 100*got.HitRate())
		}
	}
}

// TestDaemonsAgreeBites: a model with twice the l1 is not what the
// daemons hit.
func TestDaemonsAgreeBites(t *testing.T) {
	tr, _ := load(t, conversationFile)
	cfg := cluster.Config{Nodes: 2, L1: slots(tr), Routing: node.BySession, Options: trace.Options{MaxRequests: daemonRequests}}
	got, err := cluster.RunDaemons(tr, cfg)
	require.NoError(t, err)
	cfg.L1 *= 4
	model, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	require.True(t, errors.Is(cluster.AgreeResult(model, got, cluster.DefaultTolerance), cluster.ErrDisagree))
}

// TestDaemonsRefuseWriteBack: kvallocd writes through only; a write-back
// configuration is refused, not replayed as write-through.
func TestDaemonsRefuseWriteBack(t *testing.T) {
	tr, _ := load(t, conversationFile)
	for _, w := range []cluster.WritePolicy{cluster.WriteBack, cluster.WriteBoth} {
		_, err := cluster.RunDaemons(tr, cluster.Config{Nodes: 2, L1: 10, L2: 10, Write: w, Routing: node.RoundRobin})
		require.True(t, errors.Is(err, cluster.ErrDaemonL2), "%v", err)
	}
}

// TestDaemonsWithL2AgreeWithTheModel: nodes through real daemons over a
// real Redis Cluster (write-through, every byte of every hit checked,
// whether from the node's l1 or loaded from L2) read no wrong byte, L2
// serves hits, Redis holds about Q values, and the hit rate lies in the
// model's band: between random eviction in L2 (what allkeys-lru's
// one-second clock makes of a replay of an hour in seconds) and exact
// LRU; with an L2 that never evicts, the band is one point.
func TestDaemonsWithL2AgreeWithTheModel(t *testing.T) {
	tr, _ := load(t, shapeFile)
	p := slots(tr)
	for _, q := range []int64{p, 4 * p} {
		cfg := cluster.Config{Nodes: 2, L1: p, L2: q, Write: cluster.WriteThrough, Routing: node.RoundRobin, Options: trace.Options{MaxRequests: daemonRequests}}
		hi, err := cluster.Run(tr, cfg)
		require.NoError(t, err)
		cfg.L2Evict = cluster.RandomEvict
		lo, err := cluster.Run(tr, cfg)
		require.NoError(t, err)
		cfg.L2Evict = cluster.ExactLRU
		got, err := cluster.RunDaemons(tr, cfg)
		require.NoError(t, err)
		t.Logf("Q=%d: model %.2f%% random, %.2f%% exact; daemons %.2f%% (L2 hits %d, puts %d, drops %d, unsettled %d, Redis holds %d values)",
			q, 100*lo.HitRate(), 100*hi.HitRate(), 100*got.HitRate(), got.L2Hits, got.Puts, got.Drops, got.Unsettled, got.L2Keys)
		require.Positive(t, got.L2Hits)
		require.Zero(t, got.Lost)
		require.InDelta(t, float64(min(q, hi.Stored)), float64(got.L2Keys), float64(q)/20)
		require.NoError(t, cluster.AgreeBand(lo, hi, got, cluster.BandTolerance))
	}
}

// TestDaemonsWithL2AgreeBites: daemons with an L2 of Q are outside the
// band of a model whose L2 is Q/4.
func TestDaemonsWithL2AgreeBites(t *testing.T) {
	tr, _ := load(t, shapeFile)
	p := slots(tr)
	cfg := cluster.Config{Nodes: 2, L1: p, L2: p, Write: cluster.WriteThrough, Routing: node.RoundRobin, Options: trace.Options{MaxRequests: daemonRequests}}
	got, err := cluster.RunDaemons(tr, cfg)
	require.NoError(t, err)
	cfg.L2 = p / 4
	hi, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	cfg.L2Evict = cluster.RandomEvict
	lo, err := cluster.Run(tr, cfg)
	require.NoError(t, err)
	require.True(t, errors.Is(cluster.AgreeBand(lo, hi, got, cluster.BandTolerance), cluster.ErrDisagree))
}
