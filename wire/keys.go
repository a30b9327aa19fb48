package wire

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/kvalloc/kvalloc/l1"
)

// The keys block of a keyed request:
//
//	u32 nkeys                ≤ MaxKeys
//	u16 nstrings             ≤ MaxStrings
//	u16 reserved             0
//	nstrings × string        u16 length ≤ MaxStringLen, then the bytes
//	nkeys × key              16 bytes, then the chunk hash:
//	    u16 hash length      ≤ MaxStringLen
//	    u16 model            index into the strings
//	    u16 cache salt       index into the strings
//	    u16 reserved         0
//	    u32 KV rank
//	    u32 group id
//	    hash bytes
//
// Models and salts repeat across a batch, so they travel once per frame,
// in a table; each key names its two by index.
const keyHeaderSize = 16

// stringTable builds a request's table of models and salts, in first
// appearance order (each key's model, then its salt): the canonical
// encoding, which the conformance vectors use.
type stringTable struct {
	list  []string
	index map[string]uint16
}

func (t *stringTable) reset() {
	t.list = t.list[:0]
	clear(t.index)
}

// id returns s's index, adding it when new. Few distinct strings are
// usual, so the last two are checked first and a map is kept only past
// eight.
func (t *stringTable) id(s string) (uint16, bool) {
	n := len(t.list)
	if n > 0 && t.list[n-1] == s {
		return uint16(n - 1), true
	}
	if n > 1 && t.list[n-2] == s {
		return uint16(n - 2), true
	}
	if n <= 8 {
		for i, x := range t.list {
			if x == s {
				return uint16(i), true
			}
		}
	} else if i, ok := t.index[s]; ok {
		return i, true
	}
	if n >= MaxStrings {
		return 0, false
	}
	t.list = append(t.list, s)
	if n+1 > 8 {
		if t.index == nil {
			t.index = make(map[string]uint16)
		}
		if n+1 == 9 {
			for i, x := range t.list {
				t.index[x] = uint16(i)
			}
		} else {
			t.index[s] = uint16(n)
		}
	}
	return uint16(n), true
}

// appendKeys appends the keys block.
func (e *Encoder) appendKeys(dst []byte, keys []l1.ObjectKey) ([]byte, error) {
	if len(keys) > MaxKeys {
		return dst, errorf(CodeInvalidArgument, "%d keys exceed the limit %d", len(keys), MaxKeys)
	}
	t := &e.table
	t.reset()
	ids := e.ids[:0]
	size := 8
	var m, s uint16 // the last key's model and salt, while the next repeat them
	for i := range keys {
		k := &keys[i]
		if len(k.ChunkHash) > MaxStringLen || len(k.Model) > MaxStringLen || len(k.CacheSalt) > MaxStringLen {
			return dst, errorf(CodeInvalidArgument, "key %d: a chunk hash, model or salt is longer than %d bytes", i, MaxStringLen)
		}
		size += keyHeaderSize + len(k.ChunkHash)
		if i > 0 && k.Model == keys[i-1].Model && k.CacheSalt == keys[i-1].CacheSalt {
			ids = append(ids, m, s)
			continue
		}
		var ok1, ok2 bool
		m, ok1 = t.id(k.Model)
		s, ok2 = t.id(k.CacheSalt)
		if !ok1 || !ok2 {
			return dst, errorf(CodeInvalidArgument, "the keys name more than %d distinct models and salts", MaxStrings)
		}
		ids = append(ids, m, s)
	}
	e.ids = ids
	// The block's size is known now: grow once, then write in place.
	for _, x := range t.list {
		size += 2 + len(x)
	}
	at := len(dst)
	dst = slices.Grow(dst, size)[:at+size]
	b := dst[at:]
	binary.LittleEndian.PutUint32(b, uint32(len(keys)))
	binary.LittleEndian.PutUint16(b[4:], uint16(len(t.list)))
	binary.LittleEndian.PutUint16(b[6:], 0)
	off := 8
	for _, x := range t.list {
		binary.LittleEndian.PutUint16(b[off:], uint16(len(x)))
		off += 2 + copy(b[off+2:], x)
	}
	for i := range keys {
		k := &keys[i]
		h := b[off : off+keyHeaderSize]
		binary.LittleEndian.PutUint16(h[0:], uint16(len(k.ChunkHash)))
		binary.LittleEndian.PutUint16(h[2:], ids[2*i])
		binary.LittleEndian.PutUint16(h[4:], ids[2*i+1])
		binary.LittleEndian.PutUint16(h[6:], 0)
		binary.LittleEndian.PutUint32(h[8:], k.KVRank)
		binary.LittleEndian.PutUint32(h[12:], k.GroupID)
		off += keyHeaderSize + copy(b[off+keyHeaderSize:], k.ChunkHash)
	}
	return dst, nil
}

