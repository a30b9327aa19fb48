package l2

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CoverageWarnings asks every master of a Redis Cluster for its
// cluster-require-full-coverage and returns a warning for each that says
// yes, Redis's default: once any master is flagged failed, and until its
// replica takes over, such a master refuses every key (CLUSTERDOWN), so
// that one dead master costs the tier every hit, not its own share. An L2
// cluster, a cache, runs with cluster-require-full-coverage no. A master
// that does not answer, or does not let CONFIG GET run (an ACL, a renamed
// command), is passed over in silence: the warning is advice, never a
// reason to fail. On a plain Redis it returns nothing.
func (r *Redis) CoverageWarnings(ctx context.Context) []string {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	var mu sync.Mutex
	var out []string
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "cluster-require-full-coverage").Result()
		if err == nil && v["cluster-require-full-coverage"] == "yes" {
			mu.Lock()
			out = append(out, fmt.Sprintf("l2: master %s runs with cluster-require-full-coverage yes: while any master is down and not yet replaced, it refuses every key and the tier serves no hit; set cluster-require-full-coverage no", c.Options().Addr))
			mu.Unlock()
		}
		return nil
	})
	sort.Strings(out)
	return out
}
