//go:build linux

package server

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Defaults.
const (
	DefaultPoolSize     = 1 << 30
	DefaultSocketMode   = 0o600
	DefaultFrameTimeout = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// Config configures New. The zero Config serves a 1 GiB pool, usable at
// once and backed as it is written, on wire.DefaultSocketPath to the daemon's
// own uid, with l1's zero Config; Defaults is what kvallocd runs.
type Config struct {
	// SocketPath is the Unix socket; "" means wire.DefaultSocketPath. A stale
	// socket file left by a dead daemon is replaced; a live daemon on it,
	// or a file there that is not a socket, makes New fail.
	SocketPath string
	// SocketMode is the socket file's mode; 0 means 0600.
	SocketMode os.FileMode
	// AllowUIDs and AllowGIDs are the peers served: a peer whose uid is in
	// AllowUIDs, or whose gid is in AllowGIDs (SO_PEERCRED), is served;
	// anyone else is refused with a message and the refusal is logged.
	// Both empty means the daemon's own uid alone.
	AllowUIDs, AllowGIDs []uint32

	// PoolSize is the pool's size in bytes; 0 means 1 GiB.
	PoolSize int64
	// Align is the block alignment; 0 means allocator.DefaultAlign (4 KiB).
	Align int64
	// Pool says how the pool's memory is made ready.
	Pool PoolOptions

	// L1 configures the manager. Its Now is kept (tests set a clock);
	// everything else is as given, with l1's defaults for zero fields.
	L1 l1.Config

	// FrameTimeout bounds the time from a frame's first byte to its last;
	// 0 means 10 s. There is no idle timeout.
	FrameTimeout time.Duration
	// WriteTimeout bounds writing one answer; 0 means 10 s.
	WriteTimeout time.Duration

	// MetricsAddr, when set, serves /metrics on this loopback address
	// (e.g. 127.0.0.1:9464); any other address is refused.
	MetricsAddr string

	// DebugVerify serves /debug/verify (Verify, as JSON) on the metrics
	// listener and judges every OUT_OF_MEMORY answer against the
	// evictable objects left, holding the other requests off while a
	// reserve_write runs: for soaks, not for serving (see debug.go).
	DebugVerify bool

	// Logger receives the daemon's log; nil means no logging.
	Logger *slog.Logger

	// L2 is the daemon's second tier (l2.go); its zero value is none.
	L2 L2Config
}

// Defaults returns the configuration kvallocd runs with when told
// nothing: the zero Config with the pool populated in the background, and
// l1's recommended setup for a serving engine (on-demand eviction,
// scattered placement, prefix-aware eviction).
func Defaults() Config {
	return Config{
		Pool: PoolOptions{Populate: true},
		L1:   l1.Config{EvictOnDemand: true, Placement: allocator.Scattered, Eviction: l1.EvictPrefix},
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.SocketPath == "" {
		c.SocketPath = wire.DefaultSocketPath()
	}
	if c.SocketMode == 0 {
		c.SocketMode = DefaultSocketMode
	}
	if c.SocketMode&^os.ModePerm != 0 {
		return c, fmt.Errorf("%w: socket mode %v has bits beyond the permissions", l1.ErrInvalidArgument, c.SocketMode)
	}
	if len(c.AllowUIDs) == 0 && len(c.AllowGIDs) == 0 {
		c.AllowUIDs = []uint32{uint32(os.Geteuid())}
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.PoolSize < 0 {
		return c, fmt.Errorf("%w: pool size %d", l1.ErrInvalidArgument, c.PoolSize)
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.FrameTimeout < 0 || c.WriteTimeout < 0 {
		return c, fmt.Errorf("%w: negative timeout (frame %v, write %v)", l1.ErrInvalidArgument, c.FrameTimeout, c.WriteTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}
