package l1

import (
	"hash/maphash"
	"math/bits"
	"reflect"
	"unsafe"
)

// Object records and the key index.
//
// The manager's records live in a store: chunks of recordChunk records,
// allocated as needed and never moved, so a *object stays valid for as long
// as its object lives. A record is also named by its number, an int32, and
// numbers are what the expiry queues, the policy's lists, the index and the
// lookup hints (hint.go) hold. So the links hold no pointers (relinking an
// object costs the garbage collector no write barrier) and the index is a
// pointer-free array that the collector never scans. The record of a
// removed object is zeroed and reused, lowest number first (recordSet), so
// a store keeps as many records as the manager ever held objects at once,
// as a Go map keeps its buckets, and a batch's records stay in ascending
// order whatever order eviction freed them in.
//
// A record is the key, then meta: every other field, none a pointer, so
// zeroing it is a plain clear and only the key's own pointers (for
// ObjectKey, its three strings) cost the collector anything. For ObjectKey
// a record is 192 bytes, three cache lines (TestObjectLayout). live says
// whether the record is in the index: a lookup hint names a record by
// number, and a released record, whose key is the zero key, must never
// answer for the zero key.
//
// The index is an open-addressing hash table with linear probing, at most
// half full. Each slot holds 32 bits of its key's hash and its record's
// number; the record keeps the same 32 bits. A call hashes each key it
// names at most once (none when the lookup hint is right), and the lookup
// tells where a missing key goes, so inserting it costs no second hash;
// removing an object finds its slot from the hash in its record, without
// hashing the key again. Deletion shifts the rest of the probe run back
// (Knuth's algorithm R), so no tombstones build up.
//
// The hash. For most key types it is hash/maphash.Comparable, the hash Go's
// maps use, under a seed of the store's own. For ObjectKey, the key of a KV
// cache, a hash of its own costs half as much (see objectKeyHash;
// BenchmarkObjectKeyHash: 28 ns against 16.5 for 5700 keys): the chunk
// hash, the one field that differs from key to key, is hashed with
// maphash.String; the model and the salt, which a cache shares among most
// of its keys, are hashed once and the result kept until a key names
// another; rank and group are mixed in with two multiplications. It is
// seeded as maphash is, a function of the fields' values (so equal keys
// hash alike), and every field reaches every bit of the result, so keys
// that differ in one field alone (10,000 salts, models or ranks) spread
// over the index as random keys do (TestObjectKeyHash). Key comparison
// (equal) first checks whether two ObjectKeys hold the very same strings,
// as a caller's keys and the records' copies of them do, before comparing
// bytes.

// recordChunk is the number of records allocated at once.
const (
	recordShift = 8
	recordChunk = 1 << recordShift
)

// slot is one entry of the index: rec 0 marks an empty slot.
type slot struct {
	hash uint32
	rec  int32
}

// store holds the records and the index from keys to records. Record 0 is
// never used: number 0 means none.
type store[K comparable] struct {
	chunks []*[recordChunk]object[K]
	free   recordSet // the reusable records
	seed   maphash.Seed
	slots  []slot // len is 0 or a power of two
	n      int    // keys in the index

	// objectKey: K is ObjectKey, whose hash is objectKeyHash.
	objectKey bool
	// intBytes is the size of K when K is an integer type (its kind: int,
	// uint, intN, uintN or uintptr, named or not), whose hash is intHash
	// under intSeed; 0 otherwise.
	intBytes uint8
	intSeed  uint64
	// The last model and salt objectKeyHash saw, and their hashes.
	model, salt         string
	modelHash, saltHash uint64
}

func (s *store[K]) init() {
	s.seed = maphash.MakeSeed()
	s.objectKey = reflect.TypeFor[K]() == reflect.TypeFor[ObjectKey]()
	switch t := reflect.TypeFor[K](); t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.intBytes = uint8(t.Size())
	}
	s.intSeed = maphash.Comparable(s.seed, uint64(mixC))
	s.model, s.modelHash = "", maphash.String(s.seed, "")
	s.salt, s.saltHash = "", s.modelHash
}

// rec returns record i, which must not be 0.
func (s *store[K]) rec(i int32) *object[K] {
	return &s.chunks[i>>recordShift][i&(recordChunk-1)]
}

// hash returns the 32 bits of *key's hash that the index uses.
func (s *store[K]) hash(key *K) uint32 { return uint32(s.hashOf(key)) }

// hash64 returns key's whole hash; S3-FIFO's ghost queue keeps it
// (policy.go).
func (s *store[K]) hash64(key K) uint64 { return s.hashOf(&key) }

