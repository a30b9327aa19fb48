//go:build linux

package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The index: what a successor needs to serve a pool's finished objects,
// and to keep the blocks its predecessor's clients may still use.
//
// A daemon that hands its pool on (handoff.go, fdstore.go) writes the
// index of its finished objects (l1.Manager.Export) beside the memfd, and
// of the blocks held under live leases (l1.Manager.HoldLeases, then
// Held), each with the CLOCK_MONOTONIC time at which its lease lapses
// (the clock every process of the node shares); its successor checks it
// against the memfd it received and against itself, restores an allocator
// holding exactly the index's blocks (allocator.Restore, then Verify) and
// a manager over it (l1.RestoreHeld) that holds each held block in its
// quarantine until that time, and serves the objects under a new epoch.
// A held block whose time has passed is freed. Any doubt, and the
// successor starts cold, with a fresh pool, and logs why: a fresh pool is
// safe for the old one's clients, whose late copies land in the old
// memfd, which nobody reissues.
//
// The layout, little-endian, all of it covered by the CRC32C (Castagnoli)
// at its end:
//
//	u32 magic "KVIX"        indexMagic
//	u16 version             indexVersion (1)
//	u16 policy              the writer's l1.EvictionPolicy
//	u64 pool bytes          the memfd's size
//	u64 align               the allocator's alignment
//	u64 dev, u64 ino        the memfd's identity (fstat)
//	u64 epoch               the writer's epoch
//	u32 count               objects
//	count × object:
//	    u16 len, bytes      ChunkHash (≤ wire.MaxStringLen)
//	    u16 len, bytes      Model
//	    u16 len, bytes      CacheSalt
//	    u32 KVRank, u32 GroupID
//	    i64 offset, i64 block size, u64 generation
//	    i64 size, u32 position, u8 flags (1 temporary, 2 S3-FIFO small), u8 use count
//	    i64 read lapse          (version 2) when its read lock lapses, on
//	                            CLOCK_MONOTONIC (ns); 0: not read-locked
//	u32 held                held blocks (version 2)
//	held × block:
//	    i64 offset, i64 size, u64 generation
//	    u8 flags (1 read lease), i64 lapse (CLOCK_MONOTONIC, ns)
//	u32 crc32c              of every byte before it
//
// Version 1 (no held blocks: its writer released its clients' leases,
// and their blocks would go to the next writer) is refused. A held
// block whose lease has more time left than this daemon's longest lease
// (its TTLs and Config.RestartHold, plus a minute) is refused too.
//
// A torn index (short, a bad CRC, lengths past its end, bytes left over),
// another version, or one of another pool (size, alignment, memfd) is
// refused by decodeIndex with an error wrapping errIndex; blocks that
// overlap or leave the pool, keys twice and sizes that do not fit are
// refused by the restore (allocator.Restore, l1.Restore). An index of
// another eviction policy is restored with its order and without S3-FIFO's
// queues.

const (
	indexMagic   = 0x5849564b // "KVIX"
	indexVersion = 2
	// indexHeader is the fixed part before the objects.
	indexHeader = 4 + 2 + 2 + 8*5 + 4
	// indexObjectMin is an object with three empty strings.
	indexObjectMin = 3*2 + 2*4 + 4*8 + 4 + 2 + 8
	// indexHeld is one held block.
	indexHeld = 3*8 + 1 + 8
)

// errIndex is wrapped by every refusal of an index.
var errIndex = errors.New("kvallocd: index refused")

// castagnoli is CRC32C's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// poolIdentity is what an index is checked against: the memfd it came with
// and the daemon that reads it.
type poolIdentity struct {
	bytes, align int64
	dev, ino     uint64
}

// index is a decoded index.
type index struct {
	id      poolIdentity
	policy  l1.EvictionPolicy
	epoch   uint64
	objects []l1.Saved[l1.ObjectKey]
	// readLapse[i] is objects[i]'s read lock's lapse on CLOCK_MONOTONIC,
	// 0 when it is not read-locked.
	readLapse []int64
	held      []heldBlock
}

// heldBlock is a block under a live lease: lapse is when the lease lapses,
// on CLOCK_MONOTONIC, in nanoseconds.
type heldBlock struct {
	block allocator.Block
	read  bool
	lapse int64
}

// monotonicNow is CLOCK_MONOTONIC in nanoseconds: one clock for every
// process of the node (a memfd never outlives a boot).
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("kvallocd: CLOCK_MONOTONIC: %v", err))
	}
	return ts.Nano()
}

// heldOf is l1's held blocks as the index keeps them, their lapses on
// CLOCK_MONOTONIC.
func heldOf(hs []l1.HeldBlock) []heldBlock {
	now := monotonicNow()
	out := make([]heldBlock, len(hs))
	for i, h := range hs {
		out[i] = heldBlock{block: h.Block, read: h.Read, lapse: lapseOf(now, h.Left)}
	}
	return out
}

