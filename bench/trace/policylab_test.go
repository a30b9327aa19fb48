package trace

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// The policy lab: allocator-free models of candidate eviction policies,
// under exactly the request model and the bookkeeping of the ideal LRU
// (lruCache), replayed through the same engine, so that their hit rate
// and eviction-induced prefill compare with the bounds' directly. It is
// how the policies of l1 were chosen; KVALLOC_POLICYLAB=1 prints the
// table (go test -run TestPolicyLab -v ./bench/trace/).

// labPolicy orders the resident blocks of a labCache.
type labPolicy interface {
	// insert adds block b, finished; m says what the caller knew of it.
	insert(b int32, m labMeta)
	// hit records a read of resident block b.
	hit(b int32)
	// victim removes and returns the block to evict.
	victim() int32
}

// labMeta is what the store knows of a block at its finish.
type labMeta struct {
	pos     int  // position in its request's chain
	last    bool // the request's last block, and partial
	revisit bool // its request hit a cached prefix (a later turn)
}

// ilist is an intrusive doubly linked list over dense block numbers; one
// labLists holds several, a block in at most one.
type labLists struct {
	prev, next []int32 // indices shifted by lists (sentinels 0..lists-1)
	in         []int8  // list holding the block, -1 none
	n          []int
}

func newLabLists(distinct, lists int) *labLists {
	l := &labLists{prev: make([]int32, distinct+lists), next: make([]int32, distinct+lists), in: make([]int8, distinct), n: make([]int, lists)}
	for i := range l.in {
		l.in[i] = -1
	}
	for s := range lists {
		l.prev[s], l.next[s] = int32(s), int32(s)
	}
	return l
}

func (l *labLists) sentinels() int32 { return int32(len(l.n)) }

func (l *labLists) pushBack(s int, b int32) {
	i := b + l.sentinels()
	t := l.prev[s]
	l.prev[i], l.next[i] = t, int32(s)
	l.next[t] = i
	l.prev[s] = i
	l.in[b] = int8(s)
	l.n[s]++
}

func (l *labLists) pushFront(s int, b int32) {
	i := b + l.sentinels()
	h := l.next[s]
	l.prev[i], l.next[i] = int32(s), h
	l.prev[h] = i
	l.next[s] = i
	l.in[b] = int8(s)
	l.n[s]++
}

func (l *labLists) remove(b int32) {
	i := b + l.sentinels()
	l.next[l.prev[i]] = l.next[i]
	l.prev[l.next[i]] = l.prev[i]
	l.n[l.in[b]]--
	l.in[b] = -1
}

// front returns the first block of list s, or -1.
func (l *labLists) front(s int) int32 {
	if l.n[s] == 0 {
		return -1
	}
	return l.next[s] - l.sentinels()
}

// labLRU is LRU; doa puts a partial last block at the cold end; tail
// inserts a request's new blocks tail first (prefix-aware).
type labLRU struct {
	l        *labLists // 0 the LRU list, 1 the partial blocks (fifo)
	doa      bool
	fifo     bool // partial blocks wait in their own FIFO, evicted first
	revisitC bool // new blocks of later turns go to the cold end too
}

func (p *labLRU) insert(b int32, m labMeta) {
	if p.doa && m.last && p.fifo {
		p.l.pushBack(1, b)
		return
	}
	if (p.doa && m.last) || (p.revisitC && m.revisit) {
		p.l.pushFront(0, b)
		return
	}
	p.l.pushBack(0, b)
}
func (p *labLRU) hit(b int32) { p.l.remove(b); p.l.pushBack(0, b) }
func (p *labLRU) victim() int32 {
	v := p.l.front(1)
	if v < 0 {
		v = p.l.front(0)
	}
	p.l.remove(v)
	return v
}

// labSLRU is segmented LRU: new blocks on probation, a hit promotes to the
// protected segment (at most protect × slots), whose overflow goes back
// to probation's hot end.
type labSLRU struct {
	l       *labLists
	protect int
	doa     bool
}

