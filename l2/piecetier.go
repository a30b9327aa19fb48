package l2

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// PayloadStore is a Store that stores payloads straight from the
// caller's memory: the daemon calls it under its read locks, so that a
// put is no copy of the object first. Tier is one.
type PayloadStore interface {
	Store
	// PutPayloads stores payloads[i] as keys[i]'s object and returns how
	// many it stored. It reads payloads[i] during the call only, and the
	// caller must keep those bytes unchanged until it returns.
	PutPayloads(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int
}

var _ PayloadStore = (*Tier)(nil)

// PutPayloads implements PayloadStore: in pieces (Options.PieceSize),
// each piece's header apart from its payload, which is written from
// payloads[i] itself; or as whole values (Encode, a copy, then Put).
func (t *Tier) PutPayloads(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int {
	if t.p == nil {
		vals := make([][]byte, len(keys))
		for i := range keys {
			vals[i], _ = t.opts.Codec.Encode(nil, &keys[i], payloads[i]) // nil (never stored) for a key too long
		}
		return t.Put(ctx, keys, vals)
	}
	return t.putPieces(ctx, keys, payloads)
}

// pieceReq is one piece of a batch: object i's piece j.
type pieceReq struct{ obj, index int }

// pieceBatch names the pieces of objects of the given sizes.
func (t *Tier) pieceBatch(keys []l1.ObjectKey, sizes []int64) (reqs []pieceReq, names []string, slots []int) {
	for i := range keys {
		if sizes[i] < 0 {
			continue
		}
		base := StoreKey(t.opts.Prefix, &keys[i])
		for j := range PieceCount(sizes[i], t.opts.PieceSize) {
			reqs = append(reqs, pieceReq{i, j})
			names = append(names, pieceName(t.opts.Prefix, base, j))
			slots = append(slots, pieceSlot(base, j))
		}
	}
	return reqs, names, slots
}

func (t *Tier) putPieces(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int {
	if len(keys) != len(payloads) {
		panic("l2: PutPayloads of keys and payloads of different lengths")
	}
	if len(keys) == 0 {
		return 0
	}
	sizes := make([]int64, len(keys))
	ids := make([]uint64, len(keys))
	for i := range keys {
		sizes[i], ids[i] = int64(len(payloads[i])), rand.Uint64()
		k := &keys[i]
		if len(k.ChunkHash) > MaxKeyField || len(k.Model) > MaxKeyField || len(k.CacheSalt) > MaxKeyField ||
			PieceCount(sizes[i], t.opts.PieceSize) > MaxPieces {
			sizes[i] = -1 // never stored
		}
	}
	reqs, names, slots := t.pieceBatch(keys, sizes)
	ok := make([]bool, len(names))
	build := func(r int) [][]byte {
		q := reqs[r]
		k, p := &keys[q.obj], payloads[q.obj]
		off, end := pieceSpan(sizes[q.obj], t.opts.PieceSize, q.index)
		// The CRC32C and MAC right before the write: the bytes are in
		// the core's cache when the kernel copies them.
		h, err := t.opts.Codec.AppendPieceHeader(nil, k, sizes[q.obj], t.opts.PieceSize, q.index, ids[q.obj], p[off:end])
		if err != nil {
			return nil
		}
		return [][]byte{h, p[off:end]}
	}
	// send writes the pieces sel (indexes of reqs), each master's through
	// its breaker (each) on the piece path's own connection to it, and
	// returns how many were skipped.
	send := func(sel []int) int {
		ns, ss := pick(names, sel), pick(slots, sel)
		return len(t.each(ctx, ns, func(ctx context.Context, idx []int) error {
			got, err := t.p.set(ctx, pick(ns, idx), pick(ss, idx), func(j int) [][]byte { return build(sel[idx[j]]) })
			for j, i := range idx {
				ok[sel[i]] = got[j]
			}
			return err
		}))
	}
	// Piece 0 is the object's commit: Head counts an object by it, so it
	// is written only once every other piece of its object is stored. A
	// put cut short (a daemon killed, a master failing, the context's
	// end) leaves no piece 0 of its own, and no lookup counts an object
	// a load would miss.
	var rest, heads []int
	for r, q := range reqs {
		if q.index == 0 && PieceCount(sizes[q.obj], t.opts.PieceSize) > 1 && !t.bugs.commitWithRest {
			heads = append(heads, r)
		} else {
			rest = append(rest, r)
		}
	}
	start := time.Now()
	if send(rest) == len(rest) {
		t.c.drops.Add(uint64(len(keys)))
		return 0
	}
	whole := make([]bool, len(keys))
	for i := range keys {
		whole[i] = sizes[i] >= 0
	}
	for _, r := range rest {
		if !ok[r] {
			whole[reqs[r].obj] = false
		}
	}
	var commit, stale []int
	for _, r := range heads {
		if whole[reqs[r].obj] {
			commit = append(commit, r)
		} else {
			stale = append(stale, r)
		}
	}
	if len(commit) > 0 {
		send(commit)
	}
	// An object whose other pieces did not all go keeps an earlier put's
	// piece 0, if any: it names pieces this put may have replaced, and a
	// lookup would count the object. Best effort: a piece 0 left names a
	// mix of puts, a miss at load.
	if len(stale) > 0 {
		del := pick(names, stale)
		t.each(ctx, del, func(ctx context.Context, idx []int) error { return t.b.Del(ctx, pick(del, idx)) })
	}
	since(t.c.putLatency, start)
	for _, r := range heads {
		if !ok[r] {
			whole[reqs[r].obj] = false
		}
	}
	stored := 0
	for i := range keys {
		if whole[i] {
			stored++
			t.c.bytesOut.Add(uint64(sizes[i]))
		}
	}
	t.c.puts.Add(uint64(stored))
	t.c.putFailures.Add(uint64(len(keys) - stored))
	return stored
}

// headPieces is Head in pieces: piece 0's header and key, and its
// length, which must be its payload's for the object's size.
func (t *Tier) headPieces(ctx context.Context, keys []l1.ObjectKey) []int64 {
	sizes := make([]int64, len(keys))
	for i := range sizes {
		sizes[i] = -1
	}
	if len(keys) == 0 {
		return sizes
	}
	names := make([]string, len(keys))
	n := make([]int, len(keys))
	for i := range keys {
		names[i] = PieceName(t.opts.Prefix, &keys[i], 0)
		n[i] = PiecePrefixLen(&keys[i])
	}
	pre := make([][]byte, len(keys))
	lens := make([]int64, len(keys))
	start := time.Now()
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		p, l, err := t.b.GetPrefix(ctx, pick(names, idx), pick(n, idx))
		for j, i := range idx {
			if j < len(p) && j < len(l) {
				pre[i], lens[i] = p[j], l[j]
			}
		}
		return err
	})
	since(t.c.headLatency, start)
	var bad []int
	for i := range keys {
		if pre[i] == nil || lens[i] < 0 {
			continue
		}
		h, err := t.opts.Codec.DecodePieceHeader(&keys[i], pre[i])
		if err != nil {
			if t.refused(err) {
				bad = append(bad, i)
			}
			continue
		}
		off, end := pieceSpan(h.Size, h.PieceSize, 0)
		if h.Index != 0 || h.PieceSize != t.opts.PieceSize || lens[i] != int64(n[i])+end-off {
			continue // another layout, or a piece 0 of the wrong length: a miss
		}
		sizes[i] = h.Size
	}
	t.corrupt(ctx, keys, names, bad)
	if down := t.refusing(); down != nil {
		t.unreachable(ctx, keys, sizes, down)
	}
	hits := 0
	for _, s := range sizes {
		if s >= 0 {
			hits++
		}
	}
	t.c.headHits.Add(uint64(hits))
	t.c.headMisses.Add(uint64(len(keys) - hits))
	return sizes
}

// unreachable makes a miss of each object of sizes (a hit of Head)
// with a piece on a server in down, whose breaker refuses calls now: a
// load would skip that piece and miss the object, so a lookup must not
// count it. Piece 0 alone, which Head reads, cannot tell: an object in
// pieces has pieces on every master, and a hung or dead one, its
// breaker open, made lookups count hits of which no prefetch loaded
// one.
func (t *Tier) unreachable(ctx context.Context, keys []l1.ObjectKey, sizes []int64, down map[string]bool) {
	s, ok := t.b.(Sharded)
	if !ok {
		return // one server: Head's own call was refused
	}
	reqs, names, _ := t.pieceBatch(keys, sizes)
	if len(names) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	ids, groups := s.Shards(sctx, names)
	cancel()
	for g, id := range ids {
		if down[id] {
			for _, i := range groups[g] {
				sizes[reqs[i].obj] = -1
			}
		}
	}
}

// Object outcomes of a piece load, worst last: a piece missing, of
// another layout or put, of another version or secret (ErrForeign), then
// a piece that failed a MAC (ErrForged) or a check (ErrCorrupt).
const (
	pieceOK int32 = iota
	pieceMissing
	pieceOther
	pieceForeign
	pieceForged
	pieceCorrupt
)

// pieceRefusal is the outcome of a piece refused with err.
func pieceRefusal(err error) int32 {
	switch {
	case errors.Is(err, ErrForeign):
		return pieceForeign
	case errors.Is(err, ErrForged):
		return pieceForged
	}
	return pieceCorrupt
}

// pieceObj is one object of a piece load.
type pieceObj struct {
	id     atomic.Uint64
	idSet  atomic.Bool
	idMu   sync.Mutex
	state  atomic.Int32
	good   atomic.Int32 // pieces read and checked
	pieces int
	// absent: a piece's master answered that it has no such value;
	// unreached: a piece's master did not answer it (down, refused).
	absent, unreached atomic.Bool
}

func (o *pieceObj) mark(s int32) {
	for {
		old := o.state.Load()
		if old >= s || o.state.CompareAndSwap(old, s) {
			return
		}
	}
}

// sameID reports whether id is the object's: the first piece read sets
// it.
func (o *pieceObj) sameID(id uint64) bool {
	o.idMu.Lock()
	defer o.idMu.Unlock()
	if !o.idSet.Load() {
		o.id.Store(id)
		o.idSet.Store(true)
		return true
	}
	return o.id.Load() == id
}

// pieceBugs are deliberate bugs of the piece path, for the tests that
// prove its checks bite.
type pieceBugs struct {
	skipCRC bool // serve a piece whose payload fails its CRC32C
	skipID  bool // serve a mix of pieces of different puts
	// commitWithRest writes piece 0 with the other pieces, not after
	// them; keepGone leaves an object with a piece gone from the store
	// as it is.
	commitWithRest, keepGone bool
}

// readChunk is how much of a piece's payload is read before its CRC32C
// is taken, from the core's cache. A piece under a MAC, judged once it
// is whole, is read in one call: a read takes what the socket holds, up
// to the whole piece, in one system call.
const readChunk = 64 << 10

// loadPieces is Load in pieces: every piece of every object is asked
// for at once, each master a pipeline, and each reply is read straight
// into its object's block, checked as it arrives. An object is a hit
// only when every piece is there, names the object (key, size, layout,
// index), carries one id with the others and passes its checksums.
func (t *Tier) loadPieces(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	ok := make([]bool, len(keys))
	if len(keys) == 0 {
		return ok
	}
	sizes := make([]int64, len(keys))
	objs := make([]pieceObj, len(keys))
	for i := range keys {
		sizes[i] = int64(len(dst[i]))
		objs[i].pieces = PieceCount(sizes[i], t.opts.PieceSize)
	}
	reqs, names, slots := t.pieceBatch(keys, sizes)
	var in atomic.Uint64
	start := time.Now()
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		return t.p.get(ctx, pick(names, idx), pick(slots, idx), func(j int, rd *RESPReader, rep Reply) error {
			q := reqs[idx[j]]
			o := &objs[q.obj]
			if rd != nil && rep.Kind == '$' && rep.Len < 0 {
				o.absent.Store(true) // not in the store (evicted, deleted, never written)
			}
			if rd == nil || rep.Kind != '$' || rep.Len < 0 {
				o.mark(pieceMissing) // absent, refused (an error line), unreachable
				if rd == nil || rep.Kind != '$' {
					o.unreached.Store(true)
				}
				return nil
			}
			in.Add(uint64(rep.Len))
			st, err := t.readPiece(&keys[q.obj], rd, rep, sizes[q.obj], q.index, o, dst[q.obj])
			if err != nil {
				o.mark(pieceMissing)
				return err
			}
			if st != pieceOK {
				o.mark(st)
				return nil
			}
			o.good.Add(1)
			return nil
		})
	})
	since(t.c.getLatency, start)
	t.c.bytesIn.Add(in.Load())
	var bad []int
	hits, partial := 0, 0
	for i := range keys {
		o := &objs[i]
		switch st := o.state.Load(); {
		case st == pieceOK && int(o.good.Load()) == o.pieces:
			ok[i] = true
			hits++
		case st == pieceCorrupt:
			t.c.corrupt.Add(1)
			bad = append(bad, i)
		case st == pieceForged:
			t.c.forged.Add(1)
			bad = append(bad, i)
		case st == pieceForeign:
			t.c.foreign.Add(1)
		case o.good.Load() > 0 || st == pieceOther:
			partial++
			if st == pieceMissing && o.absent.Load() && !o.unreached.Load() && !t.bugs.keepGone {
				// Pieces of one put, one or more gone from the store (Redis
				// evicted it, or a delete is under way): no load will find
				// the object whole again, while its piece 0 would have
				// every lookup count it. A piece unreachable or refused
				// (a master down) is no such verdict.
				bad = append(bad, i)
			}
		}
	}
	t.corruptPieces(ctx, keys, sizes, bad)
	t.c.partial.Add(uint64(partial))
	t.c.hits.Add(uint64(hits))
	t.c.misses.Add(uint64(len(keys) - hits))
	return ok
}

