package fuzz

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// Inputs of the L1 targets are a 6-byte header followed by 12-byte records,
// little endian. Trailing bytes shorter than a record are ignored; an input
// shorter than the header is the all-zero header.
//
// An input's cost is bounded where it is decoded. Every op is checked
// against the model, on each of up to nine systems: comparing every object
// after it costs about the pool's units plus the op's keys, and a
// ReserveWrite (any record can be FuzzReserveWrite's request) about units
// times keys. Unbounded, one input stalled a fuzz worker for minutes: a
// thousand records on the 8192-unit pool took seven. decodeL1 keeps at
// most l1MaxOps records, and stops before the record that takes the sum
// over the records of units plus keys past l1Budget, or of units times
// keys past l1ReserveBudget; the rest is ignored. The budgets admit the
// largest scenario, 5700 keys into room for 4560 units, whose check takes
// about a second.

// l1Header configures the system.
type l1Header struct {
	Units    uint16 // capacity in 64-byte units: 1 + Units % 512, or with the top three bits set 1 + Units & 0x1fff
	Place    uint8  // placement: Place % 3
	Flags    uint8  // bit 0: evict on demand; bits 1-2: prefix strategy % 3; bits 3-5: TTLs; bit 6: quarantine lapsed writes
	KeySpace uint16 // keys are taken modulo 1 + KeySpace
}

const (
	l1HeaderSize = 6
	l1RecordSize = 12
	l1Align      = 64
)

// The bounds on an input's cost (above).
const (
	l1MaxOps        = 256
	l1Budget        = 1 << 14 // units plus keys, summed over the records
	l1ReserveBudget = 1 << 25 // units times keys, summed over the records
)

// l1Record is one operation.
type l1Record struct {
	Op     uint8  // kind: Op % 14, or Close for 0xff
	Arg    uint8  // mode, lock count, ratio or clock step, by kind
	Stride uint8  // key i is (Start + i*Stride) mod the key space
	Flags  uint8  // bit 0: temporary flags / force / fine clock; bit 1: mismatched flags; bits 2-3: actor, or for Advance backwards / huge; bits 4-5: lease mode; bit 7: observe
	Start  uint16 // first key
	Count  uint16 // number of keys: Count & 0x3f, or Count & 0x1fff when bit 15 is set
	Size   uint16 // ReserveWrite size in bytes, or an edge case when bit 15 is set
	Temp   uint16 // temporary flag of key i: bit i % 16
}

// units decodes Units. Pools stay small (at most 512 units, so every
// check after every op is cheap) unless the top three bits are set, which
// allows up to 8192 units for scenarios like 5700 keys into room for 4560.
func (h l1Header) units() int {
	if h.Units>>13 == 7 {
		return 1 + int(h.Units&0x1fff)
	}
	return 1 + int(h.Units)%512
}

// ttls are the TTL pairs the header can pick: the defaults, short ones,
// a write TTL shorter and longer than the read TTL, and the edges: 1 ns
// and math.MaxInt64 (never lapses), alone and mixed.
var ttls = [8][2]time.Duration{
	{0, 0},
	{10 * time.Second, 5 * time.Second},
	{5 * time.Second, 10 * time.Second},
	{10 * time.Second, 10 * time.Second},
	{l1.NoExpiry, l1.NoExpiry},
	{1, 1},
	{l1.NoExpiry, 5 * time.Second},
	{10 * time.Second, l1.NoExpiry},
}

// hugeSteps are the clock jumps of an Advance record with bit 3 set.
var hugeSteps = [4]time.Duration{math.MaxInt64, 200 * 365 * 24 * time.Hour, 1 << 62, time.Nanosecond}

// setup decodes the header into a Setup.
func (h l1Header) setup() l1check.Setup {
	t := ttls[h.Flags>>3&7]
	return l1check.Setup{
		Units:         h.units(),
		Align:         l1Align,
		Placement:     allocator.Placements[h.Place%3],
		Prefix:        baseline.Strategies[(h.Flags>>1&3)%3],
		EvictOnDemand: h.Flags&1 != 0,
		WriteTTL:      t[0],
		ReadTTL:       t[1],
		Quarantine:    h.Flags&0x40 != 0,
	}
}

func encodeL1(h l1Header, recs []l1Record) []byte {
	out := make([]byte, 0, l1HeaderSize+len(recs)*l1RecordSize)
	out = binary.LittleEndian.AppendUint16(out, h.Units)
	out = append(out, h.Place, h.Flags)
	out = binary.LittleEndian.AppendUint16(out, h.KeySpace)
	for _, r := range recs {
		out = append(out, r.Op, r.Arg, r.Stride, r.Flags)
		out = binary.LittleEndian.AppendUint16(out, r.Start)
		out = binary.LittleEndian.AppendUint16(out, r.Count)
		out = binary.LittleEndian.AppendUint16(out, r.Size)
		out = binary.LittleEndian.AppendUint16(out, r.Temp)
	}
	return out
}

