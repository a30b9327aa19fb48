//go:build linux

package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// The format tests' objects: 32 pieces each, as an 8 MiB object is in
// kvallocd's default pieces of 256 KiB, so that every object has pieces
// on every master of 3.
const (
	formatSize  = 128 << 10
	formatPiece = 4 << 10
	formatKeys  = 24
)

// formatPair is one L2 format's writer and reader daemons over a
// cluster, and the keys the writer put.
type formatPair struct {
	name string
	w, r *l2Node
	keys []l1.ObjectKey
	seed int
	// The reader's rounds (probe): per-key lookups, those that counted
	// an L2 hit, and those whose prefetch served the key, every byte
	// checked.
	lookups, counted, served int
	// firstWhole is when a round first served every key.
	firstWhole time.Time
}

// startFormats starts, for pieces and for whole values, a writer and a
// reader over url with opts, and has each writer put the same keys,
// stamped alike; it returns once every key is in L2 in both formats.
func startFormats(t *testing.T, url string, opts l2.Options, tag string) []*formatPair {
	t.Helper()
	keys := l2keys(tag, formatKeys)
	var fs []*formatPair
	for _, f := range []struct {
		name  string
		piece int64
	}{{"pieces", formatPiece}, {"whole", 0}} {
		o := opts
		o.PieceSize = f.piece
		p := &formatPair{name: f.name, w: startL2Node(t, url, o, server.Config{}), r: startL2Node(t, url, o, server.Config{}), keys: keys, seed: 500}
		p.w.write(t, keys, formatSize, p.seed)
		p.w.waitPuts(t, formatKeys)
		if !inL2(context.Background(), p.r.tier, keys, 20*time.Second) {
			t.Fatalf("%s: the keys did not reach L2: %+v", f.name, p.w.tier.Stats())
		}
		fs = append(fs, p)
	}
	return fs
}

// probe looks each key up alone through the reader, with prefetch, and
// reads what the lookup counted, checking every byte (readPrefix fails
// the test on a wrong one); it releases and deletes what it read from
// L1, so that the next probe loads it from L2 again, and returns how
// many keys it served.
func (p *formatPair) probe(t *testing.T) int {
	t.Helper()
	served := 0
	for i := range p.keys {
		k := p.keys[i : i+1]
		lk, err := p.r.c.Lookup(k, true)
		if err != nil {
			t.Fatalf("%s: a lookup failed: %v", p.name, err)
		}
		p.lookups++
		if lk.L1+lk.L2 == 0 {
			continue
		}
		p.counted += int(lk.L2)
		if p.r.readPrefix(t, k, formatSize, p.seed+i, 10*time.Second) == 1 {
			served++
			allOK(t, "Delete")(p.r.c.Delete(k, false))
		}
	}
	p.served += served
	if served == len(p.keys) && p.firstWhole.IsZero() {
		p.firstWhole = time.Now()
	}
	return served
}

// reset forgets the probes' counts.
func (p *formatPair) reset() { p.lookups, p.counted, p.served, p.firstWhole = 0, 0, 0, time.Time{} }

// share formats a fraction of n over of as a percentage.
func share(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %% (%d of %d)", 100*float64(n)/float64(of), n, of)
}

// TestL2FailoverPiecesVsWhole: the same keys stored as pieces (32 an
// object, on every master) and as whole values, each format's reader
// probing every key, by turns, while one master of a real Redis Cluster
// (3 masters, 3 replicas) is SIGKILLed and its replica promoted. It
// prints, for each format, the share of lookups that counted an L2 hit
// and of prefetches that served their key from the kill until both
// formats serve every key again, the time to that, and the time until a
// fresh batch is whole in L2 again. An object in pieces needs every
// master, so every object misses until the promotion where whole
// values lose the dead master's third; the test asserts only what holds
// at any load: every byte served is the writer's, both formats serve
// every key and store a fresh batch again, nothing is counted corrupt
// or forged, the ledgers agree.
func TestL2FailoverPiecesVsWhole(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{NodeTimeout: time.Second})
	opts := l2.Options{Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 300 * time.Millisecond}
	fs := startFormats(t, c.URL(), opts, "fmt-kill")
	ctx := context.Background()
	masters, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := masters[0]
	for _, m := range masters {
		waitReplicated(t, m)
	}
	replica := replicaOf(t, c, victim)
	rc := replica.Client()
	defer rc.Close()
	for _, p := range fs {
		if n := p.probe(t); n != formatKeys {
			t.Fatalf("%s: before the kill, %d of %d keys served (%+v)", p.name, n, formatKeys, p.r.tier.Stats())
		}
		p.reset()
	}

	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	isMaster := func() bool {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		info, err := rc.Info(qctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	}
	var promoted time.Time
	rounds := 0
	for fs[0].firstWhole.IsZero() || fs[1].firstWhole.IsZero() {
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("%v after the kill: pieces whole again %v, whole values %v (promoted %v after the kill)",
				time.Since(killed), !fs[0].firstWhole.IsZero(), !fs[1].firstWhole.IsZero(), promoted.Sub(killed))
		}
		if promoted.IsZero() && isMaster() {
			promoted = time.Now()
		}
		for _, p := range fs {
			p.probe(t)
		}
		rounds++
	}
	if promoted.IsZero() {
		promoted = time.Now() // promoted since the last look: an upper bound
	}
	// Puts: each writer writes fresh batches until one is whole in L2.
	putsBack := make([]time.Duration, len(fs))
	for i, p := range fs {
		for b := 0; ; b++ {
			if time.Since(killed) > 90*time.Second {
				t.Fatalf("%s: puts after the failover did not reach L2: %+v", p.name, p.w.tier.Stats())
			}
			fresh := l2keys(fmt.Sprintf("fmt-kill-%s-fresh%d", p.name, b), formatKeys)
			p.w.write(t, fresh, formatSize, 900)
			if inL2(ctx, p.r.tier, fresh, 200*time.Millisecond) {
				putsBack[i] = time.Since(killed)
				break
			}
		}
	}
	for i, p := range fs {
		s := p.r.tier.Stats()
		fmt.Printf("failover, %s: from the kill until both formats serve every key (%d rounds of %d keys): lookups counted %s, "+
			"prefetches served %s; every key served again %v after the kill (promoted %v after it); a fresh batch whole in L2 %v after it; "+
			"reader: partial misses %d, errors %d, timeouts %d, skipped %d, breaker opens %d\n",
			p.name, rounds, formatKeys, share(p.counted, p.lookups), share(p.served, p.lookups),
			p.firstWhole.Sub(killed).Round(time.Millisecond), promoted.Sub(killed).Round(time.Millisecond), putsBack[i].Round(time.Millisecond),
			s.Partial, s.Errors, s.Timeouts, s.Skipped, s.BreakerOpens)
		if s.Corrupt != 0 || s.Forged != 0 {
			t.Errorf("%s: the reader counted %d corrupt and %d forged values in a failover", p.name, s.Corrupt, s.Forged)
		}
		check(t, p.w.s)
		check(t, p.r.s)
	}
}

