package l2_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// commitSize and commitPiece shape the objects of the commit tests: 5
// pieces each, on every master of 3.
const commitSize, commitPiece = 20000, 4096

// putCutShort puts objects with the breaker of one master open, so that
// the pieces on it are not written, and reports what another node's
// lookup (a tier of its own, its breakers closed) then counts: an
// object with a piece on that master and its piece 0 elsewhere must not
// be counted, since no load would find it whole.
func putCutShort(t *testing.T, bug bool) error {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	tier, r := newTier(t, c.URL(), l2.Options{Timeout: 10 * time.Second, PieceSize: commitPiece, Prefix: "pieces:", BreakerFailures: 1 << 20, Codec: macCodec(t, 1)})
	if bug {
		l2.PieceCommitBugs(tier, true, false)
	}
	ctx := context.Background()
	keys := keysN("cut-short", 8)
	master := func(k l1.ObjectKey, j int) string {
		ids, _ := r.Shards(ctx, []string{l2.PieceName("pieces:", &k, j)})
		return ids[0]
	}
	down := master(keys[0], 1)
	l2.TripServer(tier, down)
	ps, _ := payloads(keys, commitSize)
	if n := tier.PutPayloads(ctx, keys, ps); n != 0 {
		return fmt.Errorf("PutPayloads stored %d objects with a master's breaker open", n)
	}
	other := piecesTier(t, c.URL(), commitPiece, 10*time.Second)
	sizes := other.Head(ctx, keys)
	tell, counted := 0, 0
	for i, k := range keys {
		if master(k, 0) == down {
			continue // its piece 0 was not written either way
		}
		tell++
		if sizes[i] >= 0 {
			counted++
		}
	}
	fmt.Printf("put cut short: %d objects with a piece on the stopped master and piece 0 elsewhere, %d of them counted by a lookup\n", tell, counted)
	switch {
	case tell == 0:
		return fmt.Errorf("no object had its piece 0 off the stopped master: the test sees nothing")
	case counted != 0:
		return fmt.Errorf("a lookup counts %d of %d objects whose put was cut short: their piece 0 was written without the others", counted, tell)
	}
	return nil
}

// TestPiecesCommitLast: on a real cluster, a put whose pieces did not
// all go leaves no piece 0 of its own, so that no lookup counts an
// object that no load can find whole (a daemon killed mid-put, a master
// failing mid-put).
func TestPiecesCommitLast(t *testing.T) {
	if err := putCutShort(t, false); err != nil {
		t.Fatal(err)
	}
}

// pieceGone puts two objects, removes a piece other than 0 of the first
// from the store (as Redis's eviction would) and loads both: the first
// is a miss and must be forgotten (Head misses it after the load), the
// second loads byte for byte.
func pieceGone(t *testing.T, bug bool) error {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	tier := piecesTier(t, c.URL(), commitPiece, 10*time.Second)
	if bug {
		l2.PieceCommitBugs(tier, false, true)
	}
	ctx := context.Background()
	keys := keysN("gone", 2)
	ps, _ := payloads(keys, commitSize)
	if n := tier.PutPayloads(ctx, keys, ps); n != len(keys) {
		return fmt.Errorf("PutPayloads stored %d of %d", n, len(keys))
	}
	if err := c.Client().Del(ctx, l2.PieceName("pieces:", &keys[0], 3)).Err(); err != nil {
		return err
	}
	before := tier.Head(ctx, keys)
	dst, ok := loadAll(tier, keys, commitSize)
	after := tier.Head(ctx, keys)
	fmt.Printf("piece gone: lookups before the load %v, loaded %v, lookups after %v (sizes; -1 a miss)\n", before, ok, after)
	switch {
	case ok[0]:
		return fmt.Errorf("an object with a piece gone loaded")
	case !ok[1] || !bytes.Equal(dst[1], ps[1]):
		return fmt.Errorf("the object beside it did not load")
	case after[0] != -1:
		return fmt.Errorf("after a load found a piece gone, a lookup still counts the object (%d bytes)", after[0])
	case after[1] != commitSize:
		return fmt.Errorf("the whole object beside it is forgotten: %d", after[1])
	}
	return nil
}

// TestPiecesGoneForgotten: an object one of whose pieces is gone from
// the store is deleted by the load that finds it so, and no lookup
// counts it again; a piece unreachable (a master down) deletes nothing
// (TestPiecesMasterHangs: every object loads again once it is back).
func TestPiecesGoneForgotten(t *testing.T) {
	if err := pieceGone(t, false); err != nil {
		t.Fatal(err)
	}
}

// TestPiecesCommitBites: the two checks above fail against a put that
// writes piece 0 with the others and against a load that leaves an
// object with a piece gone as it is.
func TestPiecesCommitBites(t *testing.T) {
	if err := putCutShort(t, true); err == nil {
		t.Error("a put that writes piece 0 with the others passed")
	} else {
		t.Logf("caught: %v", err)
	}
	if err := pieceGone(t, true); err == nil {
		t.Error("a load that keeps an object with a piece gone passed")
	} else {
		t.Logf("caught: %v", err)
	}
}
