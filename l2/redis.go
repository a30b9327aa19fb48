package l2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultStreamBytes is RedisOptions.StreamBytes's default.
const DefaultStreamBytes = 4 << 20

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// Timeout bounds dialing, each read and each write of a connection
	// (default 2 s); a Tier's Options.Timeout bounds each whole call.
	Timeout time.Duration
	// PoolSize is the connections per node (default go-redis's: 10 per
	// CPU).
	PoolSize int
	// StreamBytes is about how many bytes of one master's values GetEach
	// asks for in one pipeline (by the sizes its caller expects), before
	// it checks them while the master's next pipeline is in flight
	// (default 4 MiB: one pipeline per value of 8 MiB, four per value of
	// 1 MiB, 64 per value of 64 KiB).
	StreamBytes int
	// Cluster forces a cluster client for one address; with several it is
	// always one. Without it, one address is probed (INFO cluster) and a
	// cluster node gets a cluster client.
	Cluster bool
}

// Redis is a Backend on Redis: a Redis Cluster (go-redis's ClusterClient,
// which routes each name to its slot's master, follows MOVED and ASK and
// learns failovers) or one plain Redis (go-redis's Client). Batches are
// pipelined: one round trip per node.
type Redis struct {
	c      redis.UniversalClient
	stream int // RedisOptions.StreamBytes

	reload reloads // Suspect's reloads of the slot map (masters.go)
}

var _ Backend = (*Redis)(nil)

// ParseURL reads kvallocd's -l2 flag: redis://host:port[,host:port...].
func ParseURL(url string) ([]string, error) {
	rest, ok := strings.CutPrefix(url, "redis://")
	if !ok {
		return nil, fmt.Errorf("l2: %q: want redis://host:port[,host:port...]", url)
	}
	var addrs []string
	for _, a := range strings.Split(rest, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("l2: %q: address %q: %w", url, a, err)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// NewRedis connects to the Redis at url (ParseURL), a cluster when it
// names several seeds or the one node it names is a cluster node.
func NewRedis(ctx context.Context, url string, opts RedisOptions) (*Redis, error) {
	addrs, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.StreamBytes <= 0 {
		opts.StreamBytes = DefaultStreamBytes
	}
	cluster := opts.Cluster || len(addrs) > 1
	if !cluster {
		cluster = isClusterNode(ctx, addrs[0], opts.Timeout)
	}
	if cluster {
		return &Redis{stream: opts.StreamBytes, c: redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, DialTimeout: opts.Timeout, ReadTimeout: opts.Timeout, WriteTimeout: opts.Timeout,
			ContextTimeoutEnabled: true, PoolSize: opts.PoolSize, MaxRetries: 1,
			// No redirect rounds: go-redis's retry round after a failed
			// node overwrites every command's result with the context's
			// error once the deadline passes, so one stopped master would
			// make a whole batch miss. Without it each node's answers
			// stand; a MOVED is a miss, and makes the client reload the
			// slot map for the next call.
			MaxRedirects: -1,
		})}, nil
	}
	return &Redis{stream: opts.StreamBytes, c: redis.NewClient(&redis.Options{
		Addr: addrs[0], DialTimeout: opts.Timeout, ReadTimeout: opts.Timeout, WriteTimeout: opts.Timeout,
		ContextTimeoutEnabled: true, PoolSize: opts.PoolSize, MaxRetries: -1,
	})}, nil
}

// isClusterNode reports whether the Redis at addr runs with
// cluster-enabled; false when it cannot tell in time.
func isClusterNode(ctx context.Context, addr string, timeout time.Duration) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := c.Info(ctx, "cluster").Result()
	return err == nil && strings.Contains(info, "cluster_enabled:1")
}

// Client is the go-redis client (the benchmarks' floor uses it).
func (r *Redis) Client() redis.UniversalClient { return r.c }

// firstErr is the first error of cmds other than redis.Nil.
func firstErr(cmds []redis.Cmder, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		err = nil
		for _, c := range cmds {
			if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
				return e
			}
		}
	}
	return err
}

// Get implements Backend: one pipelined GET per name.
func (r *Redis) Get(ctx context.Context, names []string) ([][]byte, error) {
	cmds := make([]*redis.StringCmd, len(names))
	all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cmds[i] = p.Get(ctx, n)
		}
		return nil
	})
	out := make([][]byte, len(names))
	for i, c := range cmds {
		if b, e := c.Bytes(); e == nil {
			out[i] = b
		}
	}
	return out, firstErr(all, err)
}