// hashOf returns *key's whole hash.
func (s *store[K]) hashOf(key *K) uint64 {
	switch p := unsafe.Pointer(key); s.intBytes {
	case 8: // K is an integer of that size (checked by init)
		return intHash(*(*uint64)(p), s.intSeed)
	case 4:
		return intHash(uint64(*(*uint32)(p)), s.intSeed)
	case 2:
		return intHash(uint64(*(*uint16)(p)), s.intSeed)
	case 1:
		return intHash(uint64(*(*uint8)(p)), s.intSeed)
	}
	if s.objectKey {
		// K is ObjectKey (checked by init), so this is a conversion.
		return s.objectKeyHash((*ObjectKey)(unsafe.Pointer(key)))
	}
	return maphash.Comparable(s.seed, *key)
}

// Odd constants for mix (from wyhash).
const (
	mixA = 0xa0761d6478bd642f
	mixB = 0xe7037ed1a0b428db
	mixC = 0x8ebc6af09c88c6e3
)

// intHash is the hash of an integer key x, its bits zero-extended: two
// rounds of mix under the store's seed, wyhash's finaliser, so that every
// bit of x reaches every bit of the result (sequential keys, and keys that
// differ only in high bits, spread as random keys do: TestIntKeyHash). It
// costs two multiplications where maphash.Comparable, generic over any
// comparable type, costs several times as much for an int32 (the trace
// replay's keys).
func intHash(x, seed uint64) uint64 {
	return mix(mix(x^seed, mixA)^mixC, mixB^seed)
}

// mix folds the 128-bit product of a and b into 64 bits: every bit of
// either factor reaches the result.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// equal reports whether a == b. For ObjectKey it first checks whether the
// keys hold the very same strings, as a caller's keys and the records'
// copies of them do when the caller names keys it stored, which costs no
// call.
func (s *store[K]) equal(a, b *K) bool {
	if s.objectKey {
		x, y := (*ObjectKey)(unsafe.Pointer(a)), (*ObjectKey)(unsafe.Pointer(b))
		if x.KVRank == y.KVRank && x.GroupID == y.GroupID && sameString(x.ChunkHash, y.ChunkHash) &&
			sameString(x.Model, y.Model) && sameString(x.CacheSalt, y.CacheSalt) {
			return true
		}
	}
	return *a == *b
}

// sameString reports whether a and b are the same bytes in memory: a
// shortcut for a == b that calls nothing.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// objectKeyHash is the hash of an ObjectKey (see the store's comment): two
// rounds of mix, the first over model, rank, group and salt, the second
// with the chunk hash. The model's and the salt's hashes come from
// maphash.String under the store's seed, kept for the next key with the
// same model (or salt): a string comparison, or only a pointer comparison
// when the caller's keys share the string. It runs under the manager lock,
// which guards the cache.
func (s *store[K]) objectKeyHash(k *ObjectKey) uint64 {
	if !sameString(k.Model, s.model) && k.Model != s.model {
		s.model, s.modelHash = k.Model, maphash.String(s.seed, k.Model)
	}
	if !sameString(k.CacheSalt, s.salt) && k.CacheSalt != s.salt {
		s.salt, s.saltHash = k.CacheSalt, maphash.String(s.seed, k.CacheSalt)
	}
	rest := mix(s.modelHash^(uint64(k.KVRank)<<32|uint64(k.GroupID)), s.saltHash^mixA)
	return mix(maphash.String(s.seed, k.ChunkHash)^mixB, rest^mixC)
}

// find returns *key's record, or nil and the slot where it would go.
func (s *store[K]) find(key *K, h uint32) (*object[K], int) {
	if len(s.slots) == 0 {
		return nil, -1
	}
	mask := uint32(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := s.slots[i]
		if sl.rec == 0 {
			return nil, int(i)
		}
		if sl.hash == h {
			if o := s.rec(sl.rec); s.equal(&o.key, key) {
				return o, int(i)
			}
		}
	}
}

// insert indexes o, whose key and hash are set and whose key is not in the
// index; pos is where find said the key would go.
func (s *store[K]) insert(o *object[K], pos int) {
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
		pos = s.emptySlot(o.hash)
	}
	s.slots[pos] = slot{hash: o.hash, rec: o.idx}
	o.live = true
	s.n++
}

