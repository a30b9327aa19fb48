//go:build linux

package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// TestHoldSetSpareBounded: once a huge batch's holds are all gone, the
// set keeps no more than spareHashes of its chunk hashes and spareHolds
// entries for the next run, while a batch within them is kept and reused.
func TestHoldSetSpareBounded(t *testing.T) {
	batch := func(n, hashLen int, lease0 l1.Lease) ([]l1.ObjectKey, []l1.Result) {
		ks, rs := make([]l1.ObjectKey, n), make([]l1.Result, n)
		for i := range ks {
			ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%08d", i) + strings.Repeat("h", hashLen-8), Model: "m"}
			rs[i].Lease = lease0 + l1.Lease(i)
		}
		return ks, rs
	}
	var s holdSet
	ks, rs := batch(4000, 4096, 1) // 16 MiB of hashes
	s.addAll(ks, rs, 1)
	for _, r := range rs {
		s.drop(r.Lease)
	}
	if s.len() != 0 || cap(s.spare.hashes) > spareHashes || cap(s.spare.h) > spareHolds {
		t.Fatalf("after a 16 MiB batch: %d held, spare of %d hash bytes and %d entries", s.len(), cap(s.spare.hashes), cap(s.spare.h))
	}
	ks, rs = batch(5700, 32, 10000)
	s.addAll(ks, rs, 1)
	for _, r := range rs {
		s.drop(r.Lease)
	}
	if cap(s.spare.hashes) < 5700*32 || cap(s.spare.h) < 5700 {
		t.Fatalf("a 5700-key run's slices were not kept: %d hash bytes, %d entries", cap(s.spare.hashes), cap(s.spare.h))
	}
}
