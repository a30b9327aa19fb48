package trace

import (
	"math/rand/v2"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// labLHD is LHD, least hit density (Beckmann et al., NSDI '18): blocks
// fall in classes (chain position, partial last block, use count), and per
// class the lab learns online, from histograms of the ages at which its
// blocks were hit or evicted, the hit density of each age: the chance of a
// hit still to come over the expected slot-time until the block leaves.
// Eviction samples 64 resident blocks and takes the least dense.
type labLHD struct {
	now    *sim.Clock
	rng    *rand.Rand
	last   []int64 // per block: last use (ns)
	class  []uint8
	uses   []uint8
	pos    []int32 // per block: place in res, -1 when absent
	res    []int32 // the resident blocks
	hits   [][lhdBins]float64
	evicts [][lhdBins]float64
	dens   [][lhdBins]float64
	events int
	ready  bool
}

const (
	lhdBins    = 48
	lhdClasses = 4 * 2 * 3
	lhdSample  = 64
	lhdEvery   = 20000 // events between recomputations
	lhdDecay   = 0.9
)

func newLabLHD(distinct int, now *sim.Clock) *labLHD {
	l := &labLHD{now: now, rng: rand.New(rand.NewPCG(1, 2)), last: make([]int64, distinct), class: make([]uint8, distinct),
		uses: make([]uint8, distinct), pos: make([]int32, distinct),
		hits: make([][lhdBins]float64, lhdClasses), evicts: make([][lhdBins]float64, lhdClasses), dens: make([][lhdBins]float64, lhdClasses)}
	for i := range l.pos {
		l.pos[i] = -1
	}
	return l
}

// bin maps an age to a bin: 0 for under a second, then a factor √2 a bin.
func lhdBin(age int64) int {
	s := float64(age) / 1e9
	b := 0
	for x := 1.0; x <= s && b < lhdBins-1; x *= 1.4142135623730951 {
		b++
	}
	return b
}

// lhdAge is a bin's representative age in seconds.
func lhdAge(b int) float64 {
	if b == 0 {
		return 0.5
	}
	x := 1.0
	for range b - 1 {
		x *= 1.4142135623730951
	}
	return x * 1.2
}

func lhdClass(m labMeta, uses uint8) uint8 {
	pb := 3
	switch {
	case m.pos == 0:
		pb = 0
	case m.pos < 4:
		pb = 1
	case m.pos < 16:
		pb = 2
	}
	c := pb*6 + int(min(uses, 2))
	if m.last {
		c += 3
	}
	return uint8(c)
}

func (l *labLHD) event() {
	if l.events++; l.events < lhdEvery {
		return
	}
	l.events = 0
	for c := range l.dens {
		var h, s0, s1 float64
		for b := lhdBins - 1; b >= 0; b-- {
			a := lhdAge(b)
			h += l.hits[c][b]
			n := l.hits[c][b] + l.evicts[c][b]
			s0 += n
			s1 += n * a
			if life := s1 - a*s0; life > 0 {
				l.dens[c][b] = h / life
			} else {
				l.dens[c][b] = 0
			}
			l.hits[c][b] *= lhdDecay
			l.evicts[c][b] *= lhdDecay
		}
	}
	l.ready = true
}

func (l *labLHD) insert(b int32, m labMeta) {
	l.last[b] = int64(l.now.Now())
	l.uses[b] = 0
	// The class keeps the block's place and partial flag; a use moves it
	// to the next use count.
	l.class[b] = lhdClass(m, 0)
	l.pos[b] = int32(len(l.res))
	l.res = append(l.res, b)
}

func (l *labLHD) hit(b int32) {
	c := l.class[b]
	l.hits[c][lhdBin(int64(l.now.Now())-l.last[b])]++
	l.event()
	if l.uses[b] < 2 {
		l.uses[b]++
		l.class[b] = uint8(int(c) - int(c)%3 + int(l.uses[b]))
	}
	l.last[b] = int64(l.now.Now())
}

func (l *labLHD) victim() int32 {
	best, bestD := int32(-1), 0.0
	for range lhdSample {
		b := l.res[l.rng.IntN(len(l.res))]
		age := int64(l.now.Now()) - l.last[b]
		d := -float64(age) // before any data: the oldest
		if l.ready {
			d = l.dens[l.class[b]][lhdBin(age)]
		}
		if best < 0 || d < bestD {
			best, bestD = b, d
		}
	}
	l.evicts[l.class[best]][lhdBin(int64(l.now.Now())-l.last[best])]++
	l.event()
	i := l.pos[best]
	last := l.res[len(l.res)-1]
	l.res[i], l.pos[last] = last, i
	l.res = l.res[:len(l.res)-1]
	l.pos[best] = -1
	return best
}
