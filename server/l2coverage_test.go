//go:build linux

package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// deadMaster writes whole values over a cluster of 3 masters without
// replicas (run with Redis's cluster-require-full-coverage default when
// fullCoverage), SIGKILLs one master, waits until every live node has
// flagged it failed (what turns a cluster of full coverage down), and
// then probes the keys of the live masters until each has been served or
// patience has run out. It returns how many of those keys were served
// (every byte checked), and how many there are.
func deadMaster(t *testing.T, fullCoverage bool, patience time.Duration) (served, live int) {
	t.Helper()
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1, NodeTimeout: time.Second, FullCoverage: fullCoverage})
	ctx := context.Background()
	opts := l2.Options{Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 300 * time.Millisecond}
	w, r := startL2Node(t, c.URL(), opts, server.Config{}), startL2Node(t, c.URL(), opts, server.Config{})
	keys := l2keys(fmt.Sprintf("dead-master-%v", fullCoverage), formatKeys)
	const seed = 700
	w.write(t, keys, formatSize, seed)
	w.waitPuts(t, formatKeys)
	if !inL2(ctx, r.tier, keys, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", w.tier.Stats())
	}

	victim := firstMaster(t, c)
	_, others := onMaster(t, c, keys, victim.Addr())
	index := map[string]int{}
	for i := range keys {
		index[keys[i].ChunkHash] = i
	}
	var onLive []int // indexes of the keys whose master lives
	for _, k := range others {
		onLive = append(onLive, index[k.ChunkHash])
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	// With full coverage the live nodes then say the cluster is down;
	// without, that it is up: the probes start from either state settled.
	state := "ok"
	if fullCoverage {
		state = "fail"
	}
	waitFlaggedFailed(t, c, victim, state)

	deadline := time.Now().Add(patience)
	pending := slices.Clone(onLive)
	for len(pending) > 0 && time.Now().Before(deadline) {
		left := pending[:0]
		for _, i := range pending {
			k := keys[i : i+1]
			lk, err := r.c.Lookup(k, true)
			if err != nil {
				t.Fatalf("a lookup failed: %v", err)
			}
			if lk.L1+lk.L2 == 1 && r.readPrefix(t, k, formatSize, seed+i, 2*time.Second) == 1 {
				continue
			}
			left = append(left, i)
		}
		pending = left
		time.Sleep(20 * time.Millisecond)
	}
	check(t, w.s)
	check(t, r.s)
	return len(onLive) - len(pending), len(onLive)
}

// waitFlaggedFailed waits until every running node flags victim failed
// (FAIL, not the doubt of PFAIL) in CLUSTER NODES and says cluster_state
// state in CLUSTER INFO.
func waitFlaggedFailed(t *testing.T, c *rediscluster.Cluster, victim *rediscluster.Node, state string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		all := true
		for _, n := range c.Nodes {
			if n == victim || !n.Running() {
				continue
			}
			cl := n.Client()
			s, err := cl.ClusterNodes(context.Background()).Result()
			info, ierr := cl.ClusterInfo(context.Background()).Result()
			cl.Close()
			all = all && err == nil && flaggedFailed(s, victim.Addr()) &&
				ierr == nil && strings.Contains(info, "cluster_state:"+state+"\r\n")
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live nodes did not flag %s failed and say cluster_state:%s in 60 s", victim.Addr(), state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flaggedFailed reports whether CLUSTER NODES output s flags addr's node
// "fail".
func flaggedFailed(s, addr string) bool {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.HasPrefix(f[1], addr+"@") {
			return slices.Contains(strings.Split(f[2], ","), "fail")
		}
	}
	return false
}

// TestL2DeadMasterLeavesTheOthersServing: a master of a cluster without
// replicas is SIGKILLed and flagged failed; the keys of whole values on
// the live masters are still served, every byte the writer's, and the
// ledgers agree. Redis's default, cluster-require-full-coverage yes,
// would refuse them all until the dead master's slots are served again
// (TestL2DeadMasterFullCoverageBites): an L2 cluster runs with
// cluster-require-full-coverage no, as docs/OPERATING.md says and the
// daemon warns (l2.CoverageWarnings).
func TestL2DeadMasterLeavesTheOthersServing(t *testing.T) {
	served, live := deadMaster(t, false, 30*time.Second)
	if served != live {
		t.Fatalf("%d of the %d keys on the live masters served in 30 s after a master was flagged failed", served, live)
	}
	fmt.Printf("dead master, cluster-require-full-coverage no: %d of %d keys of the live masters served\n", served, live)
}

// TestL2DeadMasterFullCoverageBites: with Redis's default
// cluster-require-full-coverage yes, the same probes serve none of the
// live masters' keys (every node answers CLUSTERDOWN): the check of
// TestL2DeadMasterLeavesTheOthersServing fails on such a cluster.
func TestL2DeadMasterFullCoverageBites(t *testing.T) {
	served, live := deadMaster(t, true, 3*time.Second)
	if served != 0 {
		t.Fatalf("%d of the %d keys on the live masters served with cluster-require-full-coverage yes: the check does not bite", served, live)
	}
	fmt.Printf("dead master, cluster-require-full-coverage yes: %d of %d keys of the live masters served\n", served, live)
}
