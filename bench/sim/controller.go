package sim

import (
	"math"
	"time"
)

// LMCache's periodic controller: a 1 s poll that, at 80 % usage, evicts a
// fifth of the objects.
const (
	DefaultSweepEvery = time.Second
	DefaultWatermark  = 0.8
	DefaultSweepRatio = 0.2
)

// Measure says what the periodic controller's Ratio is a share of.
type Measure uint8

const (
	// Keys, the zero value, evicts ⌊Ratio × objects⌋ objects, least
	// recently used first: LMCache's loop, which counts the tracked keys.
	Keys Measure = iota
	// Bytes evicts until usage is (1 − Ratio) × what it was: the reading
	// of LMCache's config docstring, which says bytes. With one object
	// size it is ⌈Ratio × objects⌉ objects.
	Bytes
)

// Controller is LMCache's periodic eviction controller: every Every of
// simulated time, when used ÷ capacity ≥ Watermark, it evicts Ratio of the
// objects (Keys) or of the bytes (Bytes), least recently used first,
// walking past locked objects. Reservations never evict under it, so a
// burst between two ticks, or a pool full of objects below the watermark,
// meets OutOfMemory. The replay schedules the ticks; Tick is one of them.
type Controller struct {
	Every     time.Duration
	Watermark float64
	Ratio     float64
	Measure   Measure
}

// DefaultController is LMCache's: every second, at 80 %, a fifth of the
// keys.
var DefaultController = Controller{Every: DefaultSweepEvery, Watermark: DefaultWatermark, Ratio: DefaultSweepRatio}

// Evictor is what a tick uses of l1.Manager.
type Evictor interface {
	// Usage returns the bytes held and the capacity.
	Usage() (used, capacity int64)
	// Len returns the number of objects.
	Len() int
	// EvictTo evicts least recently used evictable objects until used ≤
	// ratio × capacity, and returns how many it evicted.
	EvictTo(ratio float64) (int, error)
}

// Tick is what one tick did.
type Tick struct {
	// Reached says usage was at or above the watermark; Evicted counts
	// the objects the tick evicted. Calls counts the calls Tick made to
	// the Evictor.
	Reached bool
	Evicted int
	Calls   int
}

// Tick runs one tick of the controller on m.
//
// l1 has EvictTo (evict until usage ≤ a ratio) but no "evict k objects"
// call, so under Keys the tick computes k = ⌊Ratio × Len⌋ and asks
// EvictTo for the usage those k objects leave, used − k × used/Len, plus
// half an object of slack so that rounding never takes one object too
// many. With one object size that evicts exactly k objects; with several
// it evicts Ratio of the bytes. Unlike LMCache's loop, which takes Ratio
// of the keys and then drops the locked ones, EvictTo walks on past locked
// objects, so this controller is if anything kinder to the periodic
// policy than LMCache's.
func (c Controller) Tick(m Evictor) (Tick, error) {
	used, capacity := m.Usage()
	t := Tick{Calls: 1}
	if float64(used) < c.Watermark*float64(capacity) {
		return t, nil
	}
	t.Reached = true
	var ratio float64
	switch c.Measure {
	case Bytes:
		ratio = float64(used) / float64(capacity) * (1 - c.Ratio)
	default:
		n := m.Len()
		t.Calls++
		k := int(c.Ratio * float64(n))
		if k == 0 {
			return t, nil
		}
		avg := float64(used) / float64(n)
		target := float64(used) - float64(k)*avg + avg/2
		ratio = math.Min(1, math.Max(0, target/float64(capacity)))
	}
	n, err := m.EvictTo(ratio)
	t.Calls++
	t.Evicted = n
	return t, err
}
