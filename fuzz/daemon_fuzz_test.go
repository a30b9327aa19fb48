//go:build linux

package fuzz

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// FuzzDaemonOwnership runs random calls of three client connections to
// kvallocd (in process, over real sockets), random disconnects and clock
// advances against the manager model extended with connection ownership
// (daemoncheck.Owners), and compares every answer and, after every step,
// every object's state and the daemon's Check (internal/reference/
// daemoncheck). Ownership shows in the answers (NOT_OWNER for another
// connection's lease or a spent one, OVER_RELEASE for a release beyond the
// connection's holds) and in what a disconnect releases.
func FuzzDaemonOwnership(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		setup, ops := decodeDaemonOps(data)
		if err := checkDaemon(setup, ops, daemoncheck.Variant{}); err != nil {
			t.Fatal(err)
		}
	})
}

// checkDaemon is FuzzDaemonOwnership's body.
func checkDaemon(setup daemoncheck.Setup, ops []daemoncheck.Op, v daemoncheck.Variant) error {
	s, err := daemoncheck.New(setup, v)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Run(ops); err != nil {
		return fmt.Errorf("%+v: %w", setup, err)
	}
	return nil
}

// The input: a 4-byte header, then 8-byte records, one per op, at most
// daemonMaxOps of them (each op is a round trip and a comparison, so a
// long input would cost seconds); trailing bytes shorter than a record,
// and records past the cap, are ignored.
//
//	header: units (8 + b%57), placement/prefix/on-demand (b%3, b/3%3, b/9%2),
//	        eviction policy (b%3), TTLs (bit 0: 60 s write, 30 s read;
//	        bit 1: an L2 tier, daemoncheck.Setup.L2; bit 2: protocol
//	        version 1, else version 2, key handles)
//	record: kind, conn, first key, count (1+b%6; bit 7: the first key
//	        repeated), size (1+b%4 units; bit 4: b bytes; 255: 0) or locks
//	        (1+b%3; 255: 0), mode (b%3; bit 7: chain positions), flags
//	        (bit 0 force, or a lookup's prefetch; bits 1-2 the lease
//	        source %3, %4 with L2; bits 3-4 a pattern of temporary keys),
//	        advance (b*5 s)
//
// Without L2 the kind is b%daemoncheck.NumBaseOpKinds, with it
// b%daemoncheck.NumOpKinds (lookups, loads and L2 evictions too), so that
// the inputs without L2 keep their meaning.
const (
	daemonHeader = 4
	daemonRecord = 8
	daemonMaxOps = 96
)

type daemonRec [daemonRecord]byte

func decodeDaemonOps(data []byte) (daemoncheck.Setup, []daemoncheck.Op) {
	var h [daemonHeader]byte
	copy(h[:], data)
	setup := daemoncheck.Setup{
		Units:     8 + int(h[0])%57,
		Placement: allocator.Placements[int(h[1])%3],
		// h[1]/3%3 chose LMCache's prefix baselines, which the daemon
		// no longer runs; the bit stays unused so the corpus keeps its
		// meaning.
		EvictOnDemand: int(h[1])/9%2 == 1,
		Eviction:      l1.EvictionPolicies[int(h[2])%3],
	}
	if h[3]&1 != 0 {
		setup.WriteTTL, setup.ReadTTL = 60*time.Second, 30*time.Second
	}
	setup.L2 = h[3]&2 != 0
	setup.Version = wire.Version2 // the clients speak version 2, by handle
	if h[3]&4 != 0 {
		setup.Version = wire.Version // version 1
	}
	var ops []daemoncheck.Op
	for rest := data[min(len(data), daemonHeader):]; len(rest) >= daemonRecord && len(ops) < daemonMaxOps; rest = rest[daemonRecord:] {
		ops = append(ops, decodeDaemonOp(daemonRec(rest[:daemonRecord]), setup.L2))
	}
	return setup, ops
}

