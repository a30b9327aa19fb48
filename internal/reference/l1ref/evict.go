package l1ref

import (
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// evictable is l1's predicate: finished, no live lock.
func (o *object) evictable(now time.Duration) bool {
	return o.finished && !o.write.held(now) && !o.read.held(now)
}

// IsEvictable models l1.Manager.IsEvictable.
func (m *Manager[K]) IsEvictable(key K) bool {
	m.Sweep()
	o := m.objects[key]
	return o != nil && o.evictable(m.Now)
}

// EvictTo models l1.Manager.EvictTo: the policy's victims until the
// objects hold at most ratio of the capacity.
func (m *Manager[K]) EvictTo(ratio float64) (int, error) {
	if err := m.begin(!(ratio >= 0 && ratio <= 1)); err != nil {
		return 0, err
	}
	limit := ratio * float64(m.Mem.Capacity())
	n := 0
	for float64(m.Used()) > limit {
		k, ok := m.victim(nil, nil)
		if !ok {
			break
		}
		m.evict(k)
		n++
	}
	return n, nil
}

// evictFor evicts evictable objects not named in the request, in the
// policy's order, until n objects fit: the plain loop. The check after
// each eviction is Fit when placement is not Contiguous, else a retry of
// the batch whenever free bytes would allow it. Under Scattered placement
// the batch reuses victims' blocks (reuse); the victims are the plain
// loop's all the same.
func (m *Manager[K]) evictFor(size int64, n int, request map[K]int) ([]allocator.Block, bool) {
	useFit := m.Cfg.Placement != allocator.Contiguous
	var victims []allocator.Block
	var aside []s3Entry[K]
	defer func() { m.restore(aside) }()
	for {
		k, ok := m.victim(request, &aside)
		if !ok {
			break
		}
		victims = append(victims, m.objects[k].block)
		m.evict(k)
		m.Counters.OnDemandEvictions++
		if useFit && m.Mem.MaxSlots(size, n) >= n {
			if m.Cfg.Placement == allocator.Scattered {
				return m.reuse(size, n, victims), true
			}
			break
		}
		if !useFit && m.Mem.FreeBytes()/size >= int64(n) {
			if bs, ok := m.Mem.PlanBatch(size, n, m.Cfg.Placement); ok {
				return bs, true
			}
		}
	}
	return m.Mem.PlanBatch(size, n, m.Cfg.Placement)
}

// reuse plans a scattered batch of n objects of size bytes after the
// victims, whose blocks are now free, made room for it, as l1 does: a
// victim's block that is one object's size and starts a whole number of
// objects into its free run, where carving the run from its front could
// put an object, goes to the batch as it is (at most n of them, in
// eviction order); the rest are planned over the free space without those
// blocks. Reuse never changes how many objects fit.
func (m *Manager[K]) reuse(size int64, n int, victims []allocator.Block) []allocator.Block {
	z := m.Mem.Units(size) * m.Mem.Align
	runs := m.Mem.Runs()
	var reused []allocator.Block
	for _, b := range victims {
		for _, x := range runs {
			start, end := x[0]*m.Mem.Align, (x[0]+x[1])*m.Mem.Align
			if b.Size == z && len(reused) < n && start <= b.Offset && b.Offset < end && (b.Offset-start)%z == 0 {
				reused = append(reused, b)
			}
		}
	}
	free := m.Mem.Clone()
	free.NoGen = true
	if err := free.Take(reused); err != nil {
		panic("l1ref: reused blocks overlap: " + err.Error())
	}
	rest, ok := free.PlanBatch(size, n-len(reused), allocator.Scattered)
	if !ok {
		panic("l1ref: reusing victims' blocks lost room")
	}
	return append(reused, rest...)
}

// Used is the bytes held by the objects' blocks, without sweeping, like
// l1's Usage.
func (m *Manager[K]) Used() int64 {
	var n int64
	for _, o := range m.objects {
		n += o.block.Size
	}
	return n
}
