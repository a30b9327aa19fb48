package sim

// Gauge keeps the peak and the mean of a figure sampled during a replay,
// such as the allocator's fragmentation after every operation. The zero
// Gauge has no sample; its Peak and Mean are 0.
type Gauge struct {
	// Peak is the largest sample (at least 0).
	Peak float64
	sum  float64
	n    int64
}

// Add records one sample.
func (g *Gauge) Add(v float64) {
	g.sum += v
	g.n++
	g.Peak = max(g.Peak, v)
}

// Mean returns the mean of the samples, or 0 without one.
func (g *Gauge) Mean() float64 {
	if g.n == 0 {
		return 0
	}
	return g.sum / float64(g.n)
}