func decodeL1(data []byte) (l1Header, []l1Record) {
	var h l1Header
	if len(data) >= l1HeaderSize {
		h = l1Header{
			Units: binary.LittleEndian.Uint16(data), Place: data[2], Flags: data[3],
			KeySpace: binary.LittleEndian.Uint16(data[4:]),
		}
		data = data[l1HeaderSize:]
	} else {
		data = nil
	}
	recs := make([]l1Record, 0, min(len(data)/l1RecordSize, l1MaxOps))
	for cost, reserve := 0, 0; len(data) >= l1RecordSize && len(recs) < l1MaxOps; data = data[l1RecordSize:] {
		r := l1Record{
			Op: data[0], Arg: data[1], Stride: data[2], Flags: data[3],
			Start: binary.LittleEndian.Uint16(data[4:]),
			Count: binary.LittleEndian.Uint16(data[6:]),
			Size:  binary.LittleEndian.Uint16(data[8:]),
			Temp:  binary.LittleEndian.Uint16(data[10:]),
		}
		cost += h.units() + r.count()
		reserve += h.units() * r.count()
		if cost > l1Budget || reserve > l1ReserveBudget {
			break
		}
		recs = append(recs, r)
	}
	return h, recs
}

func (r l1Record) kind() l1check.OpKind {
	if r.Op == 0xff {
		return l1check.OpClose
	}
	return l1check.OpKind(r.Op % uint8(l1check.OpClose))
}

func (r l1Record) count() int {
	if r.Count&0x8000 != 0 {
		return int(r.Count & 0x1fff)
	}
	return int(r.Count & 0x3f)
}

// op decodes the record for a system of the header's shape.
func (r l1Record) op(h l1Header) l1check.Op {
	op := l1check.Op{Kind: r.kind(), Observe: r.Flags&0x80 != 0,
		Actor: int(r.Flags >> 2 & 3), Lease: l1check.LeaseMode(r.Flags >> 4 & 3 % 3)}
	space := 1 + int(h.KeySpace)
	op.Keys = make([]l1check.Key, r.count())
	for i := range op.Keys {
		op.Keys[i] = (int(r.Start) + i*int(r.Stride)) % space
	}
	switch op.Kind {
	case l1check.OpReserveWrite:
		op.Mode = l1.Mode(r.Arg % 3)
		if r.Arg == 0xff {
			op.Mode = 3 // unknown
		}
		op.Size = r.size(h)
		if r.Flags&1 != 0 {
			op.Temporary = make([]bool, len(op.Keys))
			for i := range op.Temporary {
				op.Temporary[i] = r.Temp>>(i%16)&1 != 0
			}
		}
		if r.Flags&2 != 0 {
			op.Temporary = append(op.Temporary, true) // one flag too many
		}
		if r.Flags&0x40 != 0 {
			// A chain: positions from Start, and the Partial hint where
			// Temp's bits, read from the top, say so.
			op.Positions = make([]uint32, len(op.Keys))
			for i := range op.Positions {
				op.Positions[i] = uint32(int(r.Start)%64 + i)
				if r.Temp>>(15-i%16)&1 != 0 {
					op.Positions[i] |= l1.Partial
				}
			}
		}
	case l1check.OpFinishWriteAndReserveRead, l1check.OpReserveRead, l1check.OpFinishRead:
		op.Locks = int(r.Arg) % (l1.MaxReadLocks + 2) // 0 and 129 are invalid
		op.Prefix = op.Kind == l1check.OpReserveRead && r.Flags&0x40 != 0
	case l1check.OpDelete, l1check.OpClear:
		op.Force = r.Flags&1 != 0
	case l1check.OpEvictTo:
		op.Ratio = float64(r.Arg) / 200 // above 1 past 200
	case l1check.OpAdvance:
		op.Actor, op.Lease = 0, 0
		op.Advance = time.Duration(r.Arg) * 5 * time.Second
		if r.Flags&1 != 0 {
			op.Advance = time.Duration(r.Arg) * 100 * time.Millisecond
		}
		if r.Flags&8 != 0 {
			op.Advance = hugeSteps[r.Arg%4]
		}
		if r.Flags&4 != 0 {
			op.Advance = -op.Advance
		}
	}
	return op
}

// size decodes a ReserveWrite size: bytes, or with bit 15 set an edge case:
// zero, negative, or larger than the capacity.
func (r l1Record) size(h l1Header) int64 {
	if r.Size&0x8000 == 0 {
		return int64(r.Size)
	}
	v := int64(r.Size & 0x7fff)
	switch v % 3 {
	case 0:
		return 0
	case 1:
		return -1 - v
	}
	return int64(h.units())*l1Align + 1 + v
}

func decodeL1Ops(data []byte) (l1check.Setup, []l1check.Op) {
	h, recs := decodeL1(data)
	ops := make([]l1check.Op, len(recs))
	for i, r := range recs {
		ops[i] = r.op(h)
	}
	return h.setup(), ops
}