// readPiece reads one piece's bulk reply (rep) into its place in dst,
// checking its header against the object (key, size, layout, index, id,
// header MAC) before any payload byte, and its CRC32C and MAC as the
// bytes arrive. It returns the piece's outcome, or an error of the
// connection (after which the reader is dropped).
func (t *Tier) readPiece(k *l1.ObjectKey, rd *RESPReader, rep Reply, size int64, index int, o *pieceObj, dst []byte) (int32, error) {
	pre := PiecePrefixLen(k)
	if rep.Len < int64(pre) {
		return pieceCorrupt, rd.SkipBulk()
	}
	hb := make([]byte, pre)
	if err := rd.ReadBulk(hb); err != nil {
		return pieceMissing, err
	}
	h, err := t.opts.Codec.DecodePieceHeader(k, hb)
	if err != nil {
		return pieceRefusal(err), rd.SkipBulk()
	}
	off, end := pieceSpan(size, t.opts.PieceSize, index)
	switch {
	case h.Size != size || h.PieceSize != t.opts.PieceSize:
		return pieceOther, rd.SkipBulk() // another size or layout: a miss, not corrupt
	case h.Index != index || rd.Left() != end-off:
		return pieceCorrupt, rd.SkipBulk() // this object's piece, in the wrong place or length
	case !o.sameID(h.ID) && !t.bugs.skipID:
		return pieceOther, rd.SkipBulk() // a piece of another put: a miss
	}
	pc := t.opts.Codec.checkPiece(&h, hb, dst[off:end])
	chunk := int64(readChunk)
	if pc.macs() {
		chunk = end - off
	}
	for at := off; at < end; at += chunk {
		c := dst[at:min(at+chunk, end)]
		if err := rd.ReadBulk(c); err != nil {
			return pieceMissing, err
		}
		pc.add(c)
	}
	if err := rd.EndBulk(); err != nil {
		return pieceMissing, err
	}
	if err := pc.done(); err != nil && !(t.bugs.skipCRC && errors.Is(err, ErrCorrupt)) {
		return pieceRefusal(err), nil
	}
	return pieceOK, nil
}

