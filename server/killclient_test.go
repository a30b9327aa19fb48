//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/shmpage"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The kill harness's client process (role "killclient"): it runs
// reserve → write → finish → read → verify → release → delete cycles on
// 8 MiB objects of its own, reads and verifies objects other clients
// share, and now and then sends a frame in two halves with a pause
// between, so that the harness can kill it mid-frame. It reports where it
// is, and what it did, on a board: a page of shared memory the harness
// maps too.

// Phases on the board, where the killer aims.
const (
	phaseIdle     = iota // between steps
	phaseDial            // connecting
	phaseReserve         // a reserve_write sent, its answer not yet read
	phaseWrite           // between reserve and finish: writing stamps
	phaseFinish          // a finish_write sent
	phaseRead            // holding read locks, verifying
	phaseMidFrame        // half of a frame sent, the rest not
	phaseRedial          // disconnected, dialing again
	numPhases
)

var phaseNames = [numPhases]string{"idle", "dial", "mid-reserve", "reserved, not finished", "mid-finish",
	"holding read locks", "mid-frame", "redialing"}

// board is the shared page. Only atomics, no pointers: it lives in an
// mmap'ed file, off the Go heap.
type board struct {
	phase      atomic.Uint64
	cycles     atomic.Uint64 // cycles completed
	verified   atomic.Uint64 // bytes of stamps verified
	objects    atomic.Uint64 // objects read and verified
	epoch      atomic.Uint64 // the current connection's epoch; 0 while disconnected
	lostAt     atomic.Int64  // unix ns when the client last saw its daemon go
	lost       atomic.Uint64 // disconnects seen
	stop       atomic.Uint64 // set by the harness: finish and exit 0
	midFrames  atomic.Uint64 // frames sent in two halves
	connects   atomic.Uint64 // successful Dials
	sharedRead atomic.Uint64 // objects of other writers verified
}

// mapBoard maps the board file at path (created when create).
func mapBoard(path string, create bool) (*board, func(), error) {
	p, unmap, err := shmpage.Map(path, create)
	return (*board)(p), unmap, err
}

const (
	killObject  = 8 << 20 // every object: 8 MiB, of which only the stamps are touched
	stampSize   = 64
	stampMagic  = 0x4b56414c4c535450
	sharedGroup = 1 << 20 // the group of the keys every client may write and read
	sharedKeys  = 96
)

// killClient is the process's main.
func killClient() int {
	b, _, err := mapBoard(os.Getenv("KVALLOC_KILL_BOARD"), false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "board:", err)
		return 2
	}
	slot, _ := strconv.Atoi(os.Getenv("KVALLOC_KILL_SLOT"))
	gen, _ := strconv.Atoi(os.Getenv("KVALLOC_KILL_GEN"))
	seed, _ := strconv.ParseUint(os.Getenv("KVALLOC_KILL_SEED"), 10, 64)
	kc := &killer{b: b, slot: uint32(slot), gen: uint32(gen), pid: uint64(os.Getpid()),
		socket: os.Getenv(childSocket), rng: rand.New(rand.NewPCG(seed, uint64(slot)<<32|uint64(gen)))}
	if err := kc.loop(); err != nil {
		fmt.Fprintf(os.Stderr, "killclient slot %d gen %d: FAIL: %v\n", slot, gen, err)
		return 7
	}
	return 0
}

type killer struct {
	b         *board
	slot, gen uint32
	pid       uint64
	socket    string
	rng       *rand.Rand
	c         *client.Client
	raw       *rawClient
	seq       uint64
	nonce     uint64
}

