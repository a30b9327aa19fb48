//go:build linux

package daemoncheck

import (
	"encoding/binary"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// Front is the l1check Variant that puts a daemon between the checks and
// the manager: one suite, two front ends. The daemon runs a manager of the
// System's configuration and clock over a pool of the System's capacity and
// alignment; the batch calls go through one client connection (package
// client), and every observation the checks make (Snapshot, State, Stats,
// the allocator's free extents, listeners) is made on the daemon's own
// manager and allocator, in process. UnsafeRead, Clear, EvictTo and Close,
// which are not protocol calls, go to the daemon's manager in process too.
// Keys are the System's ints, carried as 8-byte chunk hashes. The daemon
// quarantines lapsed writes whatever the configuration says (see package
// server), so a suite that lets writes lapse sets Setup.Quarantine for
// both front ends to agree.
//
// Over one connection every lease the System's actors present is the
// connection's, so l1's answers come back unchanged, except that a lease
// the connection never held, or already finished with, is NOT_OWNER, and a
// finish_read beyond what is held is OVER_RELEASE: the suites run through
// it are those whose checks do not depend on those answers (the
// ReserveWrite properties: prefix maximality, request-order locking, tail
// OOM statuses, no leak, and the contract tests of internal/suite).
//
// Its client speaks the client's default protocol version
// (client.DefaultVersion, version 1); FrontVersion picks one.
func Front() l1check.Variant { return FrontVersion(0) }

// FrontVersion is Front with a client that speaks protocol version
// (client.Options.Version; 0 is the default): the suites run through both
// versions, whose answers must be the same.
func FrontVersion(version uint32) l1check.Variant {
	return l1check.Variant{Front: func(m *l1.Manager[l1check.Key], a *allocator.Allocator) (l1check.Manager, *allocator.Allocator, func(), error) {
		return newFront(m, a, version)
	}}
}

func newFront(m *l1.Manager[l1check.Key], a *allocator.Allocator, version uint32) (l1check.Manager, *allocator.Allocator, func(), error) {
	f, fa, closeFront, err := startFront(m, a, server.L2Config{}, version)
	if err != nil {
		return nil, nil, nil, err
	}
	return f, fa, closeFront, nil
}

// startFront starts a daemon of m's configuration over a pool of a's
// capacity and alignment, with the L2 tier l2c, and connects to it with
// a client of protocol version (0: the client's default).
func startFront(m *l1.Manager[l1check.Key], a *allocator.Allocator, l2c server.L2Config, version uint32) (*front, *allocator.Allocator, func(), error) {
	path, err := socketPath()
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := server.New(server.Config{SocketPath: path, PoolSize: a.Capacity(), Align: a.Align(),
		FrameTimeout: time.Minute, WriteTimeout: time.Minute, L1: m.Config(), L2: l2c})
	if err != nil {
		if l2c.Store != nil {
			l2c.Store.Close()
		}
		return nil, nil, nil, err
	}
	go srv.Serve()
	c, err := client.Dial(path, client.Options{Timeout: time.Minute, Version: version})
	if err != nil {
		srv.Close()
		return nil, nil, nil, err
	}
	f := &front{c: c, s: srv, m: srv.Manager()}
	return f, srv.Allocator(), func() {
		c.Close()
		srv.Close()
	}, nil
}

// front is l1check.Manager over a daemon.
type front struct {
	c *client.Client
	s *server.Server
	m *l1.Manager[l1.ObjectKey]
}

// frontKey is the daemon's key of a System key.
func frontKey(k l1check.Key) l1.ObjectKey {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(k))
	return l1.ObjectKey{ChunkHash: string(b[:]), Model: "l1check"}
}

func systemKey(k l1.ObjectKey) l1check.Key {
	return l1check.Key(binary.BigEndian.Uint64([]byte(k.ChunkHash)))
}

func frontKeys(ks []l1check.Key) []l1.ObjectKey {
	out := make([]l1.ObjectKey, len(ks))
	for i, k := range ks {
		out[i] = frontKey(k)
	}
	return out
}

func systemKeys(ks []l1.ObjectKey) []l1check.Key {
	out := make([]l1check.Key, len(ks))
	for i, k := range ks {
		out[i] = systemKey(k)
	}
	return out
}

func (f *front) leases(ls []l1.Lease) []client.Lease {
	out := make([]client.Lease, len(ls))
	for i, l := range ls {
		out[i] = client.Lease{Epoch: f.c.Epoch(), ID: l}
	}
	return out
}

