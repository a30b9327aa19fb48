package l1ref

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Delete models l1.Manager.Delete.
func (m *Manager[K]) Delete(keys []K, force bool) ([]l1.Status, error) {
	return perKey(m, false, keys, func(_ int, k K, o *object) l1.Status {
		switch {
		case o == nil:
			return l1.KeyNotExist
		case !force && (o.write.held(m.Now) || o.read.held(m.Now)):
			return l1.KeyIsLocked
		}
		m.forceRemove(k, o)
		return l1.OK
	})
}

// Clear models l1.Manager.Clear.
func (m *Manager[K]) Clear(force bool) int {
	m.Sweep()
	n := 0
	for _, k := range m.lru() {
		if o := m.objects[k]; force || !o.write.held(m.Now) && !o.read.held(m.Now) {
			m.forceRemove(k, o)
			n++
		}
	}
	return n
}

// Close models l1.Manager.Close: it frees every object and the
// quarantine.
func (m *Manager[K]) Close() {
	m.Clear(true)
	for l, q := range m.quarantine {
		m.Mem.Release([]allocator.Block{q.Block})
		delete(m.quarantine, l)
	}
	m.closed = true
}

// Touch models l1.Manager.Touch.
func (m *Manager[K]) Touch(keys []K) error {
	_, err := perKey(m, false, keys, func(_ int, _ K, o *object) struct{} {
		if o != nil {
			m.hit(o)
			m.touch(o)
		}
		return struct{}{}
	})
	return err
}