func (p *labSLRU) insert(b int32, m labMeta) {
	if p.doa && m.last {
		p.l.pushFront(0, b)
		return
	}
	p.l.pushBack(0, b)
}
func (p *labSLRU) hit(b int32) {
	p.l.remove(b)
	p.l.pushBack(1, b)
	for p.l.n[1] > p.protect {
		d := p.l.front(1)
		p.l.remove(d)
		p.l.pushBack(0, d)
	}
}
func (p *labSLRU) victim() int32 {
	s := 0
	if p.l.n[0] == 0 {
		s = 1
	}
	v := p.l.front(s)
	p.l.remove(v)
	return v
}

// labS3 is S3-FIFO; adaptive moves the small queue's target by ghost hits
// (a hit in the small queue's ghost grows it, one in the main queue's
// ghost shrinks it), as ARC moves its target.
type labS3 struct {
	l              *labLists // 0 small, 1 main
	freq           []uint8
	ghostS, ghostM *labGhost
	target, slots  int
	adaptive, doa  bool
}

func (p *labS3) insert(b int32, m labMeta) {
	p.freq[b] = 0
	switch {
	case p.ghostS.has(b):
		if p.adaptive {
			p.target = min(p.slots-1, p.target+max(1, p.ghostM.n/max(1, p.ghostS.n)))
		}
		p.l.pushBack(1, b)
	case p.ghostM.has(b):
		if p.adaptive {
			p.target = max(1, p.target-max(1, p.ghostS.n/max(1, p.ghostM.n)))
		}
		p.l.pushBack(1, b)
	case p.doa && m.last:
		p.l.pushFront(0, b)
	default:
		p.l.pushBack(0, b)
	}
}
func (p *labS3) hit(b int32) {
	if p.freq[b] < 3 {
		p.freq[b]++
	}
}
func (p *labS3) victim() int32 {
	for {
		if p.l.n[0] > 0 && (p.l.n[0] >= p.target || p.l.n[1] == 0) {
			t := p.l.front(0)
			p.l.remove(t)
			if p.freq[t] > 0 {
				p.freq[t] = 0
				p.l.pushBack(1, t)
				continue
			}
			p.ghostS.add(t, p.slots)
			return t
		}
		t := p.l.front(1)
		p.l.remove(t)
		if p.freq[t] > 0 {
			p.freq[t]--
			p.l.pushBack(1, t)
			continue
		}
		if p.adaptive {
			p.ghostM.add(t, p.slots)
		}
		return t
	}
}

// labGhost is a FIFO of block numbers with membership.
type labGhost struct {
	ring    []int32
	head, n int
	member  []int32 // count per block
}

func newLabGhost(distinct, slots int) *labGhost {
	return &labGhost{ring: make([]int32, slots+1), member: make([]int32, distinct)}
}
func (g *labGhost) has(b int32) bool { return g.member[b] > 0 }
func (g *labGhost) add(b int32, limit int) {
	for g.n >= limit || g.n >= len(g.ring) {
		g.member[g.ring[g.head]]--
		g.head = (g.head + 1) % len(g.ring)
		g.n--
	}
	g.ring[(g.head+g.n)%len(g.ring)] = b
	g.n++
	g.member[b]++
}

// labTinyLFU is W-TinyLFU: a 1 % LRU window, an SLRU main cache (80 %
// protected) and a frequency sketch (exact counts, halved every 10 × slots
// references) that admits the window's victim to the main cache only if
// it was used more often than the main cache's victim.
type labTinyLFU struct {
	l             *labLists // 0 window, 1 probation, 2 protected
	window, prot  int
	slots         int
	count         []uint8
	seen, resetAt int
}

