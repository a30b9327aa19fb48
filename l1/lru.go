package l1

// list is an intrusive doubly linked list of objects, linked by record
// number (see store.go). Each object carries one set of links, for the
// eviction policy's list, if any, that holds it (see policy.go). All
// operations are O(1). Recency needs no list (see recency.go), and the
// expiry queues are slices of entries (see expiry.go).
type list[K comparable] struct {
	s          *store[K]
	head, tail int32 // record numbers; 0 when empty
	len        int
	set        linkSet // which of the object's links this list uses
}

// linkSet names one of an object's sets of links: the policy's, the only
// one left.
type linkSet uint8

const setEvict linkSet = 0

// links are record numbers; 0 means none.
type links struct {
	prev, next int32
}

func (l *list[K]) init(s *store[K], set linkSet) {
	l.s, l.set = s, set
}

func (l *list[K]) links(o *object[K]) *links { return &o.evl }

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

// back returns the last object, or nil.
func (l *list[K]) back() *object[K] {
	if l.tail == 0 {
		return nil
	}
	return l.s.rec(l.tail)
}

// before returns the object before o, or nil at the front.
func (l *list[K]) before(o *object[K]) *object[K] {
	if p := l.links(o).prev; p != 0 {
		return l.s.rec(p)
	}
	return nil
}

// pushFront prepends o, which must not be in the list.
func (l *list[K]) pushFront(o *object[K]) {
	if l.head == 0 {
		l.pushBack(o)
		return
	}
	l.insertBefore(o, l.s.rec(l.head))
}

// insertAfter puts o, which must not be in the list, right after at, which
// must be; at == nil puts it first.
func (l *list[K]) insertAfter(o, at *object[K]) {
	if at == nil {
		l.pushFront(o)
		return
	}
	al := l.links(at)
	if al.next == 0 {
		l.pushBack(o)
		return
	}
	l.insertBefore(o, l.s.rec(al.next))
}

// insertBefore puts o, which must not be in the list, right before at,
// which must be.
func (l *list[K]) insertBefore(o, at *object[K]) {
	ol, al := l.links(o), l.links(at)
	ol.prev, ol.next = al.prev, at.idx
	if al.prev != 0 {
		l.links(l.s.rec(al.prev)).next = o.idx
	} else {
		l.head = o.idx
	}
	al.prev = o.idx
	l.len++
}

// relinkAfter makes order, the record numbers of every object after at
// (all of them when at is 0), the list's tail in that order.
func (l *list[K]) relinkAfter(at int32, order []int32) {
	prev := at
	if at == 0 {
		l.head = 0
	}
	for _, i := range order {
		ol := l.links(l.s.rec(i))
		ol.prev = prev
		if prev != 0 {
			l.links(l.s.rec(prev)).next = i
		} else {
			l.head = i
		}
		prev = i
	}
	if prev != 0 {
		l.links(l.s.rec(prev)).next = 0
	}
	l.tail = prev
}
