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
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// onMaster splits keys by whether their value lives on the master at
// addr, as the cluster's slot map says now.
func onMaster(t *testing.T, c *rediscluster.Cluster, keys []l1.ObjectKey, addr string) (on, off []l1.ObjectKey) {
	t.Helper()
	cc := c.Client()
	defer cc.Close()
	for i := range keys {
		m, err := cc.MasterForKey(context.Background(), l2.StoreKey(l2.DefaultPrefix, &keys[i]))
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr {
			on = append(on, keys[i])
		} else {
			off = append(off, keys[i])
		}
	}
	if len(on) == 0 || len(off) == 0 {
		t.Fatalf("of %d keys, %d on master %s and %d elsewhere: the test needs both", len(keys), len(on), addr, len(off))
	}
	return on, off
}

// firstMaster is c's first master, the one the fault tests stop or kill.
func firstMaster(t *testing.T, c *rediscluster.Cluster) *rediscluster.Node {
	t.Helper()
	masters, err := c.Masters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return masters[0]
}

// latencies are lookup times, for the counts the tests print.
type latencies []time.Duration

func (l latencies) median() time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)/2]
}

func (l latencies) max() time.Duration {
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l)
}

// over counts the times of at least d.
func (l latencies) over(d time.Duration) int {
	n := 0
	for _, x := range l {
		if x >= d {
			n++
		}
	}
	return n
}

// breakerOpens formats each server's breaker opens, and returns those of
// the server id.
func breakerOpens(s l2.Stats, id string) (string, uint64) {
	var parts []string
	var mine uint64
	for _, sb := range s.Servers {
		parts = append(parts, fmt.Sprintf("%s=%d", sb.ID, sb.Opens))
		if sb.ID == id {
			mine = sb.Opens
		}
	}
	return strings.Join(parts, " "), mine
}

