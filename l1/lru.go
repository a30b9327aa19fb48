package l1

// list is an intrusive doubly linked list of objects with a sentinel. Each
// object carries two sets of links: one for the LRU list, which holds every
// object, and one for the expiry queue, if any, that holds it. All
// operations are O(1).
type list[K comparable] struct {
	root object[K] // root.next is the front, root.prev the back
	len  int
	exp  bool // use the objects' expiry links, not their LRU links
}

type links[K comparable] struct {
	prev, next *object[K]
}

func (l *list[K]) init(exp bool) {
	l.exp = exp
	r := l.links(&l.root)
	r.prev, r.next = &l.root, &l.root
}

func (l *list[K]) links(o *object[K]) *links[K] {
	if l.exp {
		return &o.expLinks
	}
	return &o.lruLinks
}

// front returns the first object, or nil.
func (l *list[K]) front() *object[K] { return l.after(&l.root) }

// after returns the object after o, or nil at the end.
func (l *list[K]) after(o *object[K]) *object[K] {
	if n := l.links(o).next; n != &l.root {
		return n
	}
	return nil
}

// pushBack appends o, which must not be in the list.
func (l *list[K]) pushBack(o *object[K]) {
	r := l.links(&l.root)
	last := r.prev
	ol := l.links(o)
	ol.prev, ol.next = last, &l.root
	l.links(last).next = o
	r.prev = o
	l.len++
}

// remove unlinks o, which must be in the list.
func (l *list[K]) remove(o *object[K]) {
	ol := l.links(o)
	l.links(ol.prev).next = ol.next
	l.links(ol.next).prev = ol.prev
	ol.prev, ol.next = nil, nil
	l.len--
}

// moveToBack makes o the last object.
func (l *list[K]) moveToBack(o *object[K]) {
	if l.links(&l.root).prev == o {
		return
	}
	l.remove(o)
	l.pushBack(o)
}
