//go:build linux

package mutant

import (
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/l1"
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
