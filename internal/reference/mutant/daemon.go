//go:build linux

package mutant

import (
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// VariantDisconnectForgetsReads ends a connection as a daemon that forgets
// its read locks would: the write reservations its client was granted are
// aborted, and the connection, with every read lock it holds, is left
// behind, open and unused, while a new connection takes its place. Readers
// of one object share its lease, so the forgotten holds keep the object
// pinned and make the other readers' count wrong: the bug of a heartbeat
// reaper that drops a dead worker's bookkeeping but not its locks.
var VariantDisconnectForgetsReads = daemoncheck.Variant{Disconnect: func(s *daemoncheck.System, i int) error {
	c := s.Clients[i]
	var keys []l1.ObjectKey
	var leases []client.Lease
	for k, lease := range s.Book[i].Write {
		keys, leases = append(keys, daemoncheck.Key(k)), append(leases, client.Lease{Epoch: c.Epoch(), ID: lease})
	}
	if _, err := c.AbortWrite(keys, leases); err != nil {
		return err
	}
	return s.Abandon(i)
}}

// VariantDaemonAnswersReversed is the daemon front end (daemoncheck.Front)
// with a client that hands back a reservation's results in reverse order,
// as a client that misread the order of an answer would.
var VariantDaemonAnswersReversed = l1check.Variant{Front: func(m *l1.Manager[l1check.Key], a *allocator.Allocator) (l1check.Manager, *allocator.Allocator, func(), error) {
	f, fa, closeFront, err := daemoncheck.Front().Front(m, a)
	return reversedAnswers{f}, fa, closeFront, err
}}

// VariantDaemonL2AnswersReversed is VariantDaemonAnswersReversed over the
// front end with L2 (daemoncheck.FrontL2 over the Redis at url).
func VariantDaemonL2AnswersReversed(url string) l1check.Variant {
	return l1check.Variant{Front: func(m *l1.Manager[l1check.Key], a *allocator.Allocator) (l1check.Manager, *allocator.Allocator, func(), error) {
		f, fa, closeFront, err := daemoncheck.FrontL2(url).Front(m, a)
		return reversedAnswers{f}, fa, closeFront, err
	}}
}

type reversedAnswers struct{ l1check.Manager }

// ReserveWrite reserves, then reverses the results.
func (r reversedAnswers) ReserveWrite(keys []l1check.Key, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := r.Manager.ReserveWrite(keys, temporary, size, mode)
	slices.Reverse(res)
	return res, err
}

// VariantDaemonForceDeleteFreesAtOnce is a daemon whose delete with force
// frees a locked object's block at once, whoever holds the lock: the
// delete goes through, then the daemon's manager lets go of the deleted
// locks' leases on their holders' behalf (ForceDeleteFreesAtOnce), so the
// block goes to the next writer while another connection still writes or
// reads it, and that connection's late finish finds nothing of its own.
var VariantDaemonForceDeleteFreesAtOnce = daemoncheck.Variant{Delete: func(s *daemoncheck.System, i int, keys []l1.ObjectKey, force bool) ([]wire.Status, error) {
	m := s.Server.Manager()
	var locked []l1.Entry[l1.ObjectKey]
	if force {
		locked = lockedEntries(m, keys)
	}
	sts, err := s.Clients[i].Delete(keys, force)
	if err == nil {
		FreeHeldAtOnce(m, locked)
	}
	return sts, err
}}
