//go:build linux

package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// deadlineProbe is a PayloadStore that notes, for each send, when it was
// asked and the deadline of its context, then sends through the tier.
type deadlineProbe struct {
	*l2.Tier
	mu    sync.Mutex
	calls []probeCall
}

type probeCall struct {
	entry    time.Time
	deadline time.Time
	ok       bool
}

func (p *deadlineProbe) PutPayloads(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int {
	c := probeCall{entry: time.Now()}
	c.deadline, c.ok = ctx.Deadline()
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	return p.Tier.PutPayloads(ctx, keys, payloads)
}

// TestL2CopyCutBeforeItsLockLapses: a copy that sends from the pool under
// its read lock is given a deadline before that lock could lapse, so
// that a slow send never reads a block another writer may have been
// given. The read TTL here (30 s) is long enough that every copy of the
// test completes; what is checked is the deadline each send was given,
// not how long it took.
func TestL2CopyCutBeforeItsLockLapses(t *testing.T) {
	const readTTL = 30 * time.Second
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	r, err := l2.NewRedis(context.Background(), srv.URL(), l2.RedisOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The tier's own timeout is past the read TTL, as a store that is not
	// kvallocd's (whose -l2-timeout is at most 5 s) may have.
	tier, err := l2.NewTier(r, l2.Options{Timeout: time.Minute, PieceSize: l2.DefaultPieceSize})
	if err != nil {
		t.Fatal(err)
	}
	probe := &deadlineProbe{Tier: tier}
	s := start(t, server.Config{L1: l1.Config{ReadTTL: readTTL}, L2: server.L2Config{Store: probe, Workers: 1, Batch: 1}})
	n := &l2Node{s: s, c: dial(t, s), tier: tier}
	keys := l2keys("copy-deadline", 4)
	n.write(t, keys, faultSize, 700)
	n.waitPuts(t, uint64(len(keys)))
	check(t, s)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	fmt.Printf("copy deadlines: %d sends, read TTL %v\n", len(probe.calls), readTTL)
	if len(probe.calls) == 0 {
		t.Fatal("no copy went through PutPayloads: the test sees nothing")
	}
	for i, c := range probe.calls {
		switch {
		case !c.ok:
			t.Errorf("send %d had no deadline: a send slower than the read TTL (%v) would read blocks no lock holds", i, readTTL)
		case !c.deadline.Before(c.entry.Add(readTTL)):
			t.Errorf("send %d's deadline is %v after it began, not before its lock could lapse (read TTL %v)", i, c.deadline.Sub(c.entry), readTTL)
		}
	}
}
