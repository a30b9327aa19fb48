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
	DefaultPoolSize   = 1 << 30
	DefaultSocketMode = 0o600
	// DefaultRestartHold is Config.RestartHold's default: as long as a
	// write under the default write TTL could take.
	DefaultRestartHold  = l1.DefaultWriteTTL
	DefaultFrameTimeout = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultHelloTimeout = 10 * time.Second
	// DefaultMaxConns and DefaultMaxConnsPerUID are the caps on open
	// connections, in all and from one uid.
	DefaultMaxConns       = 1024
	DefaultMaxConnsPerUID = 512
	// DefaultBufferBudget bounds the frame buffers of all connections
	// together: about a dozen 16 MiB frames at once, or some 250
	// 10,000-key batches.
	DefaultBufferBudget = 256 << 20
)

// Config configures New. The zero Config serves a 1 GiB pool, usable at
// once and backed as it is written, on wire.DefaultSocketPath to the daemon's
// own uid, with l1's zero Config; Defaults is what kvallocd runs.
type Config struct {
	// SocketPath is the Unix socket; "" means wire.DefaultSocketPath. A stale
	// socket file left by a dead daemon is replaced; a live daemon on it,
	// or a file there that is not a socket, makes New fail. So does a
	// path another user could change, with ErrUnsafePath: a directory of
	// it, or one above it, owned by another non-root uid or writable by
	// group or others (above it, unless sticky), or a lock file
	// (SocketPath+".lock") that is a symlink or another user's.
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
	// HelloTimeout bounds the time from accept to the end of the hello:
	// a connection that has not said hello by then is answered TIMEOUT
	// and closed. 0 means 10 s.
	HelloTimeout time.Duration

	// MaxConns caps the connections open at once, and MaxConnsPerUID
	// those of one peer uid (allowed or not); 0 means 1024 and 512. A
	// connection past a cap, or accepted when the daemon is out of file
	// descriptors, is answered TOO_MANY_CONNECTIONS at once and closed.
	MaxConns, MaxConnsPerUID int
	// BufferBudget bounds, in bytes, the frame buffers all connections
	// borrow for frames and answers larger than their own 16 KiB buffers
	// (buffers.go); 0 means 256 MiB, and it must hold at least one
	// largest frame and its answer (20 MiB). A request that finds no
	// budget within FrameTimeout is answered BUSY, and nothing changes.
	BufferBudget int64

	// ConnReadLocks bounds the read locks one connection holds, and
	// ConnWriteBytes the bytes its write reservations ask for; 0 means
	// DefaultConnReadLocks (16,384) and DefaultConnWriteBytes (64 GiB). A
	// call that would pass one is cut: its first keys are carried out, the
	// rest answered OVER_LIMIT (quota.go).
	ConnReadLocks, ConnWriteBytes int64
	// MaxFrame bounds a request frame, header included, in bytes; 0 means
	// wire.MaxFrame (16 MiB), and it may be no less than MinMaxFrame. The
	// hello answer announces it; a larger frame is answered TOO_LARGE and
	// the connection closed.
	MaxFrame int

	// MetricsAddr, when set, serves /metrics on this loopback address
	// (e.g. 127.0.0.1:9464); any other address is refused.
	MetricsAddr string

	// DebugVerify serves /debug/verify (Verify, as JSON) on the metrics
	// listener and judges every OUT_OF_MEMORY answer against the
	// evictable objects left, holding the other requests off while a
	// reserve_write runs: for soaks, not for serving (see debug.go).
	DebugVerify bool

	// Takeover asks the daemon serving SocketPath for its pool, over its
	// handoff socket (HandoffPath), before serving: its finished objects
	// are served on from then on, under a new epoch (handoff.go). When
	// none answers, or what arrives is doubtful, the daemon starts cold
	// and logs why (Server.Start).
	Takeover bool

	// Systemd takes what systemd passes (fdstore.go): a listening socket
	// in $LISTEN_FDS is served instead of binding SocketPath, and a pool
	// and index in systemd's fd store are restored; with $NOTIFY_SOCKET
	// set the daemon reports READY=1 once it serves and keeps its pool
	// and, at Close, its index in the fd store. Without those variables
	// it changes nothing. kvallocd sets it.
	Systemd bool

	// RestartHold bounds how long a restart (a handoff, or a stop that
	// stores the index for systemd's fd store) keeps a block whose lease
	// has no expiry: a write under a WriteTTL of l1.NoExpiry, or a lapsed
	// write held for its owner (l1.Config.QuarantineLapsedWrites). Every
	// other leased block is kept, by this daemon and its successor, until
	// its lease would have lapsed (l1.Manager.HoldLeases). 0 means
	// DefaultRestartHold.
	RestartHold time.Duration

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
	if c.RestartHold == 0 {
		c.RestartHold = DefaultRestartHold
	}
	if c.RestartHold < 0 {
		return c, fmt.Errorf("%w: restart hold %v", l1.ErrInvalidArgument, c.RestartHold)
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
	if c.HelloTimeout == 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if c.FrameTimeout < 0 || c.WriteTimeout < 0 || c.HelloTimeout < 0 {
		return c, fmt.Errorf("%w: negative timeout (frame %v, write %v, hello %v)", l1.ErrInvalidArgument, c.FrameTimeout, c.WriteTimeout, c.HelloTimeout)
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerUID == 0 {
		c.MaxConnsPerUID = DefaultMaxConnsPerUID
	}
	if c.MaxConns < 0 || c.MaxConnsPerUID < 0 {
		return c, fmt.Errorf("%w: negative connection cap (%d, per uid %d)", l1.ErrInvalidArgument, c.MaxConns, c.MaxConnsPerUID)
	}
	if c.BufferBudget == 0 {
		c.BufferBudget = DefaultBufferBudget
	}
	if c.BufferBudget < int64(maxLoan) {
		return c, fmt.Errorf("%w: buffer budget %d is less than one largest frame and its answer (%d bytes)", l1.ErrInvalidArgument, c.BufferBudget, maxLoan)
	}
	if err := c.limitsWithDefaults(); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}
