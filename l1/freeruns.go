package l1

// freeRuns are the free runs on-demand eviction plans, victim by victim:
// each victim's block merged with its free neighbours and with the runs of
// earlier victims. A run absorbed into a larger one stays in the slice,
// marked with the run it went into (up), so that every victim's final run,
// and its start, can be found once the victims are chosen (root): victim
// reuse reads them (see evictCountedLocked). A call usually has few
// victims, so the runs are searched end to end; past freeRunsLinear runs,
// a table indexes them by both ends, and keeps its stale entries: a lookup
// checks that the run it finds is live and has that end.
type freeRuns struct {
	runs []freeRun
	of   []int32 // the run each victim's block went into, in eviction order
	idx  runIndex
}

type freeRun struct {
	start, end int64
	up         int32 // -1: live; else the run it merged into
}

// freeRunsLinear is the most runs searched without the table.
const freeRunsLinear = 32

func (r *freeRuns) reset() {
	r.runs, r.of = r.runs[:0], r.of[:0]
	r.idx.reset()
}

// find returns the live run whose start (or end) is off, or -1.
func (r *freeRuns) find(off int64, end bool) int32 {
	match := func(x freeRun) bool { return x.up < 0 && (end && x.end == off || !end && x.start == off) }
	if r.idx.n > 0 {
		if i := r.idx.get(off); i >= 0 && match(r.runs[i]) {
			return i
		}
		return -1
	}
	for i, x := range r.runs {
		if match(x) {
			return int32(i)
		}
	}
	return -1
}

// merge plans the release of a victim's block [lo, hi) whose free
// neighbours in the memory are [start, lo) and [hi, end), and returns the
// run that holds it, merged with the runs of earlier victims that touch it.
func (r *freeRuns) merge(lo, hi, start, end int64) freeRun {
	li, ri := r.find(lo, true), r.find(hi, false)
	if li >= 0 {
		start = r.runs[li].start
	}
	if ri >= 0 {
		end = r.runs[ri].end
	}
	id := int32(len(r.runs))
	for _, i := range [2]int32{li, ri} {
		if i >= 0 {
			r.runs[i].up = id
		}
	}
	x := freeRun{start: start, end: end, up: -1}
	r.runs = append(r.runs, x)
	r.of = append(r.of, id)
	switch {
	case r.idx.n > 0:
		r.idx.put(start, id)
		r.idx.put(end, id)
	case len(r.runs) > freeRunsLinear:
		for j, y := range r.runs {
			if y.up < 0 {
				r.idx.put(y.start, int32(j))
				r.idx.put(y.end, int32(j))
			}
		}
	}
	return x
}

// start returns where the run holding victim v's block (the v-th merged)
// starts once every victim is merged, shortening the chains it follows.
func (r *freeRuns) start(v int) int64 {
	i := r.of[v]
	for r.runs[i].up >= 0 {
		i = r.runs[i].up
	}
	for j := r.of[v]; j != i; {
		j, r.runs[j].up = r.runs[j].up, i
	}
	r.of[v] = i
	return r.runs[i].start
}

// runIndex is an open-addressing table from byte offsets to run numbers,
// without deletion: it lives for one eviction.
type runIndex struct {
	keys []int64 // -1: empty
	vals []int32
	n    int
}

func (t *runIndex) reset() {
	if t.n > 0 {
		for i := range t.keys {
			t.keys[i] = -1
		}
		t.n = 0
	}
}

func (t *runIndex) slot(k int64) int {
	mask := len(t.keys) - 1
	i := int(uint64(k)*0x9E3779B97F4A7C15>>32) & mask
	for t.keys[i] != -1 && t.keys[i] != k {
		i = (i + 1) & mask
	}
	return i
}

func (t *runIndex) get(k int64) int32 {
	if len(t.keys) == 0 {
		return -1
	}
	if i := t.slot(k); t.keys[i] == k {
		return t.vals[i]
	}
	return -1
}

func (t *runIndex) put(k int64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		old, oldv := t.keys, t.vals
		size := max(256, 2*len(old))
		t.keys, t.vals = make([]int64, size), make([]int32, size)
		for i := range t.keys {
			t.keys[i] = -1
		}
		t.n = 0
		for i, ok := range old {
			if ok != -1 {
				t.put(ok, oldv[i])
			}
		}
	}
	i := t.slot(k)
	if t.keys[i] == -1 {
		t.n++
	}
	t.keys[i], t.vals[i] = k, v
}