// lapseOf is the CLOCK_MONOTONIC time left after now: MaxInt64 for
// l1.NoExpiry, 0 for none.
func lapseOf(now int64, left time.Duration) int64 {
	switch {
	case left <= 0:
		return 0
	case left == l1.NoExpiry || left >= time.Duration(math.MaxInt64-now):
		return math.MaxInt64
	}
	return now + int64(left)
}

// encodeIndex appends the index of objects to dst.
// readLapse[i], when given, is objects[i]'s read lock's lapse
// (CLOCK_MONOTONIC, 0: none).
func encodeIndex(dst []byte, id poolIdentity, policy l1.EvictionPolicy, epoch uint64, objects []l1.Saved[l1.ObjectKey], readLapse []int64, held []heldBlock) []byte {
	le := binary.LittleEndian
	start := len(dst)
	dst = le.AppendUint32(dst, indexMagic)
	dst = le.AppendUint16(dst, indexVersion)
	dst = le.AppendUint16(dst, uint16(policy))
	dst = le.AppendUint64(dst, uint64(id.bytes))
	dst = le.AppendUint64(dst, uint64(id.align))
	dst = le.AppendUint64(dst, id.dev)
	dst = le.AppendUint64(dst, id.ino)
	dst = le.AppendUint64(dst, epoch)
	dst = le.AppendUint32(dst, uint32(len(objects)))
	str := func(s string) {
		dst = le.AppendUint16(dst, uint16(len(s)))
		dst = append(dst, s...)
	}
	for i := range objects {
		o := &objects[i]
		str(o.Key.ChunkHash)
		str(o.Key.Model)
		str(o.Key.CacheSalt)
		dst = le.AppendUint32(dst, o.Key.KVRank)
		dst = le.AppendUint32(dst, o.Key.GroupID)
		dst = le.AppendUint64(dst, uint64(o.Block.Offset))
		dst = le.AppendUint64(dst, uint64(o.Block.Size))
		dst = le.AppendUint64(dst, o.Block.Gen)
		dst = le.AppendUint64(dst, uint64(o.Size))
		dst = le.AppendUint32(dst, o.Pos)
		var flags uint8
		if o.Temporary {
			flags |= 1
		}
		if o.Small {
			flags |= 2
		}
		dst = append(dst, flags, o.Freq)
		var lapse int64
		if i < len(readLapse) {
			lapse = readLapse[i]
		}
		dst = le.AppendUint64(dst, uint64(lapse))
	}
	dst = le.AppendUint32(dst, uint32(len(held)))
	for _, h := range held {
		dst = le.AppendUint64(dst, uint64(h.block.Offset))
		dst = le.AppendUint64(dst, uint64(h.block.Size))
		dst = le.AppendUint64(dst, h.block.Gen)
		var flags uint8
		if h.read {
			flags = 1
		}
		dst = append(dst, flags)
		dst = le.AppendUint64(dst, uint64(h.lapse))
	}
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeIndex checks b and decodes it; want is the pool it must describe.
// Every length is checked against what is left before it is used.
func decodeIndex(b []byte, want poolIdentity) (*index, error) {
	le := binary.LittleEndian
	if len(b) < indexHeader+4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a header (torn)", errIndex, len(b))
	}
	if le.Uint32(b) == 0 {
		return nil, fmt.Errorf("%w: it was consumed: a daemon restored it and served after it was written (stale)", errIndex)
	}
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: CRC32C %#08x, the index says %#08x (torn or overwritten)", errIndex, got, sum)
	}
	if m := le.Uint32(body); m != indexMagic {
		return nil, fmt.Errorf("%w: magic %#x is not an index's", errIndex, m)
	}
	if v := le.Uint16(body[4:]); v != indexVersion {
		return nil, fmt.Errorf("%w: version %d, this daemon reads %d", errIndex, v, indexVersion)
	}
	pol := le.Uint16(body[6:])
	if pol > 0xff || !slices.Contains(l1.EvictionPolicies, l1.EvictionPolicy(pol)) {
		return nil, fmt.Errorf("%w: unknown eviction policy %d", errIndex, pol)
	}
	x := &index{policy: l1.EvictionPolicy(pol)}
	x.id = poolIdentity{bytes: int64(le.Uint64(body[8:])), align: int64(le.Uint64(body[16:])), dev: le.Uint64(body[24:]), ino: le.Uint64(body[32:])}
	x.epoch = le.Uint64(body[40:])
	n := le.Uint32(body[48:])
	switch {
	case x.id.bytes != want.bytes:
		return nil, fmt.Errorf("%w: it describes a pool of %d bytes, the memfd has %d (stale)", errIndex, x.id.bytes, want.bytes)
	case x.id.align != want.align:
		return nil, fmt.Errorf("%w: it was written with alignment %d, this daemon runs %d", errIndex, x.id.align, want.align)
	case x.id.dev != want.dev || x.id.ino != want.ino:
		return nil, fmt.Errorf("%w: it describes memfd %d:%d, not the one received (%d:%d): stale", errIndex, x.id.dev, x.id.ino, want.dev, want.ino)
	case uint64(n)*indexObjectMin+4 > uint64(len(body)-indexHeader):
		return nil, fmt.Errorf("%w: %d objects cannot fit in %d bytes (torn)", errIndex, n, len(body)-indexHeader)
	}
	p := body[indexHeader:]
	short := func(i uint32) error { return fmt.Errorf("%w: object %d runs past the end (torn)", errIndex, i) }
	str := func() (string, bool) {
		if len(p) < 2 {
			return "", false
		}
		l := int(le.Uint16(p))
		if l > wire.MaxStringLen || len(p) < 2+l {
			return "", false
		}
		s := string(p[2 : 2+l])
		p = p[2+l:]
		return s, true
	}
	x.objects = make([]l1.Saved[l1.ObjectKey], n)
	x.readLapse = make([]int64, n)
	for i := range n {
		o := &x.objects[i]
		var ok1, ok2, ok3 bool
		o.Key.ChunkHash, ok1 = str()
		o.Key.Model, ok2 = str()
		o.Key.CacheSalt, ok3 = str()
		if !ok1 || !ok2 || !ok3 || len(p) < 2*4+4*8+4+2+8 {
			return nil, short(i)
		}
		o.Key.KVRank, o.Key.GroupID = le.Uint32(p), le.Uint32(p[4:])
		o.Block = allocator.Block{Offset: int64(le.Uint64(p[8:])), Size: int64(le.Uint64(p[16:])), Gen: le.Uint64(p[24:])}
		o.Size, o.Pos = int64(le.Uint64(p[32:])), le.Uint32(p[40:])
		flags := p[44]
		o.Temporary, o.Small, o.Freq = flags&1 != 0, flags&2 != 0, p[45]
		if flags&^3 != 0 {
			return nil, fmt.Errorf("%w: object %d has unknown flags %#x", errIndex, i, flags)
		}
		x.readLapse[i] = int64(le.Uint64(p[46:]))
		p = p[54:]
	}
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: no count of held blocks (torn)", errIndex)
	}
	nh := le.Uint32(p)
	p = p[4:]
	if uint64(nh)*indexHeld != uint64(len(p)) {
		return nil, fmt.Errorf("%w: %d held blocks in %d bytes (torn)", errIndex, nh, len(p))
	}
	x.held = make([]heldBlock, nh)
	for i := range x.held {
		h := &x.held[i]
		h.block = allocator.Block{Offset: int64(le.Uint64(p)), Size: int64(le.Uint64(p[8:])), Gen: le.Uint64(p[16:])}
		if p[24]&^1 != 0 {
			return nil, fmt.Errorf("%w: held block %d has unknown flags %#x", errIndex, i, p[24])
		}
		h.read, h.lapse = p[24] == 1, int64(le.Uint64(p[25:]))
		p = p[indexHeld:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last object", errIndex, len(p))
	}
	return x, nil
}

