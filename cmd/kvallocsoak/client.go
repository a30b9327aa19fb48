//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The client role: the soak's binary, started by the supervisor with
// KVALLOC_SOAK_ROLE=client and its seat in the environment, replays its
// requests of the trace until the board says stop. At the start of each
// cycle it decides, with probability 1/KVALLOC_SOAK_KILL_EVERY, that the
// cycle ends by SIGKILL, and draws the kill point: a request of the cycle
// and a step of it (killSteps), uniformly. When it gets there it writes a
// byte on file descriptor 3, and goes on: the supervisor's SIGKILL lands
// wherever it has got to by then. On any failure it prints it on stderr
// and exits 7.
const (
	envRole     = "KVALLOC_SOAK_ROLE"
	roleClient  = "client"
	envBoard    = "KVALLOC_SOAK_BOARD"
	envSocket   = "KVALLOC_SOAK_SOCKET"
	envRequests = "KVALLOC_SOAK_REQUESTS"
	envDispatch = "KVALLOC_SOAK_DISPATCH"
	envSlot     = "KVALLOC_SOAK_SLOT"
	envGen      = "KVALLOC_SOAK_GEN"
	envSeed     = "KVALLOC_SOAK_SEED"
	envKill     = "KVALLOC_SOAK_KILL_EVERY"
	envObject   = "KVALLOC_SOAK_OBJECT"
	envCycle    = "KVALLOC_SOAK_CYCLE"
	exitFailed  = 7
)

// clientMain is the client role's main.
func clientMain() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "client %s (pid %d): %v\n", os.Getenv(envSlot), os.Getpid(), err)
		return exitFailed
	}
	env := func(name string) int64 {
		v, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
		return v
	}
	b, _, err := mapBoard(os.Getenv(envBoard), false)
	if err != nil {
		return fail(fmt.Errorf("board: %w", err))
	}
	disp, _, err := mapDispatch(os.Getenv(envDispatch), false)
	if err != nil {
		return fail(fmt.Errorf("dispatch: %w", err))
	}
	all, err := readRequests(os.Getenv(envRequests))
	if err != nil {
		return fail(err)
	}
	r := &replayer{b: b, object: env(envObject), kills: os.NewFile(3, "kills"), doomAt: -1,
		rng: rand.New(rand.NewPCG(uint64(env(envSeed)), uint64(env(envSlot))<<32|uint64(env(envGen))))}
	cycle, killEvery := uint64(env(envCycle)), env(envKill)
	if r.c, err = client.Dial(os.Getenv(envSocket), client.Options{}); err != nil {
		return fail(err)
	}
	b.add(cDials, 1)
	for b.stop.Load() == 0 {
		if n := b.counts[cRequests].Load(); n%cycle == 0 {
			r.doomAt = -1
			if killEvery > 0 && r.rng.Int64N(killEvery) == 0 {
				r.doomAt, r.doomStep = int64(n+r.rng.Uint64N(cycle)), r.rng.IntN(numKillSteps)
			}
		}
		at := b.doing.Load()
		if at == 0 { // else the request its killed predecessor was doing
			at = disp.next.Add(1)
			b.doing.Store(at)
		}
		if err := r.request(&all[(at-1)%uint64(len(all))]); err != nil {
			return fail(fmt.Errorf("request %d of the trace: %w", (at-1)%uint64(len(all)), err))
		}
		b.doing.Store(0)
		b.add(cRequests, 1)
	}
	if err := r.c.Close(); err != nil {
		return fail(err)
	}
	return 0
}

// replayer is one client's state.
type replayer struct {
	b      *board
	c      *client.Client
	object int64
	kills  *os.File
	rng    *rand.Rand
	// doomAt is the request count at which the cycle's kill point lies,
	// or -1; doomStep its step.
	doomAt   int64
	doomStep int

	keys   []l1.ObjectKey
	leases []client.Lease
	pos    []uint32
	gkeys  []l1.ObjectKey
	gblock []int32
}