// GetEach implements Backend: a GETRANGE of each value's first sizes[i]+1
// bytes. The names are grouped by their slot's
// master (one group on a plain Redis), and each group runs on one
// connection at a time, all groups at once, as go-redis's cluster
// pipeline runs one batch per node: no more connections than a pipelined
// Get. Within a group the values are asked for in pipelines of about
// RedisOptions.StreamBytes (by sizes), one after the other, and f runs on
// each pipeline's values, in a goroutine of its own, while the group's
// next pipeline is in flight: the checks and copies of one large value
// overlap the transfer of the next.
func (r *Redis) GetEach(ctx context.Context, names []string, sizes []int, f func(i int, v []byte)) error {
	groups := r.byMaster(ctx, names)
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for g, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = r.getGroup(ctx, names, sizes, idx, f)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// byMaster groups the indexes of names by their slot's master, in order
// of first appearance; one group of all on a plain Redis, or when the
// cluster's slot map cannot be had (the pipeline then finds out).
func (r *Redis) byMaster(ctx context.Context, names []string) [][]int {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok || len(names) < 2 {
		return [][]int{seq(len(names))}
	}
	var groups [][]int
	at := map[*redis.Client]int{}
	for i, n := range names {
		m, err := cc.MasterForKey(ctx, n)
		if err != nil {
			return [][]int{seq(len(names))}
		}
		g, ok := at[m]
		if !ok {
			g = len(groups)
			at[m] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// getGroup is one group of GetEach: the names at idx, StreamBytes at a
// time; it returns once every f has, with the first error.
func (r *Redis) getGroup(ctx context.Context, names []string, sizes []int, idx []int, f func(i int, v []byte)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var first error
	for len(idx) > 0 {
		n, sum := 1, sizes[idx[0]]
		for n < len(idx) && sum+sizes[idx[n]] <= r.stream {
			sum += sizes[idx[n]]
			n++
		}
		part := idx[:n]
		idx = idx[n:]
		cmds := make([]*redis.StringCmd, len(part))
		all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, i := range part {
				// At most sizes[i]+1 bytes: one past what the caller
				// expects shows a longer value without moving it.
				cmds[j] = p.GetRange(ctx, names[i], 0, int64(max(sizes[i], 0)))
			}
			return nil
		})
		if err = firstErr(all, err); err != nil && first == nil {
			first = err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, c := range cmds {
				b, e := c.Bytes()
				if e != nil || len(b) == 0 { // GETRANGE of an absent name is empty
					b = nil
				}
				f(part[j], b)
			}
		}()
		if ctx.Err() != nil {
			// Past the deadline every later pipeline fails at once.
			for _, i := range idx {
				f(i, nil)
			}
			break
		}
	}
	return first
}

// GetPrefix implements Backend: a pipelined GETRANGE and STRLEN per name.
func (r *Redis) GetPrefix(ctx context.Context, names []string, n []int) ([][]byte, []int64, error) {
	pre := make([]*redis.StringCmd, len(names))
	lens := make([]*redis.IntCmd, len(names))
	all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			pre[i] = p.GetRange(ctx, name, 0, int64(max(n[i], 1))-1)
			lens[i] = p.StrLen(ctx, name)
		}
		return nil
	})
	out := make([][]byte, len(names))
	ls := make([]int64, len(names))
	for i := range names {
		ls[i] = -1
		l, e1 := lens[i].Result()
		b, e2 := pre[i].Bytes()
		if e1 == nil && e2 == nil && l > 0 {
			out[i], ls[i] = b, l
		}
	}
	return out, ls, firstErr(all, err)
}

// Set implements Backend: one pipelined SET per name, no expiry (Redis
// evicts by its maxmemory-policy).
func (r *Redis) Set(ctx context.Context, names []string, values [][]byte) ([]bool, error) {
	cmds := make([]*redis.StatusCmd, len(names))
	all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cmds[i] = p.Set(ctx, n, values[i], 0)
		}
		return nil
	})
	ok := make([]bool, len(names))
	for i, c := range cmds {
		ok[i] = c.Err() == nil
	}
	return ok, firstErr(all, err)
}

// Del implements Backend: one pipelined DEL per name (names of different
// slots cannot share a DEL in a cluster).
func (r *Redis) Del(ctx context.Context, names []string) error {
	all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.Del(ctx, n)
		}
		return nil
	})
	return firstErr(all, err)
}

// Close implements Backend.
func (r *Redis) Close() error { return r.c.Close() }
