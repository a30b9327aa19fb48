package l2_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
)

// TestCoverageWarnings: a cluster run with Redis's default
// cluster-require-full-coverage yes gets one warning per master, each
// naming it; a cluster run with no, and a plain Redis, get none.
func TestCoverageWarnings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(url string) *l2.Redis {
		r, err := l2.NewRedis(ctx, url, l2.RedisOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	full := rediscluster.New(t, rediscluster.Options{Replicas: -1, FullCoverage: true})
	w := open(full.URL()).CoverageWarnings(ctx)
	if len(w) != len(full.Nodes) {
		t.Fatalf("%d warnings for a cluster of %d masters of full coverage: %q", len(w), len(full.Nodes), w)
	}
	for _, n := range full.Nodes {
		found := false
		for _, s := range w {
			found = found || strings.Contains(s, n.Addr()) && strings.Contains(s, "cluster-require-full-coverage no")
		}
		if !found {
			t.Errorf("no warning names master %s: %q", n.Addr(), w)
		}
	}
	if w := open(rediscluster.New(t, rediscluster.Options{Replicas: -1}).URL()).CoverageWarnings(ctx); len(w) != 0 {
		t.Errorf("warnings for a cluster with cluster-require-full-coverage no: %q", w)
	}
	if w := open(rediscluster.NewServer(t, rediscluster.Options{}).URL()).CoverageWarnings(ctx); len(w) != 0 {
		t.Errorf("warnings for a plain Redis: %q", w)
	}
}