func decodeDaemonOp(r daemonRec, withL2 bool) daemoncheck.Op {
	kinds, froms := int(daemoncheck.NumBaseOpKinds), 3
	if withL2 {
		kinds, froms = int(daemoncheck.NumOpKinds), 4
	}
	op := daemoncheck.Op{Kind: daemoncheck.OpKind(int(r[0]) % kinds), Conn: int(r[1]) % daemoncheck.Conns}
	n := 1 + int(r[3]&0x7f)%6
	for i := range n {
		k := (int(r[2]) + i) % daemoncheck.Keys
		if r[3]&0x80 != 0 && i == n-1 {
			k = int(r[2]) % daemoncheck.Keys
		}
		op.Keys = append(op.Keys, k)
	}
	switch {
	case r[4] == 255:
		op.Size, op.Locks = 0, 0
	case r[4]&0x10 != 0:
		op.Size, op.Locks = int64(r[4]), 1+int(r[4])%3
	default:
		op.Size, op.Locks = int64(1+int(r[4])%4)*daemoncheck.Unit, 1+int(r[4])%3
	}
	op.Mode = l1.Mode(int(r[5]&0x7f) % 3)
	if r[5]&0x80 != 0 {
		op.Positions = make([]uint32, n)
		for i := range op.Positions {
			op.Positions[i] = uint32(i)
		}
		op.Positions[n-1] |= l1.Partial
	}
	op.Force = r[6]&1 != 0
	op.Prefetch = op.Force
	op.From = daemoncheck.LeaseFrom(int(r[6]>>1&3) % froms)
	if t := r[6] >> 3 & 3; t != 0 {
		op.Temporary = make([]bool, n)
		for i := range op.Temporary {
			op.Temporary[i] = (i+int(t))%3 == 0
		}
	}
	op.Advance = time.Duration(r[7]) * 5 * time.Second
	return op
}

// dop builds records for seeds.
type dop struct{ daemonRec }

func drec(kind daemoncheck.OpKind, conn, first, count int) dop {
	var r daemonRec
	r[0], r[1], r[2], r[3] = byte(kind), byte(conn), byte(first), byte(count-1)
	r[4] = 0 // one unit, one lock
	return dop{r}
}

func (d dop) units(u int) dop { d.daemonRec[4] = byte(u - 1); return d }
func (d dop) locks(n int) dop { d.daemonRec[4] = byte(n - 1); return d }
func (d dop) from(f daemoncheck.LeaseFrom) dop {
	d.daemonRec[6] = d.daemonRec[6]&^(3<<1) | byte(f)<<1
	return d
}
func (d dop) force() dop         { d.daemonRec[6] |= 1; return d }
func (d dop) temporary() dop     { d.daemonRec[6] |= 1 << 3; return d }
func (d dop) mode(m l1.Mode) dop { d.daemonRec[5] = d.daemonRec[5]&0x80 | byte(m); return d }
func (d dop) chain() dop         { d.daemonRec[5] |= 0x80; return d }
func (d dop) repeat() dop        { d.daemonRec[3] |= 0x80; return d }

func dAdvance(seconds int) dop {
	var r daemonRec
	r[0], r[7] = byte(daemoncheck.OpAdvance), byte(seconds/5)
	return dop{r}
}

func dDisconnect(conn int) dop {
	var r daemonRec
	r[0], r[1] = byte(daemoncheck.OpDisconnect), byte(conn)
	return dop{r}
}

func dLookup(conn, first, count int, prefetch bool) dop {
	d := drec(daemoncheck.OpLookup, conn, first, count)
	if prefetch {
		d = d.force()
	}
	return d
}

func dLoad() dop { return drec(daemoncheck.OpLoad, 0, 0, 1) }

func dEvictL2(first, count int) dop { return drec(daemoncheck.OpEvictL2, 0, first, count) }

// encodeDaemon builds an input from a header and records.
func encodeDaemon(h [daemonHeader]byte, ops ...dop) []byte {
	var b bytes.Buffer
	b.Write(h[:])
	for _, op := range ops {
		b.Write(op.daemonRec[:])
	}
	return b.Bytes()
}

const (
	dRW     = daemoncheck.OpReserveWrite
	dFW     = daemoncheck.OpFinishWrite
	dAbort  = daemoncheck.OpAbortWrite
	dFWRR   = daemoncheck.OpFinishWriteAndReserveRead
	dRead   = daemoncheck.OpReserveRead
	dPrefix = daemoncheck.OpReserveReadPrefix
	dFR     = daemoncheck.OpFinishRead
	dDel    = daemoncheck.OpDelete
	dTouch  = daemoncheck.OpTouch
)

