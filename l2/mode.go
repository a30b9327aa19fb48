package l2

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// kind is what a seed said it is.
type kind int32

const (
	kindUnknown kind = iota
	kindPlain
	kindCluster
)

func (k kind) String() string {
	switch k {
	case kindPlain:
		return "plain"
	case kindCluster:
		return "cluster"
	}
	return "unknown"
}

// conn is what a Redis's connections share: the URL, the credentials and
// TLS, the seeds' probes, and the count of refused credentials.
type conn struct {
	u    URL
	opts RedisOptions
	log  *slog.Logger

	authFailures atomic.Uint64
	lastAuthLog  atomic.Int64 // unix nanoseconds of the last log line of a refusal
	decided      atomic.Int32 // the kind conn.slots last found

	mu     sync.Mutex
	probes map[string]*redis.Client // one small client per address asked
	known  []string                 // a cluster's nodes, from the last slot map
	closed bool
}

// user is the ACL user the connections authenticate as.
func (c *conn) user() string {
	if c.u.Username == "" {
		return "default"
	}
	return c.u.Username
}

// pwSays says whether a password was given, never what it is.
func (c *conn) pwSays() string {
	if c.opts.Password == "" {
		return "no password given (kvallocd: -l2-password-file)"
	}
	return "with the password given"
}

// options are a plain client's options for addr.
func (c *conn) options(addr string, maxRetries int) *redis.Options {
	t := c.opts.Timeout
	return &redis.Options{Addr: addr, Username: c.u.Username, Password: c.opts.Password, TLSConfig: c.opts.TLS,
		DialTimeout: t, ReadTimeout: t, WriteTimeout: t,
		ContextTimeoutEnabled: true, PoolSize: c.opts.PoolSize, MaxRetries: maxRetries}
}

// clusterOptions are the cluster client's options; slots, when not nil,
// replaces CLUSTER SLOTS as the source of the slot map.
func (c *conn) clusterOptions(slots func(context.Context) ([]redis.ClusterSlot, error)) *redis.ClusterOptions {
	t := c.opts.Timeout
	return &redis.ClusterOptions{
		Addrs: c.u.Addrs, Username: c.u.Username, Password: c.opts.Password, TLSConfig: c.opts.TLS,
		DialTimeout: t, ReadTimeout: t, WriteTimeout: t,
		ContextTimeoutEnabled: true, PoolSize: c.opts.PoolSize, MaxRetries: 1,
		// No redirect rounds: go-redis's retry round after a failed
		// node overwrites every command's result with the context's
		// error once the deadline passes, so one stopped master would
		// make a whole batch miss. Without it each node's answers
		// stand; a MOVED is a miss, and makes the client reload the
		// slot map for the next call.
		MaxRedirects: -1,
		ClusterSlots: slots,
	}
}

// probe asks the Redis at addr whether it is a cluster node (INFO
// cluster), within the timeout.
func (c *conn) probe(ctx context.Context, addr string) (kind, *redis.Client, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return kindUnknown, nil, errors.New("l2: closed")
	}
	if c.probes == nil {
		c.probes = map[string]*redis.Client{}
	}
	pc := c.probes[addr]
	if pc == nil {
		o := c.options(addr, -1)
		o.PoolSize = 1
		pc = redis.NewClient(o)
		c.probes[addr] = pc
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	info, err := pc.Info(ctx, "cluster").Result()
	if err != nil {
		c.note(err)
		return kindUnknown, pc, err
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return kindCluster, pc, nil
	}
	return kindPlain, pc, nil
}

// probeAll asks the seeds in turn until one answers; an auth refusal
// ends the round at once.
func (c *conn) probeAll(ctx context.Context) (kind, error) {
	var first error
	for _, a := range c.u.Addrs {
		k, _, err := c.probe(ctx, a)
		if err == nil {
			return k, nil
		}
		if isAuthError(err) {
			return kindUnknown, err
		}
		if first == nil {
			first = err
		}
	}
	return kindUnknown, first
}

// slots is the slot map of an undecided client (ModeAuto, its seed
// silent at start), asked at every call until the seed answers: a plain
// Redis is one node holding every slot; a cluster node's map is its
// CLUSTER SLOTS. Once a cluster answered, its other nodes are asked too
// when the seed is not.
func (c *conn) slots(ctx context.Context) ([]redis.ClusterSlot, error) {
	c.mu.Lock()
	addrs := append(append([]string{}, c.u.Addrs...), c.known...)
	c.mu.Unlock()
	var first error
	for _, a := range addrs {
		k, pc, err := c.probe(ctx, a)
		if err == nil && k == kindPlain {
			c.decide(k, a)
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: a}}}}, nil
		}
		var slots []redis.ClusterSlot
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
			slots, err = pc.ClusterSlots(sctx).Result()
			cancel()
		}
		if err == nil {
			c.decide(kindCluster, a)
			var known []string
			for _, s := range slots {
				for _, n := range s.Nodes {
					known = append(known, n.Addr)
				}
			}
			c.mu.Lock()
			c.known = known
			c.mu.Unlock()
			return slots, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// decide logs the kind an undecided client found, when it changes.
func (c *conn) decide(k kind, addr string) {
	if kind(c.decided.Swap(int32(k))) != k {
		c.log.Info("l2: the seed answered: the client's slot map is now its", "seed", addr, "redis", k.String())
	}
}

// authLogEvery is how often a refusal of the credentials is logged, at
// most.
const authLogEvery = 10 * time.Second

// note counts err when it is Redis refusing the credentials, and logs it
// (at most every authLogEvery).
func (c *conn) note(err error) {
	if !isAuthError(err) {
		return
	}
	n := c.authFailures.Add(1)
	now := time.Now().UnixNano()
	last := c.lastAuthLog.Load()
	if (last == 0 || now-last >= int64(authLogEvery)) && c.lastAuthLog.CompareAndSwap(last, now) {
		c.log.Error("l2: Redis refuses the daemon's credentials: every call fails (a miss) until they are fixed",
			"user", c.user(), "password", c.pwSays(), "err", err, "refusals", n)
	}
}

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, pc := range c.probes {
		errs = append(errs, pc.Close())
	}
	c.probes = nil
	return errors.Join(errs...)
}

// authHook counts and logs the calls Redis refuses for the credentials.
type authHook struct{ c *conn }

func (h authHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h authHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.c.note(cmd.Err())
		return err
	}
}

func (h authHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if isAuthError(err) {
			// A connection's AUTH refused: the pipeline's error, its
			// commands never sent.
			h.c.note(err)
			return err
		}
		for _, cmd := range cmds {
			if isAuthError(cmd.Err()) {
				h.c.note(cmd.Err()) // once a pipeline
				break
			}
		}
		return err
	}
}