func (p *labTinyLFU) touch(b int32) {
	if p.count[b] < 15 {
		p.count[b]++
	}
	if p.seen++; p.seen >= p.resetAt {
		p.seen = 0
		for i := range p.count {
			p.count[i] /= 2
		}
	}
}
func (p *labTinyLFU) insert(b int32, _ labMeta) {
	p.touch(b)
	p.l.pushBack(0, b)
	// While the main cache has room, the window's overflow joins it.
	for p.l.n[0] > p.window && p.l.n[1]+p.l.n[2] < p.slots-p.window {
		c := p.l.front(0)
		p.l.remove(c)
		p.l.pushBack(1, c)
	}
}
func (p *labTinyLFU) hit(b int32) {
	p.touch(b)
	switch p.l.in[b] {
	case 0:
		p.l.remove(b)
		p.l.pushBack(0, b)
	default:
		p.l.remove(b)
		p.l.pushBack(2, b)
		for p.l.n[2] > p.prot {
			d := p.l.front(2)
			p.l.remove(d)
			p.l.pushBack(1, d)
		}
	}
}

// victim makes room for one block: when the window is at its size, its
// oldest block duels the main cache's victim, and the less used goes.
func (p *labTinyLFU) victim() int32 {
	mainVictim := func() int32 {
		for s := 1; s <= 2; s++ {
			if v := p.l.front(s); v >= 0 {
				return v
			}
		}
		return -1
	}
	if p.l.n[0] >= p.window {
		c := p.l.front(0)
		v := mainVictim()
		if v < 0 || p.count[c] <= p.count[v] {
			p.l.remove(c)
			return c
		}
		p.l.remove(v)
		p.l.remove(c)
		p.l.pushBack(1, c)
		return v
	}
	v := mainVictim()
	if v < 0 {
		v = p.l.front(0)
	}
	p.l.remove(v)
	return v
}

// labARC is ARC (Megiddo and Modha, FAST '03): T1 holds blocks used once
// since they entered, T2 blocks used again; ghosts B1 and B2 remember
// blocks evicted from each, and a hit in a ghost moves the target size p
// of T1 towards the list that would have kept it. doa puts a partial last
// block at T1's cold end.
type labARC struct {
	l        *labLists // 0 T1, 1 T2, 2 B1, 3 B2
	p, slots int
	doa      bool
	pending  int32 // the block being inserted, for replace
}

func (a *labARC) prepare(b int32) {
	a.pending = b
	switch a.l.in[b] {
	case 2:
		a.p = min(a.slots, a.p+max(1, a.l.n[3]/max(1, a.l.n[2])))
	case 3:
		a.p = max(0, a.p-max(1, a.l.n[2]/max(1, a.l.n[3])))
	}
}

func (a *labARC) insert(b int32, m labMeta) {
	switch a.l.in[b] {
	case 2, 3:
		a.l.remove(b)
		a.l.pushBack(1, b)
		return
	}
	// Trim the ghosts to ARC's bounds: |T1|+|B1| ≤ c, total ≤ 2c.
	if a.l.n[0]+a.l.n[2] >= a.slots && a.l.n[2] > 0 {
		a.l.remove(a.l.front(2))
	} else if a.l.n[0]+a.l.n[1]+a.l.n[2]+a.l.n[3] >= 2*a.slots && a.l.n[3] > 0 {
		a.l.remove(a.l.front(3))
	}
	if a.doa && m.last {
		a.l.pushFront(0, b)
		return
	}
	a.l.pushBack(0, b)
}

func (a *labARC) hit(b int32) { a.l.remove(b); a.l.pushBack(1, b) }

func (a *labARC) victim() int32 {
	t1 := a.l.n[0]
	if t1 > 0 && (t1 > a.p || (a.l.in[a.pending] == 3 && t1 == a.p) || a.l.n[1] == 0) {
		v := a.l.front(0)
		a.l.remove(v)
		a.l.pushBack(2, v)
		return v
	}
	v := a.l.front(1)
	a.l.remove(v)
	a.l.pushBack(3, v)
	return v
}

// labCache is lruCache with its order delegated to a labPolicy.
type labCache struct {
	tr        *Trace
	slots     int
	pol       labPolicy
	resident  []int8 // 0 absent, 1 in flight, 2 resident
	n         int
	evictions uint64
	meta      map[*flight][]labMeta
}

