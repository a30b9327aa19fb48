package l1

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashKeys returns n distinct keys shaped as a KV cache's: a 32-byte chunk
// hash, one model, rank and group.
func hashKeys(n int) []ObjectKey {
	ks := make([]ObjectKey, n)
	var h [32]byte
	for i := range ks {
		binary.LittleEndian.PutUint64(h[:], uint64(i)*0x9E3779B97F4A7C15)
		ks[i] = ObjectKey{ChunkHash: string(h[:]), Model: "llama-3.1-70b", KVRank: 1}
	}
	return ks
}

// hostileKeys are 10,000 keys that differ in one field only.
func hostileKeys(field string) []ObjectKey {
	base := ObjectKey{ChunkHash: strings.Repeat("\x00", 32), Model: "m", KVRank: 3, GroupID: 4, CacheSalt: "s"}
	ks := make([]ObjectKey, 10_000)
	for i := range ks {
		k := base
		switch field {
		case "ChunkHash":
			var b [32]byte
			binary.LittleEndian.PutUint32(b[:], uint32(i))
			k.ChunkHash = string(b[:])
		case "Model":
			k.Model = fmt.Sprint("model-", i)
		case "KVRank":
			k.KVRank = uint32(i)
		case "GroupID":
			k.GroupID = uint32(i)
		case "CacheSalt":
			k.CacheSalt = fmt.Sprint(i)
		case "RankAndGroup": // rank and group trade places: i<<16 | j
			k.KVRank, k.GroupID = uint32(i%100)<<16, uint32(i/100)
		}
		ks[i] = k
	}
	return ks
}

// probeCheck indexes keys in s and reports the longest distance of a key
// from its home slot and how many keys share a 64-bit hash with another.
// hash stands in for s.hash64.
func probeCheck[K comparable](s *store[K], keys []K, hash func(K) uint64) (longest, dup64 int) {
	seen := map[uint64]bool{}
	for _, k := range keys {
		h64 := hash(k)
		if seen[h64] {
			dup64++
		}
		seen[h64] = true
		h := uint32(h64)
		o, pos := s.find(&k, h)
		if o != nil {
			panic("probeCheck: repeated key")
		}
		o = s.alloc()
		o.key, o.hash = k, h
		s.insert(o, pos)
	}
	mask := uint32(len(s.slots) - 1)
	for i, sl := range s.slots {
		if sl.rec != 0 {
			longest = max(longest, int((uint32(i)-sl.hash)&mask))
		}
	}
	return longest, dup64
}

// maxProbe bounds the longest probe of 10,000 keys in an index at most
// half full: at a load of 0.3, random hashes make runs of a dozen slots;
// a hash blind to a field puts every key at the same home (10,000).
const maxProbe = 64

// TestObjectKeyHash checks the hash of ObjectKey against hostile key sets:
// 10,000 keys that differ in one field only spread over the index as
// random keys do (short probe runs, no two equal 64-bit hashes). The check
// bites: a hash that ignores the field fails it.
func TestObjectKeyHash(t *testing.T) {
	for _, field := range []string{"ChunkHash", "Model", "KVRank", "GroupID", "CacheSalt", "RankAndGroup"} {
		t.Run(field, func(t *testing.T) {
			var s store[ObjectKey]
			s.init()
			require.True(t, s.objectKey, "ObjectKey takes its own hash")
			longest, dup := probeCheck(&s, hostileKeys(field), s.hash64)
			assert.LessOrEqual(t, longest, maxProbe, "longest probe")
			assert.Zero(t, dup, "64-bit collisions")
		})
	}
	t.Run("bites", func(t *testing.T) {
		var s store[ObjectKey]
		s.init()
		keys := hostileKeys("CacheSalt")[:2000]                         // one run: quadratic
		longest, dup := probeCheck(&s, keys, func(k ObjectKey) uint64 { // blind to the salt
			k.CacheSalt = ""
			return s.hash64(k)
		})
		assert.Greater(t, longest, maxProbe)
		assert.Equal(t, len(keys)-1, dup)
	})
}