// restoreIndex builds the allocator and the manager of x over the pool r,
// whose allocator is fresh: allocator.Restore of every block, Verify, then
// l1.RestoreHeld, the held blocks whose leases have not lapsed held in
// its quarantine for the time they have left, at most maxHold. Under
// another policy than the writer's, S3-FIFO's queues are dropped and the
// order kept. Any failure leaves r's allocator to the caller to close.
func restoreIndex(a *allocator.Allocator, cfg l1.Config, x *index, maxHold time.Duration) (*l1.Manager[l1.ObjectKey], error) {
	if x.policy != cfg.Eviction {
		for i := range x.objects {
			x.objects[i].Small, x.objects[i].Freq = false, 0
		}
	}
	blocks := make([]allocator.Block, len(x.objects), len(x.objects)+len(x.held))
	for i := range x.objects {
		blocks[i] = x.objects[i].Block
	}
	now := monotonicNow()
	for i, lapse := range x.readLapse {
		if lapse <= now {
			continue // not read-locked, or lapsed
		}
		if lapse-now > int64(maxHold) {
			return nil, fmt.Errorf("%w: object %d's read lock has %v left, longer than this daemon holds any (%v): written under other TTLs", errIndex, i, time.Duration(lapse-now), maxHold)
		}
		x.objects[i].ReadLeft = time.Duration(lapse - now)
	}
	var held []l1.HeldBlock
	for i, h := range x.held {
		left := time.Duration(h.lapse - now)
		if h.lapse <= now {
			continue // lapsed: free
		}
		if h.lapse-now > int64(maxHold) {
			return nil, fmt.Errorf("%w: held block %d's lease has %v left, longer than this daemon holds any (%v): written under other TTLs", errIndex, i, left, maxHold)
		}
		held = append(held, l1.HeldBlock{Block: h.block, Read: h.read, Left: left})
		blocks = append(blocks, h.block)
	}
	if err := a.Restore(blocks); err != nil {
		return nil, fmt.Errorf("%w: %w", errIndex, err)
	}
	if err := a.Verify(); err != nil {
		return nil, fmt.Errorf("%w: the restored allocator fails Verify: %w", errIndex, err)
	}
	m, err := l1.RestoreHeld[l1.ObjectKey](a, cfg, x.objects, held)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errIndex, err)
	}
	return m, nil
}
