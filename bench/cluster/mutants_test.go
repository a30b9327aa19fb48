//go:build linux

package cluster_test

import "github.com/kvalloc/kvalloc/bench/cluster"

// Broken variants of the cluster model, one per check of its tests. They
// live beside the model they break, so that internal/reference imports
// nothing of bench.
var (
	// clusterNoTouch leaves an l1 hit's recency alone, as a cache that
	// orders blocks by when they were written and not by when they were
	// read: a node with no L2 is then no longer the ideal LRU.
	clusterNoTouch = cluster.Variant{NoTouch: true}

	// clusterDropsPuts loses every put of an even block, as a write path
	// that drops puts silently (a full queue not counted, a failed SET
	// ignored): L2 then lacks blocks the nodes finished.
	clusterDropsPuts = cluster.Variant{DropPut: func(b int32) bool { return b%2 == 0 }}
)