// loop runs cycles until the harness says stop. A lost daemon (the harness
// kills it in its last phase) is survived: the client notes it and dials
// again; any other surprise fails the process.
func (k *killer) loop() error {
	for k.b.stop.Load() == 0 {
		if k.c == nil {
			if err := k.dial(); err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		err := k.cycle()
		if errors.Is(err, client.ErrDisconnected) || errors.Is(err, errRawLost) {
			k.b.lostAt.Store(time.Now().UnixNano())
			k.b.lost.Add(1)
			k.b.epoch.Store(0)
			k.b.phase.Store(phaseRedial)
			k.c.Close()
			k.c = nil
			k.raw.close()
			k.raw = nil
			continue
		}
		if err != nil {
			return err
		}
		k.b.cycles.Add(1)
	}
	if k.c != nil {
		k.c.Close()
		k.raw.close()
	}
	return nil
}

func (k *killer) dial() error {
	k.b.phase.Store(phaseDial)
	c, err := client.Dial(k.socket, client.Options{Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	raw, err := dialRaw(k.socket)
	if err != nil {
		c.Close()
		return err
	}
	raw.b = k.b
	k.c, k.raw = c, raw
	k.b.epoch.Store(c.Epoch())
	k.b.connects.Add(1)
	return nil
}

// ownKey is a key only this client process writes.
func (k *killer) ownKey() l1.ObjectKey {
	k.seq++
	var h [16]byte
	binary.BigEndian.PutUint64(h[:], k.seq)
	binary.BigEndian.PutUint64(h[8:], k.rng.Uint64())
	return l1.ObjectKey{ChunkHash: string(h[:]), Model: "kill-harness", GroupID: k.slot, KVRank: k.gen}
}

func sharedKey(i int) l1.ObjectKey {
	return l1.ObjectKey{ChunkHash: fmt.Sprintf("shared-%03d", i), Model: "kill-harness", GroupID: sharedGroup}
}

func keyHash(k l1.ObjectKey) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k.ChunkHash))
	binary.Write(h, binary.LittleEndian, [2]uint32{k.GroupID, k.KVRank})
	return h.Sum64()
}

// stamp is the 64 bytes written at the start and at the end of an object.
func stamp(k l1.ObjectKey, pid, nonce uint64) [stampSize]byte {
	var s [stampSize]byte
	kh := keyHash(k)
	binary.LittleEndian.PutUint64(s[0:], stampMagic)
	binary.LittleEndian.PutUint64(s[8:], kh)
	binary.LittleEndian.PutUint64(s[16:], pid)
	binary.LittleEndian.PutUint64(s[24:], nonce)
	for i := 32; i < stampSize; i += 8 {
		binary.LittleEndian.PutUint64(s[i:], kh^nonce^uint64(i))
	}
	return s
}

func (k *killer) write(key l1.ObjectKey, b []byte) {
	k.nonce++
	s := stamp(key, k.pid, k.nonce)
	copy(b, s[:])
	copy(b[len(b)-stampSize:], s[:])
}

// verify checks an object's stamps: the same at both ends, of its key, and,
// when pid is not 0, this writer's.
func (k *killer) verify(key l1.ObjectKey, b []byte, pid uint64) error {
	head, tail := b[:stampSize], b[len(b)-stampSize:]
	got := [stampSize]byte(head)
	want := stamp(key, binary.LittleEndian.Uint64(head[16:]), binary.LittleEndian.Uint64(head[24:]))
	switch {
	case string(head) != string(tail):
		return fmt.Errorf("%v: the stamps at the start and the end differ: not one writer's bytes", key)
	case got != want:
		return fmt.Errorf("%v: the stamp is not its key's (magic %#x, key hash %#x): another object's bytes", key,
			binary.LittleEndian.Uint64(head), binary.LittleEndian.Uint64(head[8:]))
	case pid != 0 && binary.LittleEndian.Uint64(head[16:]) != pid:
		return fmt.Errorf("%v: stamped by pid %d, not by its writer %d", key, binary.LittleEndian.Uint64(head[16:]), pid)
	}
	k.b.verified.Add(2 * stampSize)
	k.b.objects.Add(1)
	return nil
}

// want returns a check that a call's statuses are all OK:
// want("finish")(c.FinishWrite(...)).
func want(what string) func([]wire.Status, error) error {
	return func(sts []wire.Status, err error) error {
		if err != nil {
			return err
		}
		for i, s := range sts {
			if s != wire.StatusOK {
				return fmt.Errorf("%s: key %d: %v, on keys only this client holds", what, i, s)
			}
		}
		return nil
	}
}