// emptySlot returns the first empty slot of h's probe sequence.
func (s *store[K]) emptySlot(h uint32) int {
	mask := uint32(len(s.slots) - 1)
	i := h & mask
	for s.slots[i].rec != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// grow doubles the index.
func (s *store[K]) grow() {
	old := s.slots
	s.slots = make([]slot, max(16, 2*len(old)))
	for _, sl := range old {
		if sl.rec != 0 {
			s.slots[s.emptySlot(sl.hash)] = sl
		}
	}
}

// remove takes o out of the index.
func (s *store[K]) remove(o *object[K]) {
	mask := uint32(len(s.slots) - 1)
	i := o.hash & mask
	for s.slots[i].rec != o.idx {
		i = (i + 1) & mask
	}
	// Fill the hole from later in the probe run: a slot may move back to i
	// unless its home lies cyclically in (i, j].
	for j := i; ; {
		j = (j + 1) & mask
		sl := s.slots[j]
		if sl.rec == 0 {
			break
		}
		if home := sl.hash & mask; (j-home)&mask >= (j-i)&mask {
			s.slots[i] = sl
			i = j
		}
	}
	s.slots[i] = slot{}
	o.live = false
	s.n--
}

// alloc returns a zeroed record, not indexed: the lowest-numbered
// reusable one, or one of a new chunk.
func (s *store[K]) alloc() *object[K] {
	i := s.free.take()
	if i == 0 {
		base := int32(len(s.chunks)) << recordShift
		chunk := new([recordChunk]object[K])
		s.chunks = append(s.chunks, chunk)
		first := int32(0)
		if base == 0 {
			first = 1 // record 0 is never used
		}
		for i := first; i < recordChunk; i++ {
			chunk[i].idx = base + i
			s.free.add(base + i)
		}
		i = s.free.take()
	}
	return s.rec(i)
}

// release zeroes o, which must be out of the index and of every list, for
// reuse.
func (s *store[K]) release(o *object[K]) {
	var zero K
	o.key = zero
	o.meta = meta{idx: o.idx, qseq: o.qseq}
	s.free.add(o.idx)
}

// recordSet is the set of reusable record numbers: a bitmap, a bit per
// record, under a summary, a bit per bitmap word that has a bit set. take
// hands out the lowest number, so the records of a batch of new keys are
// the lowest free ones in ascending order whatever order their previous
// objects left in. A free list would hand them back in the order the
// policy evicted them, and each round of eviction in an order other than
// the records' would shuffle them further, until walking a batch's records
// missed the cache at every record (once the allocator merged
// their frees, scattered victims still cost 1.7× adjacent ones, most of
// the difference in first touches of records; with this, 1.25×).
// It costs a bit per record. take scans the summary from the lowest word
// that may have a bit, a word per 4096 records, and works from a copy of
// the lowest bitmap word (cur), so most calls clear a bit in that copy.
type recordSet struct {
	words, sum []uint64
	lo         int    // no summary word below lo has a bit set
	cw         int    // the bitmap word cur stands for, while cur != 0
	cur        uint64 // the set's bits of word cw, which itself reads 0
}

// add puts record i in the set, growing it as needed.
func (r *recordSet) add(i int32) {
	w := int(i >> 6)
	if r.cur != 0 {
		if w == r.cw {
			r.cur |= 1 << (i & 63)
			return
		}
		if w < r.cw {
			r.flush() // take must see the lower word first
		}
	}
	if w >= len(r.words) {
		r.grow(w)
	}
	r.words[w] |= 1 << (i & 63)
	r.sum[w>>6] |= 1 << (w & 63)
	if w>>6 < r.lo {
		r.lo = w >> 6
	}
}

// flush puts cur back in the bitmap.
func (r *recordSet) flush() {
	w := r.cw
	r.words[w] = r.cur
	r.sum[w>>6] |= 1 << (w & 63)
	r.lo = min(r.lo, w>>6)
	r.cur = 0
}

// grow makes room for bitmap word w.
func (r *recordSet) grow(w int) {
	for w >= len(r.words) {
		r.words = append(r.words, 0)
		if len(r.words) > 64*len(r.sum) {
			r.sum = append(r.sum, 0)
		}
	}
}

// take removes and returns the lowest record in the set; 0 when it is
// empty (record 0 is never in it).
func (r *recordSet) take() int32 {
	if x := r.cur; x != 0 {
		r.cur = x & (x - 1) // clear the lowest bit
		return int32(r.cw<<6 | bits.TrailingZeros64(x))
	}
	sum := r.sum
	for lo := r.lo; lo < len(sum); lo++ {
		if s := sum[lo]; s != 0 {
			r.lo = lo
			w := lo<<6 | bits.TrailingZeros64(s)
			sum[lo] = s & (s - 1) // w's bit, the lowest in s
			x := r.words[w]
			r.words[w] = 0
			r.cw, r.cur = w, x&(x-1)
			return int32(w<<6 | bits.TrailingZeros64(x))
		}
	}
	r.lo = len(sum)
	return 0
}

// reset drops every record and the index.
func (s *store[K]) reset() {
	s.chunks, s.free, s.slots, s.n = nil, recordSet{}, nil, 0
}