// corruptPieces deletes the objects at idx, a piece of which failed a
// check or a MAC, or is gone from the store: all their pieces.
func (t *Tier) corruptPieces(ctx context.Context, keys []l1.ObjectKey, sizes []int64, idx []int) {
	if len(idx) == 0 {
		return
	}
	ks := make([]l1.ObjectKey, len(idx))
	ss := make([]int64, len(idx))
	for j, i := range idx {
		ks[j], ss[j] = keys[i], sizes[i]
	}
	_, names, _ := t.pieceBatch(ks, ss)
	t.each(ctx, names, func(ctx context.Context, idx []int) error { return t.b.Del(ctx, pick(names, idx)) })
}

// getPieces is Get in pieces: Head for the sizes, then a load into new
// buffers.
func (t *Tier) getPieces(ctx context.Context, keys []l1.ObjectKey) [][]byte {
	out := make([][]byte, len(keys))
	sizes := t.headPieces(ctx, keys)
	var ks []l1.ObjectKey
	var dst [][]byte
	var at []int
	for i, s := range sizes {
		if s >= 0 {
			ks, dst, at = append(ks, keys[i]), append(dst, make([]byte, s)), append(at, i)
		}
	}
	ok := t.loadPieces(ctx, ks, dst)
	for j, i := range at {
		if ok[j] {
			out[i] = dst[j]
		}
	}
	t.c.misses.Add(uint64(len(keys) - len(ks)))
	return out
}