func (k *killer) dwell() { time.Sleep(time.Duration(k.rng.IntN(2000)) * time.Microsecond) }

// cycle is one round: its own keys through every step, some shared keys,
// and sometimes a frame in two halves.
func (k *killer) cycle() error {
	n := 1 + k.rng.IntN(12)
	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		keys[i] = k.ownKey()
	}
	k.b.phase.Store(phaseReserve)
	res, err := k.c.ReserveWrite(keys, nil, killObject, l1.ModeNew)
	if err != nil {
		return err
	}
	k.b.phase.Store(phaseWrite)
	leases := make([]client.Lease, n)
	for i, r := range res {
		if r.Status != wire.StatusOK {
			return fmt.Errorf("reserve: key %d: %v in a pool with room", i, r.Status)
		}
		b, err := k.c.Bytes(r.Block)
		if err != nil {
			return err
		}
		k.write(keys[i], b)
		leases[i] = r.Lease
	}
	k.dwell()
	k.b.phase.Store(phaseFinish)
	if err := want("finish")(k.c.FinishWrite(keys, leases)); err != nil {
		return err
	}
	k.b.phase.Store(phaseIdle)
	if k.rng.IntN(3) == 0 {
		if err := k.writeShared(); err != nil {
			return err
		}
	}
	k.b.phase.Store(phaseRead)
	rr, got, err := k.c.ReserveReadPrefix(keys, 1)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("read prefix: %d of %d own finished keys (%v)", got, n, rr[got].Status)
	}
	for i, r := range rr {
		b, _ := k.c.Bytes(r.Block)
		if err := k.verify(keys[i], b, k.pid); err != nil {
			return err
		}
		leases[i] = r.Lease
	}
	if err := k.readShared(); err != nil {
		return err
	}
	k.dwell()
	if err := want("release")(k.c.FinishRead(keys, leases, 1)); err != nil {
		return err
	}
	k.b.phase.Store(phaseIdle)
	if k.rng.IntN(6) == 0 {
		if err := k.midFrame(); err != nil {
			return err
		}
	}
	return want("delete")(k.c.Delete(keys, false))
}

// writeShared writes one shared key if nobody has it.
func (k *killer) writeShared() error {
	key := sharedKey(k.rng.IntN(sharedKeys))
	res, err := k.c.ReserveWrite([]l1.ObjectKey{key}, nil, killObject, l1.ModeNew)
	if err != nil {
		return err
	}
	switch res[0].Status {
	case wire.StatusKeyNotWritable: // someone has it, or is writing it
		return nil
	case wire.StatusOK:
	default:
		return fmt.Errorf("reserve shared %v: %v", key, res[0].Status)
	}
	b, _ := k.c.Bytes(res[0].Block)
	k.write(key, b)
	return want("finish shared")(k.c.FinishWrite([]l1.ObjectKey{key}, []client.Lease{res[0].Lease}))
}

// readShared read-locks a few shared keys, verifies whatever it gets, and
// releases it; now and then it deletes one.
func (k *killer) readShared() error {
	keys := make([]l1.ObjectKey, 3)
	for i := range keys {
		keys[i] = sharedKey(k.rng.IntN(sharedKeys))
	}
	res, err := k.c.ReserveRead(keys, 1)
	if err != nil {
		return err
	}
	var held []l1.ObjectKey
	var leases []client.Lease
	for i, r := range res {
		switch r.Status {
		case wire.StatusOK:
			b, _ := k.c.Bytes(r.Block)
			if err := k.verify(keys[i], b, 0); err != nil {
				return err
			}
			k.b.sharedRead.Add(1)
			held, leases = append(held, keys[i]), append(leases, r.Lease)
		case wire.StatusKeyNotExist, wire.StatusKeyNotReadable:
		default:
			return fmt.Errorf("read shared %v: %v", keys[i], r.Status)
		}
	}
	if err := want("release shared")(k.c.FinishRead(held, leases, 1)); err != nil {
		return err
	}
	if k.rng.IntN(4) == 0 {
		sts, err := k.c.Delete(keys[:1], false)
		if err != nil {
			return err
		}
		if s := sts[0]; s != wire.StatusOK && s != wire.StatusKeyIsLocked && s != wire.StatusKeyNotExist {
			return fmt.Errorf("delete shared: %v", s)
		}
	}
	return nil
}

