package allocator

import (
	"fmt"
	"math/bits"
)

// bitmap is a fixed-size set of alignment units. The allocator keeps two:
// the first unit of every live block and the last unit of every live block.
// Together they validate a Block handed to Free in O(size/align/64) words
// without a per-block map entry, which keeps batch allocation at a few
// nanoseconds per block.
type bitmap []uint64

func newBitmap(n int64) bitmap { return make(bitmap, (n+63)/64) }

func (m bitmap) get(i int64) bool { return m[i>>6]&(1<<(uint64(i)&63)) != 0 }
func (m bitmap) set(i int64)      { m[i>>6] |= 1 << (uint64(i) & 63) }
func (m bitmap) clear(i int64)    { m[i>>6] &^= 1 << (uint64(i) & 63) }

// anySet reports whether any bit in [lo, hi) is set.
func (m bitmap) anySet(lo, hi int64) bool {
	if lo >= hi {
		return false
	}
	lw, hw := lo>>6, (hi-1)>>6
	lmask := ^uint64(0) << (uint64(lo) & 63)
	hmask := ^uint64(0) >> (63 - (uint64(hi-1) & 63))
	if lw == hw {
		return m[lw]&lmask&hmask != 0
	}
	if m[lw]&lmask != 0 || m[hw]&hmask != 0 {
		return true
	}
	for _, w := range m[lw+1 : hw] {
		if w != 0 {
			return true
		}
	}
	return false
}

// clearRange clears every bit in [lo, hi).
func (m bitmap) clearRange(lo, hi int64) {
	if lo >= hi {
		return
	}
	lw, hw := lo>>6, (hi-1)>>6
	lmask := ^uint64(0) << (uint64(lo) & 63)
	hmask := ^uint64(0) >> (63 - (uint64(hi-1) & 63))
	if lw == hw {
		m[lw] &^= lmask & hmask
		return
	}
	m[lw] &^= lmask
	clear(m[lw+1 : hw])
	m[hw] &^= hmask
}

// countRange returns the number of set bits in [lo, hi).
func (m bitmap) countRange(lo, hi int64) int64 {
	if lo >= hi {
		return 0
	}
	lw, hw := lo>>6, (hi-1)>>6
	lmask := ^uint64(0) << (uint64(lo) & 63)
	hmask := ^uint64(0) >> (63 - (uint64(hi-1) & 63))
	if lw == hw {
		return int64(bits.OnesCount64(m[lw] & lmask & hmask))
	}
	n := bits.OnesCount64(m[lw]&lmask) + bits.OnesCount64(m[hw]&hmask)
	for _, w := range m[lw+1 : hw] {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// setEvery sets bits first, first+step, ..., k of them, writing each word
// once: carving a batch sets two bits per block, often several per word.
func (m bitmap) setEvery(first, step, k int64) {
	if k <= 0 {
		return
	}
	w, acc := first>>6, uint64(0)
	for i, u := int64(0), first; i < k; i, u = i+1, u+step {
		if u>>6 != w {
			m[w] |= acc
			w, acc = u>>6, 0
		}
		acc |= 1 << (uint64(u) & 63)
	}
	m[w] |= acc
}

// count returns the number of set bits.
func (m bitmap) count() int64 {
	var n int
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// summedBitmap is a bitmap with a summary level: bit w of sum is set
// exactly when word w of bits is non-zero. anySet then costs two edge words
// plus one summary bit per 4096 units, so Free can check that no live-block
// end lies inside a 40 MiB block at 4 KiB alignment (10240 units) by
// reading 5 words instead of 160.
type summedBitmap struct{ bits, sum bitmap }

func newSummedBitmap(n int64) summedBitmap {
	return summedBitmap{bits: newBitmap(n), sum: newBitmap((n + 63) / 64)}
}

func (m summedBitmap) get(i int64) bool { return m.bits.get(i) }

func (m summedBitmap) set(i int64) {
	m.bits.set(i)
	m.sum.set(i >> 6)
}

func (m summedBitmap) clear(i int64) {
	m.bits.clear(i)
	if m.bits[i>>6] == 0 {
		m.sum.clear(i >> 6)
	}
}

func (m summedBitmap) setEvery(first, step, k int64) {
	m.bits.setEvery(first, step, k)
	if k <= 0 {
		return
	}
	last := first + (k-1)*step
	if step >= 64 {
		for u := first; u <= last; u += step {
			m.sum.set(u >> 6)
		}
		return
	}
	// step < 64: every word from first's to last's gets at least one bit.
	for w := first >> 6; w <= last>>6; w++ {
		m.sum.set(w)
	}
}

func (m summedBitmap) clearRange(lo, hi int64) {
	if lo >= hi {
		return
	}
	m.bits.clearRange(lo, hi)
	lw, hw := lo>>6, (hi-1)>>6
	m.sum.clearRange(lw, hw+1)
	if m.bits[lw] != 0 {
		m.sum.set(lw)
	}
	if m.bits[hw] != 0 {
		m.sum.set(hw)
	}
}

func (m summedBitmap) anySet(lo, hi int64) bool {
	if lo >= hi {
		return false
	}
	lw, hw := lo>>6, (hi-1)>>6
	if hw-lw < 2 {
		return m.bits.anySet(lo, hi)
	}
	return m.bits.anySet(lo, (lw+1)<<6) || m.bits.anySet(hw<<6, hi) || m.sum.anySet(lw+1, hw)
}

func (m summedBitmap) countRange(lo, hi int64) int64 { return m.bits.countRange(lo, hi) }
func (m summedBitmap) count() int64                  { return m.bits.count() }

// verify checks the summary against the bits.
func (m summedBitmap) verify() error {
	for w, x := range m.bits {
		if (x != 0) != m.sum.get(int64(w)) {
			return fmt.Errorf("summary bit %d is %v for word %#x", w, m.sum.get(int64(w)), x)
		}
	}
	return nil
}
