package l2

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestPieceRoutesDoNotWaitForALoad: with the slot map stale and the only
// node that could answer CLUSTER SLOTS hung (a listener that accepts and
// never answers), routes returns the old map at once, while its caller's
// deadline is still ahead. Before, routes loaded the map itself under
// the piece path's lock: every call, to any master, waited for a hung
// node's answer until its own deadline, which then tripped a healthy
// master's breaker (TestL2HungMasterPiecesVsWhole saw the breakers of
// all three masters open with one hung).
func TestPieceRoutesDoNotWaitForALoad(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never answered
		}
	}()
	// The client waits for the hung node as long as its caller lets it:
	// the context's deadline, no timeout of its own before it.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{ln.Addr().String()}, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer cc.Close()
	n := newPieceNet(cc, pieceAuth{}, time.Second, 1, 1<<20)
	old := make([]*respPool, numSlots)
	for i := range old {
		old[i] = &respPool{addr: "old"}
	}
	n.route, n.stale, n.loaded = old, true, time.Now().Add(-time.Minute)

	const wait = 10 * time.Second
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		t0 := time.Now()
		r, err := n.routes(ctx)
		took := time.Since(t0)
		alive := ctx.Err() == nil
		cancel()
		if err != nil || len(r) != numSlots || r[0] != old[0] {
			t.Fatalf("routes with the map stale and its node hung: %d slots, %v", len(r), err)
		}
		if !alive {
			t.Fatalf("routes waited out its caller's deadline (%v) for the hung node's slot map (took %v)", wait, took)
		}
	}
}