func (c *labCache) lookup(f *flight) error {
	for j, b := range f.req.Blocks {
		if c.resident[b] != 2 {
			f.hits = j
			return nil
		}
		c.pol.hit(b)
	}
	f.hits = len(f.req.Blocks)
	return nil
}

func (c *labCache) store(f *flight) error {
	var ms []labMeta
	r := f.req
	for j := f.hits; j < len(r.Blocks); j++ {
		b := r.Blocks[j]
		if c.resident[b] != 0 {
			continue
		}
		c.resident[b] = 1
		f.granted = append(f.granted, b)
		last := j == len(r.Blocks)-1 && r.Input < int64(len(r.Blocks))*c.tr.BlockTokens
		ms = append(ms, labMeta{pos: j, last: last, revisit: f.hits > 0})
	}
	c.meta[f] = ms
	return nil
}

func (c *labCache) finish(f *flight) ([]int32, error) {
	ms := c.meta[f]
	delete(c.meta, f)
	// Tail first: the chain's later blocks are inserted first, so colder.
	for i := len(f.granted) - 1; i >= 0; i-- {
		b := f.granted[i]
		if pr, ok := c.pol.(interface{ prepare(int32) }); ok {
			pr.prepare(b)
		}
		if c.n == c.slots {
			v := c.pol.victim()
			c.resident[v] = 0
			c.n--
			c.evictions++
		}
		c.resident[b] = 2
		c.pol.insert(b, ms[i])
		c.n++
	}
	return f.granted, nil
}

func (c *labCache) sweep() error            { return nil }
func (c *labCache) readable(b int32) bool   { return c.resident[b] == 2 }
func (c *labCache) observe(*flight)         {}
func (c *labCache) close(res *Result) error { res.Evictions = c.evictions; return nil }

// labPolicies are the lab's candidates, by name.
func labPolicies(tr *Trace, slots int, clock *sim.Clock) []struct {
	name string
	pol  func() labPolicy
} {
	d := tr.Distinct
	lru := func(doa, rc bool) func() labPolicy {
		return func() labPolicy { return &labLRU{l: newLabLists(d, 2), doa: doa, revisitC: rc} }
	}
	lruFIFO := func() labPolicy { return &labLRU{l: newLabLists(d, 2), doa: true, fifo: true} }
	slru := func(f float64, doa bool) func() labPolicy {
		return func() labPolicy { return &labSLRU{l: newLabLists(d, 2), protect: int(f * float64(slots)), doa: doa} }
	}
	s3 := func(f float64, adaptive, doa bool) func() labPolicy {
		return func() labPolicy {
			return &labS3{l: newLabLists(d, 2), freq: make([]uint8, d), ghostS: newLabGhost(d, slots), ghostM: newLabGhost(d, slots),
				target: max(1, int(f*float64(slots))), slots: slots, adaptive: adaptive, doa: doa}
		}
	}
	tiny := func() labPolicy {
		return &labTinyLFU{l: newLabLists(d, 3), window: max(1, slots/100), prot: slots * 8 / 10, slots: slots, count: make([]uint8, d), resetAt: 10 * slots}
	}
	return []struct {
		name string
		pol  func() labPolicy
	}{
		{"lru (tail first)", lru(false, false)},
		{"lru+doa", lru(true, false)},
		{"lru+doa fifo", lruFIFO},
		{"lru+doa+later-turns-cold", lru(true, true)},
		{"slru 50%", slru(0.5, false)},
		{"slru 80%", slru(0.8, false)},
		{"slru 80%+doa", slru(0.8, true)},
		{"s3fifo 10%", s3(0.1, false, false)},
		{"s3fifo 10%+doa", s3(0.1, false, true)},
		{"s3fifo adaptive", s3(0.1, true, false)},
		{"s3fifo adaptive+doa", s3(0.1, true, true)},
		{"w-tinylfu", tiny},
		{"lhd", func() labPolicy { return newLabLHD(d, clock) }},
		{"arc", func() labPolicy { return &labARC{l: newLabLists(d, 4), slots: slots} }},
		{"arc+doa", func() labPolicy { return &labARC{l: newLabLists(d, 4), slots: slots, doa: true} }},
	}
}