// TestL2HungMasterPiecesVsWhole: as TestL2FailoverPiecesVsWhole, with one
// master SIGSTOPped for 6 s (the cluster's node timeout is a minute, so
// no failover) and then resumed. It prints, for each format, the share
// of lookups counted and of prefetches served while the master hung,
// the deadlines the reader ran out (about one per breaker cooldown: an
// object with a piece on the hung master waits once per cooldown, when
// the breaker lets a probe through, and misses at once between), and
// the time from the SIGCONT until every key is served again. It asserts
// what holds at any load: every byte served is the writer's, both
// formats serve every key again, nothing is counted corrupt or forged,
// and a lookup counts an L2 hit its prefetch does not serve about once
// per cooldown at most (the probe's).
func TestL2HungMasterPiecesVsWhole(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{NodeTimeout: time.Minute})
	const timeout, cooldown, hang = 300 * time.Millisecond, 2 * time.Second, 6 * time.Second
	opts := l2.Options{Timeout: timeout, BreakerFailures: 3, BreakerCooldown: cooldown}
	fs := startFormats(t, c.URL(), opts, "fmt-hang")
	victim := firstMaster(t, c)
	for _, p := range fs {
		if n := p.probe(t); n != formatKeys {
			t.Fatalf("%s: before the hang, %d of %d keys served (%+v)", p.name, n, formatKeys, p.r.tier.Stats())
		}
		p.reset()
	}
	before := []l2.Stats{fs[0].r.tier.Stats(), fs[1].r.tier.Stats()}
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = victim.Cont()
		}
	}()
	rounds := 0
	for start := time.Now(); time.Since(start) < hang; rounds++ {
		for _, p := range fs {
			p.probe(t)
		}
	}
	during := make([]l2.Stats, len(fs))
	type counts struct{ lookups, counted, served int }
	hung := make([]counts, len(fs))
	for i, p := range fs {
		during[i] = p.r.tier.Stats()
		hung[i] = counts{p.lookups, p.counted, p.served}
		p.reset()
	}
	if err := victim.Cont(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	resumed := time.Now()
	for fs[0].firstWhole.IsZero() || fs[1].firstWhole.IsZero() {
		if time.Since(resumed) > 60*time.Second {
			t.Fatalf("%v after the SIGCONT: pieces whole again %v, whole values %v", time.Since(resumed),
				!fs[0].firstWhole.IsZero(), !fs[1].firstWhole.IsZero())
		}
		for _, p := range fs {
			p.probe(t)
		}
	}
	for i, p := range fs {
		s := p.r.tier.Stats()
		per, _ := breakerOpens(s, victim.Addr())
		fmt.Printf("hung master, %s: %v hung (%d rounds of %d keys; timeout %v, cooldown %v): lookups counted %s, prefetches served %s; "+
			"deadlines run out %d, calls skipped by the breaker %d, breaker opens %d (per server, to the end: %s); every key served again %v after the SIGCONT\n",
			p.name, hang, rounds, formatKeys, timeout, cooldown, share(hung[i].counted, hung[i].lookups), share(hung[i].served, hung[i].lookups),
			during[i].Timeouts-before[i].Timeouts, during[i].Skipped-before[i].Skipped, during[i].BreakerOpens-before[i].BreakerOpens,
			per, p.firstWhole.Sub(resumed).Round(time.Millisecond))
		if s.Corrupt != 0 || s.Forged != 0 {
			t.Errorf("%s: the reader counted %d corrupt and %d forged values while a master hung", p.name, s.Corrupt, s.Forged)
		}
		// A lookup counts an object only while every master of its
		// pieces takes calls: one counted and not served is a probe's,
		// about once per cooldown (a key at a time; one round more for
		// slack). Before, a lookup judged piece 0 alone and counted
		// 62 % of the pieces' lookups while serving none.
		if over, allowed := hung[i].counted-hung[i].served, formatKeys*(int(hang/cooldown)+2); over > allowed {
			t.Errorf("%s: while a master hung, lookups counted %d L2 hits their prefetch did not serve; a probe per cooldown allows %d",
				p.name, over, allowed)
		}
		check(t, p.w.s)
		check(t, p.r.s)
	}
}
