package sim

// Grants counts what a replay's ReserveWrite calls granted. Only calls
// that had keys to allocate count; a call that only re-locked existing
// keys, or found every key present, is not one of Calls.
type Grants struct {
	// Requested counts keys that needed memory (missing keys of a
	// ReserveWrite); Granted those that got it; OOMKeys those answered
	// OutOfMemory. Requested = Granted + OOMKeys.
	Requested, Granted, OOMKeys int64
	// Calls counts the calls with keys to allocate; FailedCalls those
	// with at least one OutOfMemory key (LMCache logs one "Failed to
	// allocate" per such call); FailedWithFree those of FailedCalls that
	// gave up while the allocator had the n × s bytes the call needed, n
	// keys of aligned size s (its free bytes after the call plus the bytes
	// the call granted, so what on-demand eviction freed inside the call
	// counts): failures that placement or fragmentation caused, not
	// exhaustion.
	Calls, FailedCalls, FailedWithFree int64
}

// Add counts one ReserveWrite call that granted granted new objects of
// unit bytes each (aligned) and answered oom keys OutOfMemory, after
// which the allocator had free bytes free. It reports whether the call
// counted, that is had keys to allocate.
func (g *Grants) Add(granted, oom, unit, free int64) bool {
	need := granted + oom
	if need == 0 {
		return false
	}
	g.Calls++
	g.Requested += need
	g.Granted += granted
	g.OOMKeys += oom
	if oom > 0 {
		g.FailedCalls++
		if free+granted*unit >= need*unit {
			g.FailedWithFree++
		}
	}
	return true
}

// Sub returns g − h, field by field: what a stretch of a replay added.
func (g Grants) Sub(h Grants) Grants {
	return Grants{
		Requested: g.Requested - h.Requested, Granted: g.Granted - h.Granted, OOMKeys: g.OOMKeys - h.OOMKeys,
		Calls: g.Calls - h.Calls, FailedCalls: g.FailedCalls - h.FailedCalls, FailedWithFree: g.FailedWithFree - h.FailedWithFree,
	}
}
