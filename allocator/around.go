package allocator

// FreeAround returns the sizes, in bytes, of the free extents that end where
// b begins and begin where b ends (0 where there is none): what Free(b)
// would merge b with. It reads two address tables, O(1), and checks neither
// that b is live nor that it is aligned; for a block that is not live the
// answer means nothing. Callers that plan a run of frees, such as the L1
// manager's on-demand eviction, count the objects the merged extents would
// hold without freeing anything or walking the free extents. A closed
// allocator answers 0, 0.
func (a *Allocator) FreeAround(b Block) (before, after int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil || b.Offset < 0 || b.Size <= 0 {
		return 0, 0
	}
	u, end := b.Offset>>a.shift, b.End()>>a.shift
	if id, ok := a.free.byEnd.get(u); ok {
		before = a.free.nodes[id].size << a.shift
	}
	if id, ok := a.free.byStart.get(end); ok {
		after = a.free.nodes[id].size << a.shift
	}
	return before, after
}
