package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterLifecycle starts 3 masters and 3 replicas, writes keys across
// every master, kills one master and waits for its replica to take over
// with the keys, restarts it, and after Close finds no process left.
func TestClusterLifecycle(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	masters, err := c.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters %v, %v; want 3", masters, err)
	}
	cl := c.Client()
	defer cl.Close()
	for i := range 300 {
		if err := cl.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range masters {
		mc := m.Client()
		n, err := mc.DBSize(ctx).Result()
		mc.Close()
		if err != nil || n == 0 {
			t.Fatalf("master %s holds %d keys (%v): the keys are not spread", m.Addr(), n, err)
		}
	}

	victim := masters[0]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("no failover: %v", err)
	}
	after, err := c.Masters(ctx)
	if err != nil || len(after) != 3 {
		t.Fatalf("after failover: masters %v, %v", after, err)
	}
	for _, m := range after {
		if m == victim {
			t.Fatal("the killed master still serves slots")
		}
	}
	// A fresh client: the first one's slot map names the dead master
	// until it reloads.
	cl2 := c.Client()
	defer cl2.Close()
	for i := range 300 {
		if v, err := cl2.Get(ctx, fmt.Sprint("k", i)).Int(); err != nil || v != i {
			t.Fatalf("k%d after failover: %v, %v", i, v, err)
		}
	}
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(wctx); err != nil {
		t.Fatalf("the restarted node did not rejoin as a replica: %v", err)
	}

	var pids []int
	for _, n := range c.Nodes {
		pids = append(pids, n.PID())
	}
	c.Close()
	for _, pid := range pids {
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			t.Errorf("redis-server %d outlived Close", pid)
		}
	}
}

// TestServerStopCont: a plain server; a stopped one does not answer
// within a timeout, and answers again once continued.
func TestServerStopCont(t *testing.T) {
	s := NewServer(t, Options{})
	cl := s.Client()
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Set(ctx, "a", "b", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := cl.Get(sctx, "a").Err()
	cancel()
	if err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.Cont(); err != nil {
		t.Fatal(err)
	}
	cl2 := s.Client()
	defer cl2.Close()
	if v, err := cl2.Get(ctx, "a").Result(); err != nil || v != "b" {
		t.Fatalf("after SIGCONT: %q, %v", v, err)
	}
}

// TestMissingRedisNamesMakeTarget: without the binaries Start fails with
// ErrMissing, whose message names make redis.
func TestMissingRedisNamesMakeTarget(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "make redis") {
		t.Fatalf("Start without redis: %v", err)
	}
	_, err = StartServer(context.Background(), Options{})
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("StartServer without redis: %v", err)
	}
}