func TestPolicyLab(t *testing.T) {
	if os.Getenv("KVALLOC_POLICYLAB") == "" {
		t.Skip("set KVALLOC_POLICYLAB=1 to print the policy lab's table")
	}
	tr, err := ReadFile(conversation, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, frac := range []float64{0.1, 0.25, 0.5} {
		o, err := Options{Slots: Pool{Fraction: frac}.Slots(tr, Options{})}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		lru, err := RunLRU(tr, o)
		if err != nil {
			t.Fatal(err)
		}
		bel, err := RunBelady(tr, o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("pool %.2f (%d slots): ideal LRU %.2f%% prefill %d; Belady %.2f%%\n", frac, o.Slots, 100*lru.HitRate(), lru.EvictPrefill, 100*bel.HitRate())
		var clock sim.Clock
		for _, p := range labPolicies(tr, int(o.Slots), &clock) {
			clock = sim.Clock{}
			res := &Result{Policy: p.name}
			c := &labCache{tr: tr, slots: int(o.Slots), pol: p.pol(), resident: make([]int8, tr.Distinct), meta: map[*flight][]labMeta{}}
			if err := replay(tr, c, o, false, &clock, res); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("  %-28s hit %6.2f%%  Δ LRU %+6.2fpp  Δ Belady %+6.2fpp  prefill %6d (%.2f× LRU)  orphans %d\n", p.name, 100*res.HitRate(),
				100*(res.HitRate()-lru.HitRate()), 100*(res.HitRate()-bel.HitRate()), res.EvictPrefill, float64(res.EvictPrefill)/float64(max(1, lru.EvictPrefill)), res.Orphans)
		}
	}
}

// ttlBound is an upper bound on the hits of every eviction policy that
// decides whether to keep a block from its class and its age since last
// use alone: LRU is one (Che's approximation: LRU keeps a block for the
// cache's characteristic time), and so are its refinements by position,
// partial last block, later turn and use count. For each class the bound
// picks, with hindsight of the trace's reuse gaps, the best age limit τ;
// the limits together may use no more slot-time than the pool has
// (slots × the trace's duration, a relaxation of "at most slots at every
// instant"), and every reference within its limit counts as a hit
// whether or not its prefix hit. The bound is the Lagrangian dual of that
// choice, so it holds for every choice of limits, not only the one found.
// It returns the bound on hits, and the
// reuse references it must miss (≥ what a policy's eviction-induced
// prefill plus orphans can be, since each reuse miss is one or the
// other).
func ttlBound(tr *Trace, slots int64, prefillRate float64) (hits, reuseMisses int64) {
	type iv struct {
		gap  float64 // seconds held to reach the next use; open: time left
		open bool
	}
	classes := map[int][]iv{}
	lastUse := make([]float64, tr.Distinct)
	lastClass := make([]int, tr.Distinct)
	uses := make([]int, tr.Distinct)
	seen := make([]bool, tr.Distinct)
	end := float64(tr.Requests[len(tr.Requests)-1].Arrival) / 1e9
	for i := range tr.Requests {
		r := &tr.Requests[i]
		t := float64(r.Arrival) / 1e9
		revisit := len(r.Blocks) > 0 && seen[r.Blocks[0]]
		for j, b := range r.Blocks {
			if seen[b] {
				classes[lastClass[b]] = append(classes[lastClass[b]], iv{gap: t - lastUse[b]})
			}
			seen[b] = true
			pb := 3
			switch {
			case j == 0:
				pb = 0
			case j < 4:
				pb = 1
			case j < 16:
				pb = 2
			}
			last := j == len(r.Blocks)-1 && r.Input < int64(len(r.Blocks))*tr.BlockTokens
			u := min(uses[b], 2)
			uses[b]++
			c := pb*100 + u*10
			if last {
				c += 1
			}
			if revisit {
				c += 1000
			}
			lastClass[b] = c
			// The block is resident at the earliest after its prefill.
			lastUse[b] = t + float64(r.Input)/prefillRate
		}
	}
	for b := range lastUse {
		if seen[b] {
			classes[lastClass[b]] = append(classes[lastClass[b]], iv{gap: max(0, end-lastUse[b]), open: true})
		}
	}
	type class struct {
		gaps, opens []float64 // sorted
		gsum, osum  []float64 // prefix sums
	}
	var cs []class
	var reuse int64
	for _, ivs := range classes {
		var c class
		for _, x := range ivs {
			g := max(0, x.gap)
			if x.open {
				c.opens = append(c.opens, g)
			} else {
				c.gaps = append(c.gaps, g)
				reuse++
			}
		}
		slices.Sort(c.gaps)
		slices.Sort(c.opens)
		pre := func(a []float64) []float64 {
			s := make([]float64, len(a)+1)
			for i, v := range a {
				s[i+1] = s[i] + v
			}
			return s
		}
		c.gsum, c.osum = pre(c.gaps), pre(c.opens)
		cs = append(cs, c)
	}
	// cost of limit τ in a sorted set: Σ min(g, τ).
	costOf := func(a, sum []float64, tau float64) float64 {
		k := sort.SearchFloat64s(a, math.Nextafter(tau, math.Inf(1)))
		return sum[k] + tau*float64(len(a)-k)
	}
	// best picks each class's limit for the multiplier lambda: the hits, the
	// slot-time, and the Lagrangian Σ max(hits − λ·cost).
	best := func(lambda float64) (h int64, cost, value float64) {
		for _, c := range cs {
			bh, bc, bv := int64(0), 0.0, 0.0
			for k, g := range c.gaps {
				if k+1 < len(c.gaps) && c.gaps[k+1] == g {
					continue
				}
				cost := costOf(c.gaps, c.gsum, g) + costOf(c.opens, c.osum, g)
				if v := float64(k+1) - lambda*cost; v > bv {
					bh, bc, bv = int64(k+1), cost, v
				}
			}
			h += bh
			cost += bc
			value += bv
		}
		return h, cost, value
	}
	// Weak duality: for every λ ≥ 0, Σ max(hits − λ·cost) + λ·budget is at
	// least the hits of any choice of limits within the budget. The dual
	// is convex in λ; bisect on its slope (budget − cost) and keep the
	// least value seen.
	budget := float64(slots) * end
	dual := func(lambda float64) float64 {
		_, _, v := best(lambda)
		return v + lambda*budget
	}
	bound := dual(0)
	lo, hi := 0.0, 1.0
	for {
		_, c, _ := best(hi)
		bound = min(bound, dual(hi))
		if c <= budget {
			break
		}
		hi *= 2
	}
	for range 60 {
		mid := (lo + hi) / 2
		bound = min(bound, dual(mid))
		if _, c, _ := best(mid); c <= budget {
			hi = mid
		} else {
			lo = mid
		}
	}
	hits = min(reuse, int64(math.Floor(bound)))
	return hits, reuse - hits
}

func TestPolicyLabBound(t *testing.T) {
	if os.Getenv("KVALLOC_POLICYLAB") == "" {
		t.Skip("set KVALLOC_POLICYLAB=1 to print the bound")
	}
	tr, err := ReadFile(conversation, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, frac := range []float64{0.1, 0.25, 0.5} {
		o, _ := Options{Slots: Pool{Fraction: frac}.Slots(tr, Options{})}.withDefaults()
		lru, err := RunLRU(tr, o)
		if err != nil {
			t.Fatal(err)
		}
		h, miss := ttlBound(tr, o.Slots, o.PrefillRate)
		fmt.Printf("pool %.2f: class+age bound %d reuse hits, %d reuse misses (%.2f× ideal LRU's prefill+orphans %d); LRU hits %d\n",
			frac, h, miss, float64(miss)/float64(lru.EvictPrefill+lru.Orphans), lru.EvictPrefill+lru.Orphans, lru.Hits)
	}
}