func init() {
	small := [daemonHeader]byte{24 - 8, 0, 0, 0}     // 24 units, contiguous-first, onepass, no eviction
	evict := [daemonHeader]byte{12 - 8, 1 + 9, 1, 0} // 12 units, scattered, on-demand, prefix-aware
	lapse := [daemonHeader]byte{16 - 8, 0, 0, 1}     // 60 s write TTL, 30 s read
	withL2 := [daemonHeader]byte{16 - 8, 0, 0, 2}    // an L2 tier
	withL2Lapse := [daemonHeader]byte{16 - 8, 0, 0, 3}
	seedSets["FuzzDaemonOwnership"] = []seed{
		{"own-cycle", encodeDaemon(small,
			drec(dRW, 0, 0, 4).units(2), drec(dFW, 0, 0, 4), drec(dPrefix, 0, 0, 5), drec(dFR, 0, 0, 4), drec(dDel, 0, 0, 4))},
		// Connection 2 presents connection 0's leases (the next one's):
		// NOT_OWNER for every finishing call; connection 0's reservation
		// stands and it finishes.
		{"not-owner", encodeDaemon(small,
			drec(dRW, 0, 2, 3), drec(dFW, 2, 2, 3).from(daemoncheck.LeaseOther), drec(dAbort, 2, 2, 3).from(daemoncheck.LeaseOther),
			drec(dFWRR, 2, 2, 3).from(daemoncheck.LeaseOther), drec(dFW, 0, 2, 3), drec(dFW, 0, 2, 3),
			drec(dRead, 1, 2, 2), drec(dFR, 0, 2, 2).from(daemoncheck.LeaseOther), drec(dFR, 1, 2, 2), drec(dAbort, 0, 2, 1).from(daemoncheck.LeaseZero))},
		// Two readers share a lease; each can release only its own.
		{"over-release", encodeDaemon(small,
			drec(dRW, 0, 5, 2), drec(dFW, 0, 5, 2), drec(dRead, 0, 5, 2), drec(dRead, 1, 5, 2).locks(2),
			drec(dFR, 0, 5, 2).locks(2), drec(dFR, 0, 5, 1).repeat(), drec(dFR, 1, 5, 2).locks(3), drec(dFR, 1, 5, 2).locks(2), drec(dFR, 0, 6, 1))},
		// A connection ends holding writes, read locks on ordinary and
		// temporary objects, shared with another reader: its locks go,
		// the other's stay.
		{"disconnect-holding", encodeDaemon(small,
			drec(dRW, 1, 0, 3), drec(dFW, 1, 0, 3), drec(dRW, 1, 3, 2).temporary(), drec(dFW, 1, 3, 2),
			drec(dRW, 0, 6, 3).chain(), drec(dRead, 0, 0, 5).locks(2), drec(dRead, 1, 0, 1), dDisconnect(0),
			drec(dRead, 2, 0, 5), drec(dFR, 1, 0, 1), drec(dFR, 2, 0, 5), drec(dRW, 2, 6, 3), dDisconnect(1), dDisconnect(2))},
		// Eviction after releases: the order a disconnect releases in is
		// the order recency then evicts in.
		{"disconnect-then-evict", encodeDaemon(evict,
			drec(dRW, 0, 0, 4).units(2), drec(dFW, 0, 0, 4), drec(dRead, 1, 0, 4), drec(dRead, 1, 2, 2), dDisconnect(1),
			drec(dRW, 2, 8, 3).units(2), drec(dRW, 2, 12, 2).units(2), drec(dFW, 2, 8, 3), dDisconnect(2), drec(dRW, 0, 4, 4).units(3))},
		// A writer stalls past its TTL: its lapsed lease, still its own,
		// reaches l1, which refuses it; another writer's stands.
		{"lapse", encodeDaemon(lapse,
			drec(dRW, 0, 1, 2), dAdvance(65), drec(dRW, 1, 1, 2), drec(dFW, 0, 1, 2), drec(dFW, 1, 1, 2),
			drec(dRead, 2, 1, 2), dAdvance(35), drec(dFR, 2, 1, 2), drec(dRead, 0, 1, 1), dDisconnect(0), drec(dDel, 1, 1, 2).force())},
		// With L2: what a finish finished is copied (the daemon's read
		// lock, for the copy only); deleted from L1, it is a lookup's L2
		// run, prefetched under the daemon's write locks, which no
		// connection can finish, abort or release, and which outlive the
		// connection that looked up; unreadable until loaded, then
		// readable with exactly the L2 bytes.
		{"l2-prefetch", encodeDaemon(withL2,
			drec(dRW, 0, 0, 4), drec(dFW, 0, 0, 4), drec(dDel, 0, 0, 4), dLookup(1, 0, 5, false), dLookup(1, 0, 5, true),
			drec(dPrefix, 2, 0, 4), drec(dFW, 2, 0, 4).from(daemoncheck.LeaseDaemon), drec(dAbort, 2, 0, 4).from(daemoncheck.LeaseDaemon),
			drec(dFR, 2, 0, 4).from(daemoncheck.LeaseDaemon), dDisconnect(1), dDisconnect(2), dLoad(),
			drec(dPrefix, 2, 0, 5), drec(dFR, 2, 0, 4), dLookup(0, 0, 4, true))},
		// A value evicted from L2 between the lookup and the load is
		// aborted, and the prefix stops there; the rest of the load stands.
		{"l2-evicted-before-load", encodeDaemon(withL2,
			drec(dRW, 0, 5, 3).units(2), drec(dFWRR, 0, 5, 3), drec(dFR, 0, 5, 3), drec(dDel, 1, 5, 3), dLookup(2, 5, 3, true),
			dEvictL2(6, 1), dLoad(), drec(dPrefix, 1, 5, 3), dLookup(1, 5, 3, true), dLoad())},
		// Two prefetches in flight load in order; a temporary object is not
		// copied (so not in L2); a forced delete of a key being loaded
		// holds its block until the load lets go; the daemon's writes
		// lapse past the write TTL like anyone's.
		{"l2-delete-and-lapse", encodeDaemon(withL2Lapse,
			drec(dRW, 0, 8, 4), drec(dFW, 0, 8, 4), drec(dRW, 0, 12, 3).temporary(), drec(dFW, 0, 12, 3), drec(dDel, 0, 8, 4),
			dLookup(1, 8, 2, true), dLookup(1, 10, 2, true), dLookup(1, 12, 2, true), drec(dDel, 2, 9, 1).force(), drec(dRW, 2, 9, 1), dLoad(),
			dAdvance(65), drec(dRW, 0, 10, 2), dLoad(), dLookup(2, 8, 4, true), dLoad())},
		// Bad arguments are refused whole, and change nothing.
		{"invalid", encodeDaemon(small,
			drec(dRW, 0, 0, 2), dop{func() daemonRec { r := drec(dRW, 0, 3, 1).daemonRec; r[4] = 255; return r }()},
			dop{func() daemonRec { r := drec(dRead, 1, 0, 2).daemonRec; r[4] = 255; return r }()}, drec(dFW, 0, 0, 2), drec(dTouch, 1, 0, 2))},
	}
	// The seeds above speak version 2 (key handles); each again in
	// version 1, whose answers must be the same.
	for _, sd := range seedSets["FuzzDaemonOwnership"] {
		data := bytes.Clone(sd.data)
		data[3] |= 4
		seedSets["FuzzDaemonOwnership"] = append(seedSets["FuzzDaemonOwnership"], seed{"v1-" + sd.name, data})
	}
}

