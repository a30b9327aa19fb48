package l2

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
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
	// Cluster forces a cluster client for one address, as a
	// redis+cluster:// URL does.
	Cluster bool
	// Password authenticates the connections, as the URL's user (or
	// Redis's default user). kvallocd reads it from a file
	// (ReadSecretFile); a URL never carries one.
	Password string
	// TLS is the TLS configuration of a rediss:// URL (TLSConfig); nil
	// there is TLS against the system's roots. Set for a redis:// URL, it
	// is refused.
	TLS *tls.Config
	// Logger receives the choice of a plain or cluster client and the
	// refusals of the credentials (default: none).
	Logger *slog.Logger
}

// Redis is a Backend on Redis: a Redis Cluster (go-redis's ClusterClient,
// which routes each name to its slot's master, follows MOVED and ASK and
// learns failovers) or one plain Redis (go-redis's Client). Batches are
// pipelined: one round trip per node.
type Redis struct {
	c      redis.UniversalClient
	stream int // RedisOptions.StreamBytes
	conn   *conn

	reload reloads // Suspect's reloads of the slot map (masters.go)
}

var _ Backend = (*Redis)(nil)

// NewRedis connects to the Redis at url (ParseURL): a cluster when the
// URL says so or names several seeds; one plain Redis when it says so;
// else the one seed is asked (INFO cluster), and when it cannot be asked
// at start the question is asked again at each call until it answers
// (the calls meanwhile fail: misses). The choice is logged. Redis
// refusing the credentials at start is an error wrapping ErrAuth; one
// not reachable at start is not an error (the tier fails open).
func NewRedis(ctx context.Context, url string, opts RedisOptions) (*Redis, error) {
	u, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.StreamBytes <= 0 {
		opts.StreamBytes = DefaultStreamBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case u.TLS && opts.TLS == nil:
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	case !u.TLS && opts.TLS != nil:
		return nil, fmt.Errorf("l2: %q: TLS options for a redis:// URL: rediss:// is TLS", url)
	}
	mode := u.Mode
	if opts.Cluster && mode == ModePlain {
		return nil, fmt.Errorf("l2: %q: +plain, and RedisOptions.Cluster", url)
	}
	if opts.Cluster || (mode == ModeAuto && len(u.Addrs) > 1) {
		mode = ModeCluster
	}
	cn := &conn{u: u, opts: opts, log: opts.Logger}
	kind, err := cn.probeAll(ctx)
	if isAuthError(err) {
		return nil, fmt.Errorf("%w (as user %q, %s): %v", ErrAuth, cn.user(), cn.pwSays(), err)
	}
	r := &Redis{stream: opts.StreamBytes, conn: cn}
	switch {
	case mode == ModeAuto && kind != kindUnknown:
		mode = ModePlain
		if kind == kindCluster {
			mode = ModeCluster
		}
		opts.Logger.Info("l2: the seed answered", "seed", u.Addrs[0], "redis", kind.String(), "client", mode.String())
	case mode == ModeAuto:
		opts.Logger.Warn("l2: the seed did not say whether it is a cluster node or a plain Redis; it is asked again at each call until it answers, and the calls fail meanwhile",
			"seed", u.Addrs[0], "err", err)
	case err != nil:
		opts.Logger.Warn("l2: no seed answered at start; the tier fails open until one does", "seeds", u.Addrs, "err", err)
	default:
		opts.Logger.Info("l2: client chosen by the URL", "client", mode.String(), "seeds", u.Addrs)
	}
	switch mode {
	case ModeCluster:
		r.c = redis.NewClusterClient(cn.clusterOptions(nil))
	case ModePlain:
		r.c = redis.NewClient(cn.options(u.Addrs[0], -1))
	default:
		// Undecided: a cluster client whose slot map is the seed's
		// answer, asked at each call until it comes (conn.slots).
		r.c = redis.NewClusterClient(cn.clusterOptions(cn.slots))
	}
	r.c.AddHook(authHook{cn})
	return r, nil
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
	// EXISTS tells an empty string (a value that fails its checks) from
	// an absent name, which STRLEN does not.
	exist := make([]*redis.IntCmd, len(names))
	all, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			pre[i] = p.GetRange(ctx, name, 0, int64(max(n[i], 1))-1)
			lens[i] = p.StrLen(ctx, name)
			exist[i] = p.Exists(ctx, name)
		}
		return nil
	})
	out := make([][]byte, len(names))
	ls := make([]int64, len(names))
	for i := range names {
		ls[i] = -1
		l, e1 := lens[i].Result()
		b, e2 := pre[i].Bytes()
		if e1 == nil && e2 == nil && (l > 0 || exist[i].Val() == 1) {
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
func (r *Redis) Close() error { return errors.Join(r.c.Close(), r.conn.close()) }

// AuthFailures is how many calls Redis refused for the credentials
// (NOAUTH, WRONGPASS, NOPERM) since NewRedis.
func (r *Redis) AuthFailures() uint64 { return r.conn.authFailures.Load() }