func results(rs []client.Result, err error) ([]l1.Result, error) {
	if err != nil {
		return nil, err
	}
	out := make([]l1.Result, len(rs))
	for i, r := range rs {
		out[i] = l1.Result{Status: l1.Status(r.Status), Block: r.Block.Block, Lease: r.Lease.ID}
	}
	return out, nil
}

func statuses(ss []wire.Status, err error) ([]l1.Status, error) {
	if err != nil {
		return nil, err
	}
	out := make([]l1.Status, len(ss))
	for i, s := range ss {
		out[i] = l1.Status(s)
	}
	return out, nil
}

func (f *front) ReserveWrite(keys []l1check.Key, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	return results(f.c.ReserveWrite(frontKeys(keys), temporary, size, mode))
}

func (f *front) ReserveWriteChain(keys []l1check.Key, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	if len(positions) != 0 && len(positions) != len(keys) {
		// The frame cannot say it; l1 refuses it the same way.
		return f.m.ReserveWriteChain(frontKeys(keys), positions, temporary, size, mode)
	}
	return results(f.c.ReserveWriteChain(frontKeys(keys), positions, temporary, size, mode))
}

func (f *front) FinishWrite(keys []l1check.Key, leases []l1.Lease) ([]l1.Status, error) {
	if len(leases) != len(keys) {
		return f.m.FinishWrite(frontKeys(keys), leases)
	}
	return statuses(f.c.FinishWrite(frontKeys(keys), f.leases(leases)))
}

func (f *front) FinishWriteAndReserveRead(keys []l1check.Key, leases []l1.Lease, locks int) ([]l1.Result, error) {
	if len(leases) != len(keys) {
		return f.m.FinishWriteAndReserveRead(frontKeys(keys), leases, locks)
	}
	return results(f.c.FinishWriteAndReserveRead(frontKeys(keys), f.leases(leases), locks))
}

func (f *front) AbortWrite(keys []l1check.Key, leases []l1.Lease) ([]l1.Status, error) {
	if len(leases) != len(keys) {
		return f.m.AbortWrite(frontKeys(keys), leases)
	}
	return statuses(f.c.AbortWrite(frontKeys(keys), f.leases(leases)))
}

func (f *front) ReserveRead(keys []l1check.Key, locks int) ([]l1.Result, error) {
	return results(f.c.ReserveRead(frontKeys(keys), locks))
}

func (f *front) ReserveReadPrefix(keys []l1check.Key, locks int) ([]l1.Result, int, error) {
	rs, n, err := f.c.ReserveReadPrefix(frontKeys(keys), locks)
	out, err := results(rs, err)
	return out, n, err
}

func (f *front) FinishRead(keys []l1check.Key, leases []l1.Lease, locks int) ([]l1.Status, error) {
	if len(leases) != len(keys) {
		return f.m.FinishRead(frontKeys(keys), leases, locks)
	}
	return statuses(f.c.FinishRead(frontKeys(keys), f.leases(leases), locks))
}

func (f *front) Delete(keys []l1check.Key, force bool) ([]l1.Status, error) {
	return statuses(f.c.Delete(frontKeys(keys), force))
}

func (f *front) Touch(keys []l1check.Key) error { return f.c.Touch(frontKeys(keys)) }

// The rest are not protocol calls: the daemon's manager, in process.

func (f *front) UnsafeRead(keys []l1check.Key) ([]l1.Result, error) {
	return f.m.UnsafeRead(frontKeys(keys))
}
func (f *front) Clear(force bool) int                         { return f.m.Clear(force) }
func (f *front) EvictTo(ratio float64) (int, error)           { return f.m.EvictTo(ratio) }
func (f *front) IsEvictable(key l1check.Key) bool             { return f.m.IsEvictable(frontKey(key)) }
func (f *front) State(key l1check.Key) (l1.ObjectState, bool) { return f.m.State(frontKey(key)) }
func (f *front) Stats() l1.Stats                              { return f.m.Stats() }
func (f *front) Usage() (used, capacity int64)                { return f.m.Usage() }
func (f *front) Len() int                                     { return f.m.Len() }
func (f *front) Close() error                                 { return f.m.Close() }

func (f *front) Snapshot() []l1.Entry[l1check.Key] {
	es := f.m.Snapshot()
	out := make([]l1.Entry[l1check.Key], len(es))
	for i, e := range es {
		out[i] = l1.Entry[l1check.Key]{Key: systemKey(e.Key), ObjectState: e.ObjectState}
	}
	return out
}

func (f *front) AddListenerFunc(fn func(l1.Event[l1check.Key])) {
	f.m.AddListenerFunc(func(e l1.Event[l1.ObjectKey]) {
		fn(l1.Event[l1check.Key]{Kind: e.Kind, Cause: e.Cause, Keys: systemKeys(e.Keys)})
	})
}