// request replays one request as an engine's connector does: the cached
// prefix read-locked, its stamps checked, released; the rest reserved,
// stamped, finished.
func (r *replayer) request(q *request) error {
	b := r.b
	r.keys = r.keys[:0]
	for _, blk := range q.blocks {
		r.keys = append(r.keys, keyOf(blk))
	}
	if err := r.at(phasePrefix); err != nil {
		return err
	}
	res, n, err := r.c.ReserveReadPrefix(r.keys, 1)
	if err != nil {
		return fmt.Errorf("reserve_read_prefix of %d keys: %w", len(r.keys), err)
	}
	b.add(cCalls, 1)
	b.add(cLookups, len(r.keys))
	b.add(cHits, n)
	if err := prefixStatuses(res, n); err != nil {
		return err
	}
	if n > 0 {
		if err := r.at(phaseVerify); err != nil {
			return err
		}
		r.leases = r.leases[:0]
		for i := range n {
			obj, err := r.bytes(res[i].Block)
			if err != nil {
				return err
			}
			if err := checkStamps(obj, q.blocks[i]); err != nil {
				return fmt.Errorf("a hit of reserve_read_prefix, read-locked: %w", err)
			}
			r.leases = append(r.leases, res[i].Lease)
		}
		b.add(cVerified, n)
		if err := r.at(phaseFinishRead); err != nil {
			return err
		}
		sts, err := r.c.FinishRead(r.keys[:n], r.leases, 1)
		if err := allOK("finish_read", sts, err); err != nil {
			return err
		}
		b.add(cCalls, 1)
	}
	if n == len(r.keys) {
		return r.at(phaseIdle)
	}
	tail := r.keys[n:]
	r.pos = r.pos[:0]
	for i := range tail {
		r.pos = append(r.pos, uint32(n+i))
	}
	if q.partial {
		r.pos[len(r.pos)-1] |= l1.Partial
	}
	if err := r.at(phaseReserve); err != nil {
		return err
	}
	rs, err := r.c.ReserveWriteChain(tail, r.pos, nil, r.object, l1.ModeNew)
	if err != nil {
		return fmt.Errorf("reserve_write of %d keys: %w", len(tail), err)
	}
	b.add(cCalls, 1)
	b.add(cWriteKeys, len(tail))
	if err := r.at(phaseStamp); err != nil {
		return err
	}
	r.gkeys, r.gblock, r.leases = r.gkeys[:0], r.gblock[:0], r.leases[:0]
	for i, x := range rs {
		switch x.Status {
		case wire.StatusOK:
			obj, err := r.bytes(x.Block)
			if err != nil {
				return err
			}
			writeStamps(obj, q.blocks[n+i])
			r.gkeys, r.gblock, r.leases = append(r.gkeys, tail[i]), append(r.gblock, q.blocks[n+i]), append(r.leases, x.Lease)
		case wire.StatusOutOfMemory:
			b.add(cOOM, 1)
		case wire.StatusKeyNotWritable:
			b.add(cNotWritable, 1)
		default:
			return fmt.Errorf("reserve_write: key %d of %d (block %d): status %v", i, len(tail), q.blocks[n+i], x.Status)
		}
	}
	b.add(cStamped, len(r.gkeys))
	b.add(cGrants, len(r.gkeys))
	if len(r.gkeys) > 0 {
		if err := r.at(phaseFinishWrite); err != nil {
			return err
		}
		sts, err := r.c.FinishWrite(r.gkeys, r.leases)
		if err := allOK("finish_write", sts, err); err != nil {
			return err
		}
		b.add(cCalls, 1)
	}
	return r.at(phaseIdle)
}

// killSteps are a request's kill points, in the order it reaches them:
// before each call, holding read locks, holding write reservations, and
// done. A request that skips a step (no hits, nothing granted) is killed
// at the next one it reaches.
var killSteps = [...]uint64{phasePrefix, phaseVerify, phaseFinishRead, phaseReserve, phaseStamp, phaseFinishWrite, phaseIdle}

const numKillSteps = len(killSteps)

// at notes on the board that the client is at phase p and, at the cycle's
// kill point, asks the supervisor for the SIGKILL.
func (r *replayer) at(p uint64) error {
	r.b.phase.Store(p)
	if r.doomAt < 0 || uint64(r.doomAt) != r.b.counts[cRequests].Load() {
		return nil
	}
	step := 0
	for killSteps[step] != p {
		step++
	}
	if step < r.doomStep && p != phaseIdle {
		return nil
	}
	r.doomAt = -1
	if _, err := r.kills.Write([]byte{'k'}); err != nil {
		return fmt.Errorf("asking the supervisor for the SIGKILL: %w", err)
	}
	return nil
}

// bytes is the object's bytes in the block: its first object bytes.
func (r *replayer) bytes(blk client.Block) ([]byte, error) {
	if blk.Size < r.object {
		return nil, fmt.Errorf("a block of %d bytes for an object of %d", blk.Size, r.object)
	}
	m, err := r.c.Bytes(blk)
	if err != nil {
		return nil, err
	}
	return m[:r.object], nil
}

// prefixStatuses checks a reserve_read_prefix answer: OK up to n, then
// KEY_NOT_EXIST or KEY_NOT_READABLE (being written), then SKIPPED.
func prefixStatuses(res []client.Result, n int) error {
	for i, x := range res {
		ok := false
		switch {
		case i < n:
			ok = x.Status == wire.StatusOK
		case i == n:
			ok = x.Status == wire.StatusKeyNotExist || x.Status == wire.StatusKeyNotReadable
		default:
			ok = x.Status == wire.StatusSkipped
		}
		if !ok {
			return fmt.Errorf("reserve_read_prefix: key %d of %d, prefix %d: status %v", i, len(res), n, x.Status)
		}
	}
	return nil
}

// allOK checks a finishing call: no error, every status OK.
func allOK(what string, sts []wire.Status, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for i, s := range sts {
		if s != wire.StatusOK {
			return fmt.Errorf("%s: key %d of %d: status %v", what, i, len(sts), s)
		}
	}
	return nil
}
