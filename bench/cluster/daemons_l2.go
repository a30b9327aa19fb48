//go:build linux

package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// SettleTimeout bounds how long the daemons' replay waits, after a
// request's finish, for its node's copies to L2 to be sent: the model's
// write-through puts at once, the daemon's asynchronously.
const SettleTimeout = 200 * time.Millisecond

// countingStore is an l2.Store that counts the keys its daemon handed to
// Put or Drop, so the replay can wait until a finish's copies are out.
type countingStore struct {
	*l2.Tier
	done atomic.Int64
}

// PutPayloads implements l2.PayloadStore: the daemon's puts from its
// pool, counted as Put's.
func (s *countingStore) PutPayloads(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int {
	n := s.Tier.PutPayloads(ctx, keys, payloads)
	s.done.Add(int64(len(keys)))
	return n
}

func (s *countingStore) Put(ctx context.Context, keys []l1.ObjectKey, values [][]byte) int {
	n := s.Tier.Put(ctx, keys, values)
	s.done.Add(int64(len(keys)))
	return n
}

func (s *countingStore) Drop(n int) {
	s.Tier.Drop(n)
	s.done.Add(int64(n))
}

// redisL2 is the real Redis Cluster under the daemons' replay, sized so
// that it holds about cfg.L2 blocks, evicting with allkeys-lru.
type redisL2 struct {
	c *rediscluster.Cluster
}

// valueBytes is the size of one block's L2 value: the block, the
// codec's header and the key.
func valueBytes(size int64) (int64, error) {
	k := l1.ObjectKey{ChunkHash: strings.Repeat("x", 8), Model: "kimi-k2"}
	v, err := l2.Encode(nil, &k, make([]byte, size))
	return int64(len(v)), err
}

// startRedisL2 starts a Redis Cluster of 3 masters (no replicas) and
// sizes each master's maxmemory to hold its share of q values of size
// bytes, evicting with allkeys-lru. What one value costs Redis (its
// allocation and its entry) is measured first: probe values are written
// through the cluster client and the masters' used_memory compared.
func startRedisL2(ctx context.Context, q, size int64) (_ *redisL2, err error) {
	c, err := rediscluster.Start(ctx, rediscluster.Options{Replicas: -1})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	masters, err := c.Masters(ctx)
	if err != nil {
		return nil, err
	}
	used := func() ([]int64, int64, error) {
		var per []int64
		var sum int64
		for _, m := range masters {
			cl := m.Client()
			u, err := usedMemory(cl.Info(ctx, "memory").Val())
			cl.Close()
			if err != nil {
				return nil, 0, err
			}
			per, sum = append(per, u), sum+u
		}
		return per, sum, nil
	}
	vb, err := valueBytes(size)
	if err != nil {
		return nil, err
	}
	cc := c.Client()
	defer cc.Close()
	_, before, err := used()
	if err != nil {
		return nil, err
	}
	const probe = 300
	val := make([]byte, vb)
	names := make([]string, probe)
	for i := range names {
		names[i] = "kvl2:probe:" + strconv.Itoa(i)
		if err := cc.Set(ctx, names[i], val, 0).Err(); err != nil {
			return nil, err
		}
	}
	_, after, err := used()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := cc.Del(ctx, n).Err(); err != nil {
			return nil, err
		}
	}
	base, _, err := used()
	if err != nil {
		return nil, err
	}
	cost := max((after-before)/probe, vb)
	share := (q + int64(len(masters)) - 1) / int64(len(masters))
	for i, m := range masters {
		cl := m.Client()
		err := cl.ConfigSet(ctx, "maxmemory", strconv.FormatInt(base[i]+cost*share, 10)).Err()
		if err == nil {
			err = cl.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err()
		}
		cl.Close()
		if err != nil {
			return nil, err
		}
	}
	return &redisL2{c: c}, nil
}

// usedMemory reads used_memory from INFO memory's text.
func usedMemory(info string) (int64, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("cluster: no used_memory in INFO memory")
}

// tier connects one daemon's tier to the cluster, counted.
func (r *redisL2) tier(ctx context.Context) (*countingStore, error) {
	b, err := l2.NewRedis(ctx, r.c.URL(), l2.RedisOptions{})
	if err != nil {
		return nil, err
	}
	t, err := l2.NewTier(b, l2.Options{})
	if err != nil {
		b.Close()
		return nil, err
	}
	return &countingStore{Tier: t}, nil
}

// keys returns the keys the cluster's masters hold.
func (r *redisL2) keys(ctx context.Context) (int64, error) {
	masters, err := r.c.Masters(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, m := range masters {
		cl := m.Client()
		k, err := cl.DBSize(ctx).Result()
		cl.Close()
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

func (r *redisL2) close() { r.c.Close() }