// TestL2HungMaster: one master of a real Redis Cluster SIGSTOPped (its
// sockets open, nothing answered; the cluster's node timeout is long,
// so no failover) while a reader's lookups go on, some touching the hung
// master's keys and some only the others'. The hung master must cost
// only its own keys, and about one deadline once per cooldown: its
// breaker opens on the first timeout, whatever the other masters
// answer, and then only its probes wait. The other masters' keys are
// served throughout. Before each master had its own breaker, every
// lookup touching the hung master waited the whole timeout and the
// breaker never opened (the healthy lookups reset its failures in a
// row). It prints the lookups, their latency, and each master's opens.
func TestL2HungMaster(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{NodeTimeout: 60 * time.Second})
	const timeout, cooldown, hang = 300 * time.Millisecond, 2 * time.Second, 6 * time.Second
	opts := l2.Options{Timeout: timeout, BreakerFailures: 3, BreakerCooldown: cooldown}
	a := startL2Node(t, c.URL(), opts, server.Config{})
	b := startL2Node(t, c.URL(), opts, server.Config{})
	ctx := context.Background()
	keys := l2keys("hung", 24)
	a.write(t, keys, faultSize, 100)
	if !inL2(ctx, b.tier, keys, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", a.tier.Stats())
	}
	victim := firstMaster(t, c)
	sick, healthy := onMaster(t, c, keys, victim.Addr())
	// A lookup counts a prefix: the sick keys last, so the healthy ones
	// before them are counted while the master hangs.
	mixed := append(slices.Clone(healthy), sick...)

	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = victim.Cont()
		}
	}()
	var touch, other latencies
	servedHealthy, servedMixed := 0, 0
	for start := time.Now(); time.Since(start) < hang; {
		t0 := time.Now()
		lk, err := b.c.Lookup(mixed, false)
		if err != nil {
			t.Fatalf("a lookup failed while a master hung: %v", err)
		}
		touch = append(touch, time.Since(t0))
		if int(lk.L2) == len(healthy) {
			servedMixed++
		}
		t0 = time.Now()
		if lk, err = b.c.Lookup(healthy[:1], false); err != nil {
			t.Fatalf("a lookup failed while a master hung: %v", err)
		}
		other = append(other, time.Since(t0))
		if lk.L2 == 1 {
			servedHealthy++
		}
	}
	if err := victim.Cont(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	bs := b.tier.Stats()
	per, opens := breakerOpens(bs, victim.Addr())
	fmt.Printf("hung master: %d lookups touching it, latency median %v max %v, %d of them waited half a deadline (%v) or more; "+
		"%d lookups of the other masters, median %v max %v, %d of %d served; deadlines run out %d; breaker opens per master: %s\n",
		len(touch), touch.median().Round(time.Microsecond), touch.max().Round(time.Millisecond), touch.over(timeout/2), timeout,
		len(other), other.median().Round(time.Microsecond), other.max().Round(time.Millisecond), servedHealthy, len(other), bs.Timeouts, per)

	// About one deadline once per cooldown: the first timeout, then a
	// probe per cooldown (hang/cooldown of them); one more for slack.
	// The tier's count of deadlines run out is exact; the lookups'
	// latencies also carry the machine's stalls (load 10 on 2 cores), so
	// a tenth of them more may be slow; before, every one was.
	allowed := int(hang/cooldown) + 2
	if bs.Timeouts > uint64(allowed) {
		t.Errorf("the hung master ran out %d deadlines in %v; one per cooldown (%v) allows %d", bs.Timeouts, hang, cooldown, allowed)
	}
	if slow := touch.over(timeout / 2); slow > allowed+len(touch)/10 {
		t.Errorf("%d of %d lookups touching the hung master waited %v or more; a deadline once per cooldown allows %d", slow, len(touch), timeout/2, allowed)
	}
	if opens == 0 || opens > uint64(hang/cooldown)+2 {
		t.Errorf("the hung master's breaker opened %d times in %v (cooldown %v)", opens, hang, cooldown)
	}
	if servedHealthy < len(other)/2 || servedMixed < len(touch)/2 {
		t.Errorf("the other masters' keys were served in %d of %d lookups of them alone and %d of %d with the hung master's", servedHealthy, len(other), servedMixed, len(touch))
	}
	// Back: the whole run is counted again once the breaker probes.
	deadline := time.Now().Add(20 * time.Second)
	for {
		lk, err := b.c.Lookup(mixed, false)
		if err != nil {
			t.Fatal(err)
		}
		if int(lk.L2) == len(mixed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGCONT: %d of %d keys counted (%+v)", lk.L2, len(mixed), b.tier.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(t, a.s)
	check(t, b.s)
}

// replicaOf returns the node that replicates master now.
func replicaOf(t *testing.T, c *rediscluster.Cluster, master *rediscluster.Node) *rediscluster.Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n == master || !n.Running() {
			continue
		}
		cl := n.Client()
		info, err := cl.Info(context.Background(), "replication").Result()
		cl.Close()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, fmt.Sprintf("master_port:%d\r", master.Port)) {
			return n
		}
	}
	t.Fatalf("no replica of %s", master.Addr())
	return nil
}