// TestDaemonOpsEncode checks that the seed builders mean what they say.
func TestDaemonOpsEncode(t *testing.T) {
	_, ops := decodeDaemonOps(encodeDaemon([daemonHeader]byte{}, drec(dFR, 2, 5, 3).locks(2).from(daemoncheck.LeaseOther).repeat(), dAdvance(65), dDisconnect(1)))
	if len(ops) != 3 {
		t.Fatalf("%d ops", len(ops))
	}
	if o := ops[0]; o.Kind != dFR || o.Conn != 2 || fmt.Sprint(o.Keys) != "[5 6 5]" || o.Locks != 2 || o.From != daemoncheck.LeaseOther {
		t.Fatalf("%+v", o)
	}
	if ops[1].Kind != daemoncheck.OpAdvance || ops[1].Advance != 65*time.Second || ops[2].Kind != daemoncheck.OpDisconnect || ops[2].Conn != 1 {
		t.Fatalf("%+v %+v", ops[1], ops[2])
	}
	for _, m := range l1.Modes {
		if o := decodeDaemonOp(drec(dRW, 0, 0, 2).temporary().chain().mode(m).force().daemonRec, false); o.Mode != m || o.Temporary == nil || o.Positions == nil || !o.Force {
			t.Fatalf("mode %v: %+v", m, o)
		}
	}
}