// deletePieces is Delete in pieces: piece 0 first, which makes the
// object a miss at once, with every other piece its header's size
// names.
func (t *Tier) deletePieces(ctx context.Context, keys []l1.ObjectKey) {
	if len(keys) == 0 {
		return
	}
	names := make([]string, len(keys))
	n := make([]int, len(keys))
	for i := range keys {
		names[i] = PieceName(t.opts.Prefix, &keys[i], 0)
		n[i] = PiecePrefixLen(&keys[i])
	}
	pre := make([][]byte, len(keys))
	t.each(ctx, names, func(ctx context.Context, idx []int) error {
		p, _, err := t.b.GetPrefix(ctx, pick(names, idx), pick(n, idx))
		for j, i := range idx {
			if j < len(p) {
				pre[i] = p[j]
			}
		}
		return err
	})
	del := names
	for i := range keys {
		if pre[i] == nil {
			continue
		}
		if h, err := t.opts.Codec.DecodePieceHeader(&keys[i], pre[i]); err == nil && h.PieceSize == t.opts.PieceSize {
			_, more, _ := t.pieceBatch(keys[i:i+1], []int64{h.Size})
			del = append(del, more[1:]...)
		}
	}
	t.each(ctx, del, func(ctx context.Context, idx []int) error { return t.b.Del(ctx, pick(del, idx)) })
}

