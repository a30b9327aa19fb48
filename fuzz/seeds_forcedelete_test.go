package fuzz

import (
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Seeds of forced deletes under every kind of lock: a write, a rewrite of
// a finished object, a read lock, a temporary object's, the read lock of
// FinishWriteAndReserveRead, a lapsed write; then another actor writes the
// keys again and the holders make their late calls. The rule they test:
// no block is freed, reissued or evicted while a lease on it is live
// (l1's "Forced deletes"). The file's name sorts after the targets' own
// seed files, whose init functions set the lists these append to.

// forceEveryLock is everyLockState, with key 12's write finished into a
// read lock (FinishWriteAndReserveRead), every key deleted with force by
// actor 2, the pool written again by actor 1, and actor 0's late calls on
// what it held.
func forceEveryLock() []l1Record {
	return append(everyLockState(), obsAll(
		fwrr(12, 1, 2), del(0, 16).force().by(2), rw(0, 16, 256, l1.ModeAll).by(1),
		fw(10, 2), abort(13, 1), fwrr(14, 2, 1), fr(3, 2, 1), fr(6, 1, 2), fr(12, 1, 1), fr(12, 1, 1),
		fw(0, 16).by(1), rr(0, 16, 1).by(3), fr(0, 16, 1).by(3),
		rw(0, 4, 256, l1.ModeAll).by(2), rr(4, 2, 1).by(2), clr().force().by(3), rw(0, 16, 256, l1.ModeAll).by(1),
		abort(0, 4).by(2), fr(4, 2, 1).by(2), rw(0, 16, 256, l1.ModeAll).by(3),
	)...)
}

func init() {
	lifeHdr := hdr(64, allocator.ContiguousFirst, 16)
	seedSets["FuzzL1Lifecycle"] = append(seedSets["FuzzL1Lifecycle"],
		seed{"force-delete-every-lock", encodeL1(lifeHdr, forceEveryLock())},
		// Under quarantine: a deleted write outlives its TTL and waits for
		// its owner; a deleted read lock lapses and frees its block; a
		// lapsed write is not the delete's to free.
		seed{"force-delete-quarantine", encodeL1(lifeHdr.quarantine().ttl(1), obsAll(
			rw(0, 4, 256, l1.ModeAll), fw(0, 2), rr(0, 2, 1), del(0, 4).force().by(1), adv(11*time.Second), length(),
			rw(0, 4, 256, l1.ModeAll).by(1), fw(2, 2), fr(0, 2, 1), fw(0, 4).by(1),
			rw(8, 2, 256, l1.ModeAll), adv(11*time.Second), del(8, 2).force().by(1), rw(8, 2, 256, l1.ModeAll).by(1),
			abort(8, 2), fw(8, 2).by(1), clr().force(),
		))},
	)
	rwHdr := hdr(64, allocator.ContiguousFirst, 65536)
	seedSets["FuzzReserveWrite"] = append(seedSets["FuzzReserveWrite"],
		seed{"force-delete-every-lock", encodeL1(rwHdr, append(everyLockState(), del(0, 16).force(), rw(0, 20, 256, l1.ModeAll)))},
		seed{"force-delete-quarantine", encodeL1(rwHdr.quarantine().ttl(1), append(everyLockState(),
			del(0, 16).force(), adv(11*time.Second), rw(0, 20, 128, l1.ModeAll), rw(30, 5, 256, l1.ModeAll)))},
	)
	small := [daemonHeader]byte{24 - 8, 0, 0, 0}
	lapse := [daemonHeader]byte{16 - 8, 0, 0, 1}
	seedSets["FuzzDaemonOwnership"] = append(seedSets["FuzzDaemonOwnership"],
		// Connection 0 holds writes (0, 1), read locks (2, 3, two each)
		// and FinishWriteAndReserveRead's (4 to 6, 6 temporary);
		// connection 2 deletes them all with force; connection 1 writes
		// them again; connection 0 finishes late, releases, disconnects.
		seed{"force-delete-others-locks", encodeDaemon(small,
			drec(dRW, 0, 0, 2), drec(dRW, 0, 2, 2), drec(dFW, 0, 2, 2), drec(dRead, 0, 2, 2).locks(2),
			drec(dRW, 0, 4, 3).temporary(), drec(dFWRR, 0, 4, 3),
			drec(dDel, 2, 0, 6).force(), drec(dDel, 2, 6, 1).force(), drec(dRW, 1, 0, 6), drec(dRW, 1, 6, 1),
			drec(dFW, 0, 0, 2), drec(dFR, 0, 2, 2), drec(dFR, 0, 2, 2), drec(dFW, 1, 0, 6), drec(dFW, 1, 6, 1),
			drec(dRead, 2, 0, 6), drec(dFR, 2, 0, 6), dDisconnect(0))},
		// The holder disconnects instead; a lapse under the daemon's TTLs.
		seed{"force-delete-then-disconnect", encodeDaemon(lapse,
			drec(dRW, 0, 0, 2), drec(dRW, 0, 2, 2), drec(dFW, 0, 2, 2), drec(dRead, 0, 2, 2),
			drec(dDel, 1, 0, 4).force(), drec(dRW, 2, 0, 4), dAdvance(65), drec(dRW, 1, 0, 4), dDisconnect(0),
			drec(dRW, 1, 0, 4), drec(dFW, 2, 0, 4), drec(dFW, 1, 0, 4))},
	)
}