// midFrame reserves two keys on the raw connection and finishes them with
// a frame sent in two halves, a pause between.
func (k *killer) midFrame() error {
	keys := []l1.ObjectKey{k.ownKey(), k.ownKey()}
	a, err := k.raw.call(wire.Request{Type: wire.TypeReserveWrite, Size: killObject, Mode: l1.ModeNew, Keys: keys}, 0)
	if err != nil {
		return err
	}
	leases := make([]l1.Lease, 2)
	for i, r := range a.Results {
		if r.Status != wire.StatusOK {
			return fmt.Errorf("raw reserve: %v", r.Status)
		}
		leases[i] = r.Lease
	}
	pause := time.Duration(2+k.rng.IntN(8)) * time.Millisecond
	a, err = k.raw.call(wire.Request{Type: wire.TypeFinishWrite, Keys: keys, Leases: leases}, pause)
	if err != nil {
		return err
	}
	if err := want("raw finish")(a.Statuses, nil); err != nil {
		return err
	}
	k.b.midFrames.Add(1)
	a, err = k.raw.call(wire.Request{Type: wire.TypeDelete, Keys: keys}, 0)
	if err != nil {
		return err
	}
	return want("raw delete")(a.Statuses, nil)
}

// rawClient speaks frames by hand, to split one.
type rawClient struct {
	c     *net.UnixConn
	epoch uint64
	id    uint32
	enc   wire.Encoder
	dec   wire.Decoder
	b     *board
}

var errRawLost = errors.New("raw connection lost")

func dialRaw(path string) (*rawClient, error) {
	nc, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, err
	}
	r := &rawClient{c: nc.(*net.UnixConn)}
	_ = r.c.SetDeadline(time.Now().Add(2 * time.Second))
	f, _ := r.enc.AppendRequest(nil, &wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version})
	if _, err := r.c.Write(f); err != nil {
		r.c.Close()
		return nil, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := r.c.ReadMsgUnix(buf, oob)
	if err != nil {
		r.c.Close()
		return nil, err
	}
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) > 0 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	var a wire.Answer
	if err := r.dec.DecodeAnswer(buf[:n], &a); err != nil || a.Code != wire.CodeOK {
		r.c.Close()
		return nil, fmt.Errorf("raw hello: %v %v", err, a.Err())
	}
	r.epoch = a.Epoch
	return r, nil
}

// call sends q, its first half then, after pause, the rest, when pause is
// not 0, and reads the answer.
func (r *rawClient) call(q wire.Request, pause time.Duration) (*wire.Answer, error) {
	r.id++
	q.ID, q.Epoch = r.id, r.epoch
	f, err := r.enc.AppendRequest(nil, &q)
	if err != nil {
		return nil, err
	}
	_ = r.c.SetDeadline(time.Now().Add(2*time.Second + pause))
	if pause > 0 {
		if _, err := r.c.Write(f[:len(f)/2]); err != nil {
			return nil, fmt.Errorf("%w: %v", errRawLost, err)
		}
		if r.b != nil {
			r.b.phase.Store(phaseMidFrame)
		}
		time.Sleep(pause)
		f = f[len(f)/2:]
	}
	if _, err := r.c.Write(f); err != nil {
		return nil, fmt.Errorf("%w: %v", errRawLost, err)
	}
	if r.b != nil {
		r.b.phase.Store(phaseIdle)
	}
	in, err := wire.ReadFrame(r.c, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRawLost, err)
	}
	var a wire.Answer
	if err := r.dec.DecodeAnswer(in, &a); err != nil {
		return nil, err
	}
	if err := a.Err(); err != nil {
		if a.Code.Closes() {
			return nil, fmt.Errorf("%w: %v", errRawLost, err)
		}
		return nil, err
	}
	return &a, nil
}

func (r *rawClient) close() {
	if r != nil {
		r.c.Close()
	}
}