// TestObjectKeyHashEquality checks that the hash of ObjectKey agrees with
// maphash.Comparable on equality classes: equal keys (even in strings of
// their own, and with the model and salt cache switching between them)
// hash alike, distinct keys apart, over keys that vary in every field.
// Only ObjectKey itself takes that path: another type, even one of the
// same layout, keeps maphash.Comparable.
func TestObjectKeyHashEquality(t *testing.T) {
	var s store[ObjectKey]
	s.init()
	var keys []ObjectKey
	for _, model := range []string{"", "a", "b", "ab"} {
		for _, salt := range []string{"", "a", "b"} {
			for _, chunk := range []string{"", "a", "b", "ab", strings.Repeat("x", 32)} {
				for _, rg := range [][2]uint32{{0, 0}, {0, 1}, {1, 0}, {1 << 31, 1 << 31}} {
					keys = append(keys, ObjectKey{ChunkHash: chunk, Model: model, KVRank: rg[0], GroupID: rg[1], CacheSalt: salt})
				}
			}
		}
	}
	clone := func(k ObjectKey) ObjectKey {
		k.ChunkHash, k.Model, k.CacheSalt = strings.Clone(k.ChunkHash), strings.Clone(k.Model), strings.Clone(k.CacheSalt)
		return k
	}
	ours := map[uint64]ObjectKey{}
	theirs := map[uint64]ObjectKey{}
	// Twice over, the second time in reverse order with cloned strings, so
	// each key meets the cache in another state.
	for pass := range 2 {
		for i := range keys {
			k := keys[i]
			if pass == 1 {
				k = clone(keys[len(keys)-1-i])
			}
			h, c := s.hash64(k), maphash.Comparable(s.seed, k)
			if prev, ok := ours[h]; ok {
				assert.Equal(t, prev, k, "one hash, two keys")
			}
			if prev, ok := theirs[c]; ok {
				assert.Equal(t, prev, k, "maphash: one hash, two keys")
			}
			ours[h], theirs[c] = k, k
		}
	}
	assert.Len(t, ours, len(keys), "one hash per key")
	assert.Len(t, theirs, len(keys))

	type sameLayout ObjectKey
	var other store[sameLayout]
	other.init()
	assert.False(t, other.objectKey, "a type of the same layout keeps maphash.Comparable")
	k := sameLayout{ChunkHash: "c", Model: "m"}
	assert.Equal(t, maphash.Comparable(other.seed, k), other.hash64(k))

	// Stores have seeds of their own.
	var s2 store[ObjectKey]
	s2.init()
	assert.NotEqual(t, s.hash64(keys[7]), s2.hash64(keys[7]))
}

// BenchmarkObjectKeyHash compares the hash of ObjectKey with
// maphash.Comparable over 5700 keys of one model, and with the hash of
// the chunk hash alone. Reports ns/key.
func BenchmarkObjectKeyHash(b *testing.B) {
	keys := hashKeys(5700)
	var s store[ObjectKey]
	s.init()
	var sink uint64
	b.Run("comparable", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				sink += maphash.Comparable(s.seed, k)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	})
	b.Run("objectkey", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				sink += s.hash64(k)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	})
	// The floor: the chunk hash alone.
	b.Run("string", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				sink += maphash.String(s.seed, k.ChunkHash)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	})
	_ = sink
}

// TestObjectLayout pins the record's size for ObjectKey at three cache
// lines, and checks that meta, the part reset with a plain clear, holds
// no pointers.
func TestObjectLayout(t *testing.T) {
	assert.EqualValues(t, 192, unsafe.Sizeof(object[ObjectKey]{}))
	assert.EqualValues(t, 0, unsafe.Offsetof(object[ObjectKey]{}.key))
	assert.False(t, hasPointers(reflect.TypeFor[meta]()))
	assert.True(t, hasPointers(reflect.TypeFor[object[ObjectKey]]()))
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// TestRecordSetTakesLowest drives the set of reusable records with random
// adds and takes, over 100,000 records (two summary words and more), and
// checks each take against the least element of a model set: the records
// of a batch must come back in ascending order whatever order they were
// released in.
func TestRecordSetTakesLowest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var r recordSet
	model := map[int32]bool{}
	least := func() int32 {
		m := int32(0)
		for i := range model {
			if m == 0 || i < m {
				m = i
			}
		}
		return m
	}
	for step := range 20000 {
		if rng.IntN(3) > 0 {
			i := 1 + rng.Int32N(100_000)
			if !model[i] {
				r.add(i)
				model[i] = true
			}
			continue
		}
		want := least()
		if got := r.take(); got != want {
			require.Fail(t, fmt.Sprintf("step %d: take = %d, want %d", step, got, want))
		}
		delete(model, want)
	}
	for len(model) > 0 {
		want := least()
		if got := r.take(); got != want {
			require.Fail(t, fmt.Sprintf("draining: take = %d, want %d", got, want))
		}
		delete(model, want)
	}
	if got := r.take(); got != 0 {
		require.Fail(t, fmt.Sprintf("take on an empty set = %d, want 0", got))
	}
}

// TestStoreReusesRecordsInOrder releases records in a scattered order,
// every other one first, and checks that the next allocations get them
// back in ascending order.
func TestStoreReusesRecordsInOrder(t *testing.T) {
	var s store[int]
	s.init()
	var recs []*object[int]
	for range 1000 {
		recs = append(recs, s.alloc())
	}
	for _, parity := range []int{0, 1} {
		for i := parity; i < len(recs); i += 2 {
			s.release(recs[i])
		}
	}
	prev := int32(0)
	for range recs {
		o := s.alloc()
		if o.idx <= prev {
			require.Fail(t, fmt.Sprintf("record %d allocated after %d", o.idx, prev))
		}
		prev = o.idx
	}
}

// BenchmarkRecordSet times taking 4560 records and adding them back, as a
// reservation of 4560 new keys and its abort do.
func BenchmarkRecordSet(b *testing.B) {
	var r recordSet
	for i := int32(1); i <= 5700; i++ {
		r.add(i)
	}
	got := make([]int32, 4560)
	for b.Loop() {
		for i := range got {
			got[i] = r.take()
		}
		for _, i := range got {
			r.add(i)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(got)), "ns/record")
}
