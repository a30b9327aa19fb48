//go:build linux

package server

import "time"

// HoldGate holds the gate exclusively, as Check does, until the returned
// function is called: every request of every connection waits. For tests
// of a daemon that stops answering.
func HoldGate(s *Server) (release func()) {
	s.gate.Lock()
	return s.gate.Unlock
}

// ForgetReadsOnClose makes s forget, when a connection ends, the read
// locks it held (it still aborts its writes): the bug the kill harness's
// bite test must catch.
func ForgetReadsOnClose(s *Server) { s.forgetReads = true }

// ResolveHandlesAnyLease makes s resolve a call by handle to whatever
// hold the handle names now, without checking the lease presented against
// it: the bug the handle tests' bite must catch (a freed handle handed out
// again would finish another hold).
func ResolveHandlesAnyLease(s *Server) { s.handlesAnyLease = true }

// MarkStopping marks every open connection as its shutdown does, without
// ending their reads: their next request is answered CLOSED.
func MarkStopping(s *Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.stop.Store(true)
	}
}

// DropFromHandoffs makes every handoff of this process leave the last
// hundredth of the finished objects out of its index: the bug the handoff
// harness's bite test must catch.
func DropFromHandoffs() { handoffDropBite = true }

// CountUnpaidL2 makes s's lookups count and prefetch every L2 hit,
// whether it pays or not: the bug the break-even rule's bite test must
// catch.
func CountUnpaidL2(s *Server) { s.countUnpaidL2.Store(true) }

// L2PutKeepsRead makes s's copies to L2 keep the daemon's read lock on
// each object for ever (recorded in its ledger, so Check still agrees):
// the bug the ownership model's bite test must catch.
func L2PutKeepsRead(s *Server) { s.l2PutKeepsRead.Store(true) }

// L2PublishUnchecked makes s's prefetches finish every key they reserved,
// a key whose value missed or failed its checks included: the bug the
// ownership model's bite test must catch.
func L2PublishUnchecked(s *Server) { s.l2PublishUnchecked.Store(true) }

// L2IgnoreSizes makes s's lookups and prefix reads ignore the expected
// sizes they carry: the bug the layout test's bite must catch.
func L2IgnoreSizes(s *Server) { s.l2IgnoreSizes.Store(true) }

// L2DirtyTail makes s's L2 loads leave a block's bytes past the payload
// as they were: the bug the layout test's bite must catch.
func L2DirtyTail(s *Server) { s.l2DirtyTail.Store(true) }

// BufferWaiters is how many requests wait for frame buffers now.
func BufferWaiters(s *Server) int {
	s.bufs.mu.Lock()
	defer s.bufs.mu.Unlock()
	return s.bufs.waiters
}

// L2BeforePutRelease makes s's copies to L2 run f between the encode of
// their values and the release of their read locks (a test steps the
// manager's clock there, so that the locks lapse).
func L2BeforePutRelease(s *Server, f func()) { s.l2.beforeRelease.Store(&f) }

// L2PutSendsLapsed makes s's copies to L2 send the values whose read lock
// lapsed before its release: the bug the lapsed-copy test's bite must
// catch.
func L2PutSendsLapsed(s *Server) { s.l2.sendLapsed.Store(true) }

// ReleaseLeasesAtRestart makes every restart of this process (a handoff,
// a stop for systemd's fd store) release its connections' leases and
// hold nothing: the bug the restart tests' bites must catch.
func ReleaseLeasesAtRestart() { restartReleaseBite = true }

// ExitAtHandoffCommit makes the old daemon of every handoff of this
// process exit 0 once the handoff has begun, whether or not the successor
// then serves: the bug the failed-handoff tests' bites must catch.
func ExitAtHandoffCommit() { handoffCommitExitBite = true }

// TakeoverFromAnyUID makes every takeover of this process skip its check
// of the old daemon's uid: the bug the uid test's bite must catch.
func TakeoverFromAnyUID() { takeoverAnyUIDBite = true }

// KillTakeoverAt makes every takeover of this process SIGKILL it at
// point: "asked", "transfer", "ready" or "go".
func KillTakeoverAt(point string) { takeoverDieAt = point }

// SetTakeoverTimeout sets how long a takeover of this process waits for
// the transfer.
func SetTakeoverTimeout(d time.Duration) { handoffDialTimeout = d }

// SkipL2PauseAtHandoff makes every handoff of this process export its
// index while its L2 tier's prefetches and copies go on (as every handoff
// did): the bug the L2 restart test's bite must catch.
func SkipL2PauseAtHandoff() { l2PauseSkipBite = true }

// KeepL2PausedAtResume makes every failed handoff of this process leave
// its L2 tier paused when the daemon serves on: the bug the resumed-L2
// test's bite must catch.
func KeepL2PausedAtResume() { l2ResumeSkipBite = true }