// errNoPieces is NewTier's refusal of pieces over a backend without a
// piece path.
var errNoPieces = errors.New("l2: pieces need the Redis backend's own connections")

// pieces sets up the piece path when Options.PieceSize asks for it.
func (t *Tier) pieces() error {
	if t.opts.PieceSize == 0 {
		return nil
	}
	if t.opts.PieceSize < 0 || t.opts.PieceSize > 1<<30 || t.opts.PieceConns < 0 {
		return fmt.Errorf("%w: piece size %d (want 1 B to 1 GiB), %d connections", l1.ErrInvalidArgument, t.opts.PieceSize, t.opts.PieceConns)
	}
	if !ValidPiecePrefix(t.opts.Prefix) {
		return fmt.Errorf("%w: prefix %q: a '{' or '}' in it would hide the pieces' hash tags", l1.ErrInvalidArgument, t.opts.Prefix)
	}
	r, ok := t.b.(*Redis)
	if !ok {
		return fmt.Errorf("%w, not a %T", errNoPieces, t.b)
	}
	if t.opts.PieceConns == 0 {
		t.opts.PieceConns = 32
	}
	// The longest reply a piece's GET may be: its payload and a header
	// with the longest key fields.
	maxBulk := t.opts.PieceSize + PieceHeaderSize + 3*MaxKeyField
	var auth pieceAuth
	if r.conn != nil {
		auth = pieceAuth{tls: r.conn.u.TLS, config: r.conn.opts.TLS, user: r.conn.u.Username, pw: r.conn.opts.Password}
	}
	t.p = newPieceNet(r.c, auth, t.opts.Timeout, t.opts.PieceConns, maxBulk)
	return nil
}
