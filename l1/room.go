package l1

import "math"

// Room: what a one-pass reservation knows before it asks the memory.
//
// The manager's own objects all live in its memory, so a memory can grant
// at most (Capacity - held) / size more objects of size bytes: other users of a
// shared allocator only take more, and a GrowingRegion's capacity only
// bounds its usable part. ReserveWrite without on-demand eviction gives a
// placeholder record only to the
// missing keys within that room; a missing key past it would be answered
// OutOfMemory after the call anyway, and answering it at once saves the
// record it would have taken and given back: its index entry, its three
// cache lines, and its removal (the prefix must cost nothing on top of the
// keys it grants). A full pool, the case that grants a prefix,
// has little room, so nearly every key past the prefix takes this path.
// A memory that cannot bound itself reports a Capacity of math.MaxInt64
// and gets a placeholder for every missing key: LMCache's baselines
// (internal/reference/baseline) do, as LMCache's allocator reports no
// capacity.

// roomLocked returns how many objects of size bytes the memory could
// grant at most, whatever its fragmentation: its capacity less the bytes
// in the manager's objects and its quarantine (quarantine.go), in objects
// of size bytes rounded up to the alignment; 0 for a size above the
// capacity. It reads no memory state: the capacity and alignment are
// read once, at New.
func (m *Manager[K]) roomLocked(size int64) int64 {
	if size > m.capacity {
		return 0
	}
	return (m.capacity - m.held - m.qbytes) / roundUp(size, m.align)
}

// roundUp returns size, positive, rounded up to a multiple of align,
// positive, whether or not align is a power of two, saturated at
// math.MaxInt64.
func roundUp(size, align int64) int64 {
	q := (size-1)/align + 1
	if q > math.MaxInt64/align {
		return math.MaxInt64
	}
	return q * align
}

// pastRoomLocked reports whether a missing key that would be the
// (n+1)-th of the call to allocate lies past the room, *room being the
// room when last computed. The room can only grow during a call (the
// lookups reclaim objects whose locks lapsed, and placeholders hold no
// bytes), so a key is refused only after the room is computed again.
func (m *Manager[K]) pastRoomLocked(room *int64, size int64, n int) bool {
	if int64(n) < *room {
		return false
	}
	*room = m.roomLocked(size)
	return int64(n) >= *room
}

// pastSet holds the missing keys of one ReserveWrite call that got no
// placeholder because they lie past the room (see above), so that a
// repeat of one is still answered KeyNotWritable: an open-addressing
// table of key indices, keyed by the keys' index hashes, reused from
// call to call and cleared at the first key past the room.
type pastSet struct {
	slots []pastSlot // a power of two, at least twice the keys it may hold
	used  bool       // slots holds the current call's keys
}

// pastSlot is one key past the room: its index hash and its index in the
// call plus one (0: empty).
type pastSlot struct {
	h uint32
	i int32
}

// seenPastLocked reports whether keys[i], missing and past the room, is a
// repeat of a key of the call that was past the room too, and remembers
// it otherwise. h is keys[i]'s index hash. The first key past the room in
// a call readies the set for the len(keys)-i keys that may follow.
func (m *Manager[K]) seenPastLocked(keys []K, i int, h uint32) bool {
	p := &m.past
	if !p.used {
		size := 16
		for size < 2*(len(keys)-i) {
			size *= 2
		}
		if cap(p.slots) < size {
			p.slots = make([]pastSlot, size)
		} else {
			p.slots = p.slots[:size]
			clear(p.slots)
		}
		p.used = true
	}
	mask := len(p.slots) - 1
	for j := int(h) & mask; ; j = (j + 1) & mask {
		s := p.slots[j]
		switch {
		case s.i == 0:
			p.slots[j] = pastSlot{h: h, i: int32(i + 1)}
			return false
		case s.h == h && m.objects.equal(&keys[s.i-1], &keys[i]):
			return true
		}
	}
}
