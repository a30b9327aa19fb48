package l2_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// macCodec is a codec with a MAC secret made of seed.
func macCodec(t *testing.T, seed byte) *l2.Codec {
	t.Helper()
	sec, err := l2.NewSecret(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	c, err := l2.NewCodec(sec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPieceHeaderRefusesEveryFlip: a piece header made for a key
// decodes to what was put in it, with and without a MAC, and every
// single-bit flip of its header or key is refused (ErrCorrupt, or
// ErrForged or ErrForeign where the flip lands in the MACs' fields), as
// is every truncation; a whole value is no piece, nor a piece a whole
// value (ErrForeign).
func TestPieceHeaderRefusesEveryFlip(t *testing.T) {
	k := l1.ObjectKey{ChunkHash: "chunk\x00{x}", Model: "m", CacheSalt: "salt", KVRank: 3, GroupID: 9}
	p := bytes.Repeat([]byte{7}, 232) // piece 3 of 1000 in pieces of 256
	for _, c := range []*l2.Codec{l2.Unauthenticated, macCodec(t, 1)} {
		h, err := c.AppendPieceHeader(nil, &k, 1000, 256, 3, 0xfeedface, p)
		if err != nil {
			t.Fatal(err)
		}
		crc := l2.Checksum(p) // under a MAC, none (version 5)
		if c.Authenticated() {
			crc = 0
		}
		got, err := c.DecodePieceHeader(&k, h)
		if err != nil || got.Key != k || got.Size != 1000 || got.PieceSize != 256 || got.Index != 3 || got.ID != 0xfeedface ||
			got.CRC != crc || got.KeyID != c.KeyID() {
			t.Fatalf("DecodePieceHeader: %+v, %v", got, err)
		}
		for i := range h {
			for b := range 8 {
				v := bytes.Clone(h)
				v[i] ^= 1 << b
				if _, err := c.DecodePieceHeader(&k, v); !errors.Is(err, l2.ErrCorrupt) && !errors.Is(err, l2.ErrForged) && !errors.Is(err, l2.ErrForeign) {
					t.Fatalf("flip of byte %d bit %d: %v", i, b, err)
				}
			}
		}
		for n := range len(h) {
			if _, err := c.DecodePieceHeader(&k, h[:n]); err == nil {
				t.Fatalf("truncated to %d: accepted", n)
			}
		}
		other := k
		other.GroupID++
		if _, err := c.DecodePieceHeader(&other, h); !errors.Is(err, l2.ErrCorrupt) {
			t.Fatalf("another key's piece: %v", err)
		}
		v, _ := c.Encode(nil, &k, []byte("x"))
		if _, err := c.DecodePieceHeader(&k, v); !errors.Is(err, l2.ErrForeign) {
			t.Fatalf("a whole value read as a piece: %v", err)
		}
		if _, err := c.DecodeHeader(&k, h); !errors.Is(err, l2.ErrForeign) {
			t.Fatalf("a piece read as a whole value: %v", err)
		}
	}
	// A piece of one secret is foreign to a codec of another, and one
	// without a MAC to a codec that requires one.
	h, _ := macCodec(t, 1).AppendPieceHeader(nil, &k, 1000, 256, 3, 1, p)
	if _, err := macCodec(t, 2).DecodePieceHeader(&k, h); !errors.Is(err, l2.ErrForeign) {
		t.Fatalf("another secret's piece: %v", err)
	}
	h, _ = l2.Unauthenticated.AppendPieceHeader(nil, &k, 1000, 256, 3, 1, p)
	if _, err := macCodec(t, 1).DecodePieceHeader(&k, h); !errors.Is(err, l2.ErrForeign) {
		t.Fatalf("a piece without a MAC: %v", err)
	}
}

// TestPieceSlotsSpread: piece names' slots are Redis's own (CLUSTER
// KEYSLOT agrees, a '{' in the prefix or key included), and consecutive
// pieces of an object land on different masters of a 3- and a 6-master
// layout, with each master's share of a 32-piece object within one of
// the others'.
func TestPieceSlotsSpread(t *testing.T) {
	srv := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	cl := srv.Client()
	ctx := context.Background()
	if l2.ValidPiecePrefix("pre{x}:") || !l2.ValidPiecePrefix("kvl2:") {
		t.Fatal("ValidPiecePrefix")
	}
	for _, k := range []l1.ObjectKey{{ChunkHash: "a"}, {ChunkHash: "{b}", Model: "m{"}, {ChunkHash: "}{", CacheSalt: "{{}}"}} {
		for j := range 5 {
			name := l2.PieceName("pre:", &k, j)
			got, err := cl.ClusterKeySlot(ctx, name).Result()
			if err != nil {
				t.Fatal(err)
			}
			if int(got) != l2.Slot(name) || l2.Slot(name) != l2.PieceSlot("pre:", &k, j) {
				t.Fatalf("%q: Redis's slot %d, Slot %d, PieceSlot %d", name, got, l2.Slot(name), l2.PieceSlot("pre:", &k, j))
			}
		}
	}
	for _, m := range []int{3, 6} {
		master := func(slot int) int { return slot * m / 16384 }
		for i := range 2000 {
			k := l1.ObjectKey{ChunkHash: fmt.Sprint(i)}
			count := make([]int, m)
			for j := range 32 {
				a, b := master(l2.PieceSlot("kvl2:", &k, j)), master(l2.PieceSlot("kvl2:", &k, j+1))
				if a == b {
					t.Fatalf("%d masters: pieces %d and %d of object %d on master %d", m, j, j+1, i, a)
				}
				count[a]++
			}
			if lo, hi := minMax(count); hi-lo > 32/m {
				t.Fatalf("%d masters: object %d's 32 pieces %v", m, i, count)
			}
		}
	}
}

func minMax(s []int) (int, int) {
	lo, hi := s[0], s[0]
	for _, v := range s {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// piecesTier is a tier in pieces of pieceSize over url, with the MAC
// codec of secret seed 1.
func piecesTier(t *testing.T, url string, pieceSize int64, timeout time.Duration) *l2.Tier {
	t.Helper()
	return codecTier(t, url, pieceSize, timeout, macCodec(t, 1))
}

// codecTier is piecesTier with codec c.
func codecTier(t *testing.T, url string, pieceSize int64, timeout time.Duration, c *l2.Codec) *l2.Tier {
	t.Helper()
	tier, _ := newTier(t, url, l2.Options{Timeout: timeout, PieceSize: pieceSize, Prefix: "pieces:", BreakerFailures: 1 << 20, Codec: c})
	return tier
}

// loadAll loads keys of size into fresh buffers, filled with 0xee first,
// and returns them with Load's answer.
func loadAll(tier *l2.Tier, keys []l1.ObjectKey, size int) ([][]byte, []bool) {
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = bytes.Repeat([]byte{0xee}, size)
	}
	return dst, tier.Load(context.Background(), keys, dst)
}

// TestPiecesRoundTrip: objects stored in pieces over a real cluster
// read back byte for byte (Load, Get, Head), their pieces are on every
// master, a plain Redis serves them too, and a whole value (version 1)
// of the same key is no piece.
func TestPiecesRoundTrip(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	for _, tc := range []struct {
		name, url string
	}{{"cluster", c.URL()}, {"plain", srv.URL()}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tier := piecesTier(t, tc.url, 4096, 10*time.Second)
			for _, size := range []int{0, 1, 4095, 4096, 4097, 64 << 10, 100000} {
				keys := keysN(fmt.Sprintf("rt-%d", size), 6)
				ps, _ := payloads(keys, size)
				for i := range ps {
					for j := range ps[i] {
						ps[i][j] = byte(i*7 + j*13 + j>>8)
					}
				}
				if n := tier.PutPayloads(ctx, keys, ps); n != len(keys) {
					t.Fatalf("size %d: PutPayloads stored %d of %d (%+v)", size, n, len(keys), tier.Stats())
				}
				for i, s := range tier.Head(ctx, keys) {
					if s != int64(size) {
						t.Fatalf("size %d: Head of %d: %d", size, i, s)
					}
				}
				dst, ok := loadAll(tier, keys, size)
				for i := range keys {
					if !ok[i] || !bytes.Equal(dst[i], ps[i]) {
						t.Fatalf("size %d: Load of %d: %v, bytes equal %v (%+v)", size, i, ok[i], bytes.Equal(dst[i], ps[i]), tier.Stats())
					}
				}
				for i, g := range tier.Get(ctx, keys) {
					if !bytes.Equal(g, ps[i]) || g == nil {
						t.Fatalf("size %d: Get of %d differs", size, i)
					}
				}
			}
			if tc.name == "cluster" {
				ms, err := c.Masters(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					if n, err := m.Client().DBSize(ctx).Result(); err != nil || n < 20 {
						t.Fatalf("master %s holds %d values (%v): the pieces are not spread", m.Addr(), n, err)
					}
				}
			}
			// A whole value under the whole value's name is not read.
			k := keysN("v1", 1)
			_, vs := payloads(k, 100)
			whole, _ := newTier(t, tc.url, l2.Options{Prefix: "pieces:"})
			if n := whole.Put(ctx, k, vs); n != 1 {
				t.Fatal("whole put")
			}
			if s := tier.Head(ctx, k); s[0] != -1 {
				t.Fatalf("a version 1 value's Head in pieces: %d", s[0])
			}
			if s := whole.Head(ctx, k); s[0] != 100 {
				t.Fatalf("the version 1 tier lost its value: %d", s[0])
			}
		})
	}
}

// pieceBreak is one way of breaking a stored object's pieces, and the
// counter its miss must move.
type pieceBreak struct {
	what    string
	breakIt func(k, other l1.ObjectKey) error
	stat    func(s l2.Stats) uint64
}

// pieceBreaks are the ways of TestPiecesWholeObjectMiss, over the
// cluster cl, objects of size in pieces of piece of tier, whose codec
// is codec. Under a MAC a changed payload counts as forged (its MAC
// refuses it; it has no CRC32C), without one as corrupt; "forged" and
// "another secret's" are only under a MAC (without one, a payload
// changed with its checksums made right is served, as it must be).
func pieceBreaks(t *testing.T, url string, cl *redis.ClusterClient, tier *l2.Tier, codec *l2.Codec, size, piece int) []pieceBreak {
	ctx := context.Background()
	name := func(k l1.ObjectKey, j int) string { return l2.PieceName("pieces:", &k, j) }
	partial := func(s l2.Stats) uint64 { return s.Partial }
	corrupt := func(s l2.Stats) uint64 { return s.Corrupt }
	forged := func(s l2.Stats) uint64 { return s.Forged }
	changed := corrupt
	if codec.Authenticated() {
		changed = forged
	}
	// rewrite sets piece j of k to f of piece from's bytes.
	rewrite := func(k l1.ObjectKey, j int, from l1.ObjectKey, fj int, f func(v []byte) []byte) error {
		v, err := cl.Get(ctx, name(from, fj)).Bytes()
		if err != nil {
			return err
		}
		return cl.Set(ctx, name(k, j), f(v), 0).Err()
	}
	same := func(v []byte) []byte { return v }
	breaks := []pieceBreak{
		{"missing", func(k, _ l1.ObjectKey) error { return cl.Del(ctx, name(k, 3)).Err() }, partial},
		{"flipped", func(k, _ l1.ObjectKey) error {
			return rewrite(k, 2, k, 2, func(v []byte) []byte { v[len(v)-5] ^= 1; return v })
		}, changed},
		{"another key's", func(k, other l1.ObjectKey) error { return rewrite(k, 1, other, 1, same) }, corrupt},
		{"another index", func(k, _ l1.ObjectKey) error { return rewrite(k, 1, k, 0, same) }, corrupt},
		{"short", func(k, _ l1.ObjectKey) error {
			return rewrite(k, 4, k, 4, func(v []byte) []byte { return v[:len(v)-1] })
		}, corrupt},
		{"another put", func(k, _ l1.ObjectKey) error {
			// The same key put again with other bytes, piece 2 kept from
			// the first put: a mix of two puts.
			old, err := cl.Get(ctx, name(k, 2)).Bytes()
			if err != nil {
				return err
			}
			if tier.PutPayloads(ctx, []l1.ObjectKey{k}, [][]byte{make([]byte, size)}) != 1 {
				return errors.New("the second put")
			}
			return cl.Set(ctx, name(k, 2), old, 0).Err()
		}, partial},
		{"another layout", func(k, _ l1.ObjectKey) error {
			// Another layout's pieces 0 to 4 replace ours.
			if codecTier(t, url, int64(piece/2), 10*time.Second, codec).PutPayloads(ctx, []l1.ObjectKey{k}, [][]byte{make([]byte, size)}) != 1 {
				return errors.New("the other layout's put")
			}
			return nil
		}, partial},
	}
	if !codec.Authenticated() {
		return breaks
	}
	return append(breaks,
		pieceBreak{"forged", func(k, _ l1.ObjectKey) error {
			// A payload byte changed under the piece's own header, and
			// the header's checksum made right: only the piece MAC can
			// tell.
			return rewrite(k, 3, k, 3, func(v []byte) []byte {
				kl := l2.PiecePrefixLen(&k)
				v[kl+7] ^= 1
				binary.LittleEndian.PutUint32(v[52:], crcUpdate(l2.Checksum(v[:52]), v[56:kl]))
				return v
			})
		}, forged},
		pieceBreak{"another secret's", func(k, _ l1.ObjectKey) error {
			other := codecTier(t, url, int64(piece), 10*time.Second, macCodec(t, 2))
			if other.PutPayloads(ctx, []l1.ObjectKey{k}, [][]byte{make([]byte, size)}) != 1 {
				return errors.New("the other secret's put")
			}
			return nil
		}, func(s l2.Stats) uint64 { return s.Foreign }})
}

// wholeObjectMiss puts 4 objects, breaks one's pieces with b and loads
// them: the broken object must miss, counted by b's counter, and the
// others load byte for byte; an object that failed a check must be
// deleted (Head misses).
func wholeObjectMiss(tier *l2.Tier, keys []l1.ObjectKey, size int, b pieceBreak) error {
	ctx := context.Background()
	ps, _ := payloads(keys, size)
	if n := tier.PutPayloads(ctx, keys, ps); n != len(keys) {
		return fmt.Errorf("PutPayloads stored %d", n)
	}
	if err := b.breakIt(keys[1], keys[2]); err != nil {
		return err
	}
	before := tier.Stats()
	dst, ok := loadAll(tier, keys, size)
	after := tier.Stats()
	if ok[1] {
		return fmt.Errorf("the object with a piece %s loaded (its bytes equal to the put's: %v)", b.what, bytes.Equal(dst[1], ps[1]))
	}
	for _, i := range []int{0, 2, 3} {
		if !ok[i] || !bytes.Equal(dst[i], ps[i]) {
			return fmt.Errorf("object %d beside it: %v (%+v)", i, ok[i], after)
		}
	}
	if b.stat(after) != b.stat(before)+1 || after.Misses != before.Misses+1 || after.Hits != before.Hits+3 {
		return fmt.Errorf("not counted: before %+v, after %+v", before, after)
	}
	if after.Corrupt > before.Corrupt || after.Forged > before.Forged {
		if s := tier.Head(ctx, keys[1:2]); s[0] != -1 {
			return fmt.Errorf("a corrupt object's Head after the load: %d", s[0])
		}
	}
	return nil
}

// TestPiecesWholeObjectMiss: on a real cluster, with MACs and without,
// an object one of whose pieces is missing or refused (flipped, another
// key's, in another index's place, short, of another put, of another
// layout; under a MAC also forged with the header's checksum right, and
// of another secret) is a miss of the whole object, counted (Partial,
// Corrupt, Forged or Foreign), its buffer never reported loaded, and the
// objects beside it load. A piece that fails a check or a MAC deletes
// the object's pieces.
func TestPiecesWholeObjectMiss(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	const size, piece = 20000, 4096 // 5 pieces
	for _, codec := range []struct {
		name  string
		codec *l2.Codec
	}{{"mac", macCodec(t, 1)}, {"nomac", l2.Unauthenticated}} {
		tier := codecTier(t, c.URL(), piece, 10*time.Second, codec.codec)
		for ci, b := range pieceBreaks(t, c.URL(), c.Client(), tier, codec.codec, size, piece) {
			t.Run(codec.name+"/"+b.what, func(t *testing.T) {
				if err := wholeObjectMiss(tier, keysN(fmt.Sprintf("miss-%s-%d", codec.name, ci), 4), size, b); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestPiecesWholeObjectMissBites: wholeObjectMiss's check fails on a
// piece path without MACs that skips each piece's payload checksum (the
// flipped piece is served), on one that serves pieces of different puts
// as one object (the mix is served), and on a codec that skips the MACs
// (the forged piece is served: only the piece MAC, a GMAC since version
// 4, refuses it).
func TestPiecesWholeObjectMissBites(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	const size, piece = 20000, 4096
	for _, bug := range []struct {
		what                     string
		skipCRC, skipID, skipMAC bool
	}{{"flipped", true, false, false}, {"another put", false, true, false}, {"forged", false, false, true}} {
		t.Run(bug.what, func(t *testing.T) {
			codec := macCodec(t, 1)
			switch {
			case bug.skipMAC:
				codec = l2.SkipMAC(codec)
			case bug.skipCRC: // under a MAC a payload has no CRC32C
				codec = l2.Unauthenticated
			}
			tier := codecTier(t, c.URL(), piece, 10*time.Second, codec)
			l2.PieceBugs(tier, bug.skipCRC, bug.skipID)
			for _, b := range pieceBreaks(t, c.URL(), c.Client(), tier, codec, size, piece) {
				if b.what != bug.what {
					continue
				}
				err := wholeObjectMiss(tier, keysN("bite-"+b.what, 4), size, b)
				if err == nil {
					t.Fatalf("the check passed on a piece path with the bug")
				}
				t.Logf("caught: %v", err)
			}
		})
	}
}

// TestPiecesRotation: pieces written under one secret load through a
// codec that writes with a new one and still reads the old
// (NewCodec(new, old)), byte for byte; a codec of the new secret alone
// counts them foreign and leaves them; and the new writer's pieces are
// foreign to a node of the old secret alone.
func TestPiecesRotation(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	const size, piece = 20000, 4096
	secret := func(seed byte) *l2.Secret {
		s, err := l2.NewSecret(bytes.Repeat([]byte{seed}, 32))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rotated, err := l2.NewCodec(secret(2), secret(1))
	if err != nil {
		t.Fatal(err)
	}
	oldT := codecTier(t, c.URL(), piece, 10*time.Second, macCodec(t, 1))
	newT := codecTier(t, c.URL(), piece, 10*time.Second, macCodec(t, 2))
	rotT := codecTier(t, c.URL(), piece, 10*time.Second, rotated)
	ctx := context.Background()
	keys := keysN("rotation", 4)
	ps, _ := payloads(keys, size)
	if n := oldT.PutPayloads(ctx, keys[:2], ps[:2]); n != 2 {
		t.Fatalf("the old secret's puts: %d", n)
	}
	if n := rotT.PutPayloads(ctx, keys[2:], ps[2:]); n != 2 {
		t.Fatalf("the rotated codec's puts: %d", n)
	}
	dst, ok := loadAll(rotT, keys, size)
	for i := range keys {
		if !ok[i] || !bytes.Equal(dst[i], ps[i]) {
			t.Fatalf("the rotated codec, object %d: loaded %v (%+v)", i, ok[i], rotT.Stats())
		}
	}
	_, ok = loadAll(newT, keys[:2], size)
	if ok[0] || ok[1] || newT.Stats().Foreign != 2 {
		t.Fatalf("the new secret alone on the old secret's pieces: %v, %+v", ok, newT.Stats())
	}
	_, ok = loadAll(oldT, keys[2:], size)
	if ok[0] || ok[1] || oldT.Stats().Foreign != 2 {
		t.Fatalf("the old secret alone on the new secret's pieces: %v, %+v", ok, oldT.Stats())
	}
	// Left alone: the rotated codec still loads them all.
	if _, ok = loadAll(rotT, keys, size); !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		t.Fatalf("after the foreign reads: %v", ok)
	}
}

// crcUpdate continues the CRC32C sum over p (l2's checksums).
func crcUpdate(sum uint32, p []byte) uint32 {
	return crc32.Update(sum, crc32.MakeTable(crc32.Castagnoli), p)
}

// TestPiecesMasterHangs: a master that hangs (SIGSTOP) mid-load costs
// the objects with a piece on it, within the tier's timeout, and trips
// its breaker; an object whose pieces are all on the other masters
// loads. After it resumes (and its breaker's cooldown ends) every object
// loads again.
func TestPiecesMasterHangs(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1, NodeTimeout: time.Minute})
	ctx := context.Background()
	const piece = 4096
	tier := piecesTier(t, c.URL(), piece, 500*time.Millisecond)
	ms, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := ms[0]
	// Which slots the stopped master serves.
	slots, err := c.Client().ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	on := func(slot int) bool {
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End {
				return s.Nodes[0].Addr == stopped.Addr()
			}
		}
		return false
	}
	// One-piece objects: some on the stopped master, some not; and
	// objects of 8 pieces, each on every master.
	small := keysN("hang-small", 12)
	large := keysN("hang-large", 3)
	ps, _ := payloads(small, piece)
	pl, _ := payloads(large, 8*piece)
	if tier.PutPayloads(ctx, small, ps) != len(small) || tier.PutPayloads(ctx, large, pl) != len(large) {
		t.Fatalf("puts: %+v", tier.Stats())
	}
	var hung, free int
	for _, k := range small {
		if on(l2.PieceSlot("pieces:", &k, 0)) {
			hung++
		} else {
			free++
		}
	}
	if hung == 0 || free == 0 {
		t.Fatalf("the small objects' masters: %d on the stopped one, %d not", hung, free)
	}
	if err := stopped.Stop(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			stopped.Cont()
		}
	}()
	keys := append(append([]l1.ObjectKey{}, small...), large...)
	sizes := []int{piece, 8 * piece}
	dst := make([][]byte, len(keys))
	for i := range dst {
		dst[i] = make([]byte, sizes[i/len(small)])
	}
	start := time.Now()
	ok := tier.Load(ctx, keys, dst)
	took := time.Since(start)
	for i, k := range small {
		if want := !on(l2.PieceSlot("pieces:", &k, 0)); ok[i] != want || (want && !bytes.Equal(dst[i], ps[i])) {
			t.Fatalf("small object %d: loaded %v, want %v", i, ok[i], want)
		}
	}
	for i := range large {
		if ok[len(small)+i] {
			t.Fatalf("large object %d loaded with a master hung", i)
		}
	}
	if took > 30*time.Second {
		t.Fatalf("the load took %v past a 500 ms timeout", took)
	}
	if err := stopped.Cont(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// The hung master's timeout tripped its breaker (one per master):
	// its pieces are skipped, their objects miss, until the cooldown
	// ends and a probe finds it back.
	if s := tier.Stats(); s.BreakerOpens == 0 {
		t.Fatalf("no breaker opened for the hung master: %+v", s)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		dst2, ok := loadAll(tier, large, 8*piece)
		all := true
		for i := range large {
			all = all && ok[i] && bytes.Equal(dst2[i], pl[i])
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the large objects did not load again after the master resumed: %+v", tier.Stats())
		}
	}
}