// waitReplicated waits until master's replica has every write master
// has (their replication offsets equal).
func waitReplicated(t *testing.T, master *rediscluster.Node) {
	t.Helper()
	cl := master.Client()
	defer cl.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cl.Info(context.Background(), "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		var off string
		caught := false
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
				off = v
			}
		}
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "slave0:") && strings.Contains(line, ",offset="+off+",") {
				caught = true
			}
		}
		if caught {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not catch up: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestL2MasterFailover: a master of a real Redis Cluster SIGKILLed, its
// replica promoted by the cluster. The reader's lookups of the dead
// master's keys must find them on the promoted replica soon after the
// promotion, and a writer's puts to every slot must go through: the tier
// reloads the slot map when a master's calls fail (connection refused)
// or its breaker skips them. Before, the daemon dialled the dead address
// until go-redis's periodic reload, a minute later (64 s to the first
// hit). It prints the time from the promotion to the first hit on the
// dead master's keys, and to a fresh batch whole in L2.
func TestL2MasterFailover(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{NodeTimeout: time.Second})
	opts := l2.Options{Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 300 * time.Millisecond}
	a := startL2Node(t, c.URL(), opts, server.Config{})
	b := startL2Node(t, c.URL(), opts, server.Config{})
	ctx := context.Background()
	keys := l2keys("failover", 24)
	a.write(t, keys, faultSize, 200)
	if !inL2(ctx, b.tier, keys, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", a.tier.Stats())
	}
	victim := firstMaster(t, c)
	dead, _ := onMaster(t, c, keys, victim.Addr())
	waitReplicated(t, victim)
	replica := replicaOf(t, c, victim)
	rc := replica.Client()
	defer rc.Close()
	// Both daemons have called the victim (a's puts, b's header reads).
	if lk, err := b.c.Lookup(dead, false); err != nil || int(lk.L2) != len(dead) {
		t.Fatalf("before the kill: %+v, %v", lk, err)
	}

	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The reader looks its keys up all along; the test watches the
	// replica's role between lookups.
	isMaster := func() bool {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		info, err := rc.Info(qctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	}
	var promoted, firstHit, checked time.Time
	lookups, hitsBefore := 0, 0
	for firstHit.IsZero() {
		if time.Since(killed) > 45*time.Second {
			t.Fatalf("no hit on the dead master's keys %v after the kill (promoted %v after it; %+v)",
				time.Since(killed), promoted.Sub(killed), b.tier.Stats())
		}
		if promoted.IsZero() {
			if checked = time.Now(); isMaster() {
				promoted = checked
			}
		}
		lk, err := b.c.Lookup(dead, false)
		if err != nil {
			t.Fatalf("a lookup failed during the failover: %v", err)
		}
		lookups++
		if int(lk.L2) == len(dead) {
			if promoted.IsZero() {
				if !isMaster() {
					hitsBefore++ // cannot be: the only copy is on the dead master
					continue
				}
				promoted = checked // promoted since the last look: the time to the hit is an upper bound
			}
			firstHit = time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	toHit := firstHit.Sub(promoted)
	// Puts to every slot go through again: the writer, idle since the
	// kill, writes a fresh batch every 100 ms until one is whole in L2.
	// (Its first puts to the dead master's slots go to the dead address
	// and are dropped, as a put that fails is; they make it reload.)
	putsBack, batches := false, 0
	for !putsBack && time.Since(promoted) < 30*time.Second {
		fresh := l2keys(fmt.Sprintf("failover-fresh%d", batches), 24)
		a.write(t, fresh, faultSize, 300)
		batches++
		putsBack = inL2(ctx, b.tier, fresh, 100*time.Millisecond)
	}
	toPuts := time.Since(promoted)
	bs := b.tier.Stats()
	per, _ := breakerOpens(bs, victim.Addr())
	fmt.Printf("master failover: promoted %v after the kill; first hit on the dead master's %d keys %v after the promotion "+
		"(%d lookups); a fresh batch whole in L2 %v after it (%v, batch %d); reader's breaker opens per master: %s; "+
		"slot-map reloads reader %d, writer %d\n",
		promoted.Sub(killed).Round(time.Millisecond), len(dead), toHit.Round(time.Millisecond), lookups,
		toPuts.Round(time.Millisecond), putsBack, batches, per, b.tier.Backend().(*l2.Redis).Reloads(), a.tier.Backend().(*l2.Redis).Reloads())
	if hitsBefore > 0 {
		t.Errorf("%d lookups counted the dead master's keys before any promotion", hitsBefore)
	}
	// A hang guard, not a race: the fix's time is a slot-map reload
	// (ReloadEvery) and a round trip; go-redis's own reload is a minute.
	if toHit > 15*time.Second {
		t.Errorf("the first hit came %v after the promotion", toHit)
	}
	if !putsBack {
		t.Errorf("puts after the failover did not reach L2: %+v", a.tier.Stats())
	}
	check(t, a.s)
	check(t, b.s)
}

// TestL2LookupBudgetBoundsL2: with the store hung (SIGSTOP), a lookup
// with a budget answers within about its budget, its L2 keys misses,
// and a lookup without one within about the tier's timeout; neither
// fails, and a call cut by a budget is no verdict on the store (the
// breaker stays closed, the call counted as cut). Before, the lookup
// with a budget of 1 ms answered after the whole timeout (2.0 s).
func TestL2LookupBudgetBoundsL2(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	const timeout = 2 * time.Second
	opts := l2.Options{Timeout: timeout, BreakerFailures: 100}
	a := startL2Node(t, srv.URL(), opts, server.Config{})
	b := startL2Node(t, srv.URL(), opts, server.Config{})
	keys := l2keys("budget", 4)
	a.write(t, keys, faultSize, 400)
	if !inL2(context.Background(), b.tier, keys, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", a.tier.Stats())
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = srv.Cont()
		}
	}()
	s0 := b.tier.Stats()
	var budgeted latencies
	for range 3 {
		t0 := time.Now()
		lk, err := b.c.LookupWithin(keys, true, time.Millisecond)
		budgeted = append(budgeted, time.Since(t0))
		if err != nil || lk.L2 != 0 {
			t.Fatalf("a lookup with a budget of 1 ms over a hung store: %+v, %v", lk, err)
		}
	}
	s := b.tier.Stats()
	t0 := time.Now()
	lk, err := b.c.Lookup(keys, false)
	plain := time.Since(t0)
	if err != nil || lk.L2 != 0 {
		t.Fatalf("a lookup without a budget over a hung store: %+v, %v", lk, err)
	}
	fmt.Printf("lookup budget: over a hung store, lookups with a budget of 1 ms answered in median %v, max %v; "+
		"one without a budget in %v (timeout %v); calls cut %d, breaker %v\n",
		budgeted.median().Round(time.Microsecond), budgeted.max().Round(time.Millisecond), plain.Round(time.Millisecond), timeout, s.Cut, s.Breaker)
	// Hang guards: half the timeout is hundreds of budgets.
	if budgeted.max() > timeout/2 {
		t.Errorf("a lookup with a budget of 1 ms took %v over a hung store (timeout %v)", budgeted.max(), timeout)
	}
	if plain > timeout+2*time.Second {
		t.Errorf("a lookup without a budget took %v (timeout %v)", plain, timeout)
	}
	// A budget that ran out before the call began skips L2 (no call);
	// one that ran out during it cuts the call: neither counts against
	// the store. How many were cut depends on the machine's load.
	if s.Errors != s0.Errors || s.Timeouts != s0.Timeouts || s.BreakerOpens != s0.BreakerOpens {
		t.Errorf("budgeted lookups gave a verdict on the store: errors %d → %d, timeouts %d → %d, breaker opens %d → %d (cut %d → %d)",
			s0.Errors, s.Errors, s0.Timeouts, s.Timeouts, s0.BreakerOpens, s.BreakerOpens, s0.Cut, s.Cut)
	}
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	if !inL2(context.Background(), b.tier, keys, 20*time.Second) {
		t.Fatalf("after SIGCONT the keys are not served: %+v", b.tier.Stats())
	}
	check(t, b.s)
}

// TestL2LookupWithinClientDeadline: a daemon whose store has a timeout
// longer than a client's deadline (a library user's Tier; kvallocd
// refuses one past l2.MaxTimeout) still answers a lookup without a budget
// over a hung store within the client's default deadline of 10 s: the
// lookup's L2 part stops at 8 s, a miss. Before, the lookup waited the
// store's whole 12 s, and the client's deadline closed its connection.
func TestL2LookupWithinClientDeadline(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	opts := l2.Options{Timeout: 12 * time.Second}
	a := startL2Node(t, srv.URL(), opts, server.Config{})
	b := startL2Node(t, srv.URL(), opts, server.Config{})
	keys := l2keys("deadline", 2)
	a.write(t, keys, faultSize, 900)
	if !inL2(context.Background(), b.tier, keys, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", a.tier.Stats())
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	defer srv.Cont()
	t0 := time.Now()
	lk, err := b.c.Lookup(keys, false)
	el := time.Since(t0)
	fmt.Printf("lookup budget: a lookup without a budget over a hung store whose timeout is 12 s answered in %v: %+v, %v\n", el.Round(time.Millisecond), lk, err)
	if err != nil || lk.L2 != 0 {
		t.Fatalf("a lookup over a hung store with a 12 s timeout: %+v, %v (after %v)", lk, err, el)
	}
}