// readKeys decodes the keys block into d.keys. With own, each key's chunk
// hash is a string of its own, fit to be kept (reserve_write: the manager
// keeps new keys); otherwise the hashes are slices of one string holding
// the block, for calls that only look keys up: one allocation per frame,
// or none with d.Borrow, where that string is the frame's own bytes.
// Models and salts are interned per Decoder.
func (d *Decoder) readKeys(r *reader, own bool) []l1.ObjectKey {
	n := r.count(keyHeaderSize, MaxKeys, "key count")
	ns := int(r.u16("string count"))
	r.zero(uint64(r.u16("keys reserved")), "keys reserved field")
	if r.err != nil {
		return nil
	}
	if ns > MaxStrings {
		r.fail(CodeBadFrame, "string count %d exceeds the limit %d", ns, MaxStrings)
		return nil
	}
	strs := d.strs[:0]
	for i := 0; i < ns; i++ {
		l := int(r.u16("string length"))
		if l > MaxStringLen {
			r.fail(CodeBadFrame, "string %d: length %d exceeds the limit %d", i, l, MaxStringLen)
			return nil
		}
		b := r.bytes(l, "string")
		if r.err != nil {
			return nil
		}
		strs = append(strs, d.intern(b))
	}
	d.strs = strs
	// The keys, checked and built in one pass; a chunk hash is made only
	// once every key has passed, except a borrowed one, which costs
	// nothing (it aliases the frame).
	b, start := r.b, r.off
	borrow := d.Borrow && !own && start < len(b)
	var rest string // with borrow: the frame from the keys on
	if borrow {
		rest = unsafe.String(&b[start], len(b)-start)
	}
	keys := d.keys[:0]
	if cap(keys) < n {
		keys = make([]l1.ObjectKey, 0, n)
	}
	off := start
	for i := 0; i < n; i++ {
		if len(b)-off < keyHeaderSize {
			r.off = off
			r.bytes(keyHeaderSize, "key") // the failure, in need's words
			return nil
		}
		h := b[off : off+keyHeaderSize]
		hl := int(uint16(h[0]) | uint16(h[1])<<8)
		mi := int(uint16(h[2]) | uint16(h[3])<<8)
		si := int(uint16(h[4]) | uint16(h[5])<<8)
		switch {
		case hl > MaxStringLen:
			r.fail(CodeBadFrame, "key %d: hash length %d exceeds the limit %d", i, hl, MaxStringLen)
		case mi >= ns || si >= ns:
			r.fail(CodeBadFrame, "key %d: string index %d or %d out of the table's %d", i, mi, si, ns)
		case h[6] != 0 || h[7] != 0:
			r.fail(CodeBadFrame, "key %d: reserved field is not 0", i)
		}
		off += keyHeaderSize
		if r.err == nil && len(b)-off < hl {
			r.off = off
			r.bytes(hl, "chunk hash")
		}
		if r.err != nil {
			return nil
		}
		k := l1.ObjectKey{
			Model:     strs[mi],
			CacheSalt: strs[si],
			KVRank:    uint32(h[8]) | uint32(h[9])<<8 | uint32(h[10])<<16 | uint32(h[11])<<24,
			GroupID:   uint32(h[12]) | uint32(h[13])<<8 | uint32(h[14])<<16 | uint32(h[15])<<24,
		}
		if borrow {
			k.ChunkHash = rest[off-start : off-start+hl]
		}
		keys = append(keys, k)
		off += hl
	}
	r.off = off
	d.keys = keys
	if borrow {
		return keys
	}
	// Every key passed: their hashes, each its own string (own) or
	// slices of one string holding the block.
	region := b[start:off]
	var all string
	if !own {
		all = string(region)
	}
	for i, at := 0, 0; i < len(keys); i++ {
		hl := int(uint16(region[at]) | uint16(region[at+1])<<8)
		at += keyHeaderSize
		if own {
			keys[i].ChunkHash = string(region[at : at+hl])
		} else {
			keys[i].ChunkHash = all[at : at+hl]
		}
		at += hl
	}
	return keys
}

// internBytes bounds the bytes of the strings a Decoder's intern table
// holds, so that a Decoder kept for a connection's lifetime keeps at most
// this much of what its peer sent, however many distinct models it names.
const internBytes = 64 << 10

// intern returns b as a string, the same string for the same bytes while
// the table holds it. The table is dropped when it outgrows 1024 entries
// or internBytes, so a peer that sends many distinct models costs an
// allocation each, not memory.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	if d.interned == nil || len(d.interned) >= 1024 || d.internedLen+len(b) > internBytes {
		d.interned = make(map[string]string)
		d.internedLen = 0
	}
	s := string(b)
	d.interned[s] = s
	d.internedLen += len(s)
	return s
}
