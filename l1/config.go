package l1

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// Default lock lifetimes, LMCache's.
const (
	DefaultWriteTTL = 600 * time.Second
	DefaultReadTTL  = 300 * time.Second
)

// NoExpiry is the TTL of a lock that never lapses: math.MaxInt64, about
// 292 years. Any TTL from 1 ns up to it works; an expiry is now+TTL
// saturated at the end of time, and a lock whose expiry saturated never
// lapses, whatever the clock does.
const NoExpiry time.Duration = math.MaxInt64

// MaxReadLocks bounds the read locks one call may take or release per key,
// as LMCache's MAX_READ_LOCK_COUNT does. A call outside [1, MaxReadLocks] is
// rejected, not clamped.
const MaxReadLocks = 128

// Config configures New. The zero Config is LMCache's behaviour with the
// one-pass largest prefix: ContiguousFirst placement, 600 s write and 300 s read
// lock lifetimes, no on-demand eviction.
type Config struct {
	// Placement is passed to every allocation.
	Placement allocator.Placement
	// EvictOnDemand makes ReserveWrite evict evictable objects, in the
	// order of the eviction policy, when a batch does not fit, before it
	// falls back to a prefix. See ReserveWrite.
	EvictOnDemand bool
	// Eviction is the eviction policy, on demand and in EvictTo: which
	// evictable object goes first. The zero value is EvictLRU.
	Eviction EvictionPolicy
	// WriteTTL and ReadTTL are the lock lifetimes, from 1 ns to NoExpiry
	// (never lapses); 0 means the default. Each lock call refreshes the one
	// expiry its lock has (see lock.go).
	WriteTTL, ReadTTL time.Duration
	// QuarantineLapsedWrites is for a manager whose writers can outlive
	// their write locks and still be writing: the processes of a node
	// pool, whose owner (the daemon) learns of a writer's death when its
	// connection closes, and keeps TTLs only as a backstop for a writer
	// that is alive but stuck. A write whose lock lapses is then not
	// reclaimed but quarantined: its key is dropped at once, unreadable
	// (EventRemoved, CauseQuarantined), and may be reserved again by
	// anyone, under a new record and a new block; the block the lapsed
	// writer holds stays allocated, never freed, reissued or evicted,
	// until that writer presents its lease to AbortWrite (freed: OK) or
	// FinishWrite and FinishWriteAndReserveRead (the write is dropped and
	// the block freed: WriteLapsed), or until Close. Stats reports the
	// quarantined objects and bytes. Without it (the default) a lapsed
	// write is reclaimed and its block freed, for in-process writers that
	// are known gone when their lock lapses. See quarantine.go.
	QuarantineLapsedWrites bool
	// Now is the clock; nil means time.Now. It may jump either way by any
	// amount: the manager counts only its forward steps (see lock.go), so
	// a jump back neither lapses nor revives a lock.
	Now func() time.Time
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if !slices.Contains(allocator.Placements, c.Placement) {
		return c, fmt.Errorf("%w: unknown placement %d", ErrInvalidArgument, c.Placement)
	}
	if !c.Eviction.valid() {
		return c, fmt.Errorf("%w: unknown eviction policy %d", ErrInvalidArgument, c.Eviction)
	}
	if c.WriteTTL < 0 || c.ReadTTL < 0 {
		return c, fmt.Errorf("%w: negative lock TTL (write %v, read %v)", ErrInvalidArgument, c.WriteTTL, c.ReadTTL)
	}
	if c.WriteTTL == 0 {
		c.WriteTTL = DefaultWriteTTL
	}
	if c.ReadTTL == 0 {
		c.ReadTTL = DefaultReadTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
