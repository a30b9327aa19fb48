package l1

// list is an intrusive doubly linked list of objects, linked by record
// number (see store.go). Each object carries two sets of links: one for the
// LRU list, which holds every object, and one for the expiry queue, if any,
// that holds it. All operations are O(1).
type list[K comparable] struct {
	s          *store[K]
	head, tail int32 // record numbers; 0 when empty
	len        int
	exp        bool // use the objects' expiry links, not their LRU links
}

// links are record numbers; 0 means none.
type links struct {
	prev, next int32
}

func (l *list[K]) init(s *store[K], exp bool) {
	l.s, l.exp = s, exp
}

func (l *list[K]) links(o *object[K]) *links {
	if l.exp {
		return &o.expLinks
	}
	return &o.lruLinks
}

// front returns the first object, or nil.
func (l *list[K]) front() *object[K] {
	if l.head == 0 {
		return nil
	}
	return l.s.rec(l.head)
}

// after returns the object after o, or nil at the end.
func (l *list[K]) after(o *object[K]) *object[K] {
	if n := l.links(o).next; n != 0 {
		return l.s.rec(n)
	}
	return nil
}

// pushBack appends o, which must not be in the list.
func (l *list[K]) pushBack(o *object[K]) {
	ol := l.links(o)
	ol.prev, ol.next = l.tail, 0
	if l.tail != 0 {
		l.links(l.s.rec(l.tail)).next = o.idx
	} else {
		l.head = o.idx
	}
	l.tail = o.idx
	l.len++
}

// remove unlinks o, which must be in the list.
func (l *list[K]) remove(o *object[K]) {
	ol := l.links(o)
	if ol.prev != 0 {
		l.links(l.s.rec(ol.prev)).next = ol.next
	} else {
		l.head = ol.next
	}
	if ol.next != 0 {
		l.links(l.s.rec(ol.next)).prev = ol.prev
	} else {
		l.tail = ol.prev
	}
	ol.prev, ol.next = 0, 0
	l.len--
}

// moveToBack makes o the last object.
func (l *list[K]) moveToBack(o *object[K]) {
	if l.tail == o.idx {
		return
	}
	l.remove(o)
	l.pushBack(o)
}
