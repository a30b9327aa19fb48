package l1

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTTLLock(t *testing.T) {
	var l ttlLock
	assert.False(t, l.held(0))
	assert.False(t, l.lapsed(0))

	l.lock(2, 100, 50) // held until 150
	assert.True(t, l.held(149))
	assert.False(t, l.held(150), "a lock lapses at its expiry")
	assert.True(t, l.lapsed(150))

	l.lock(3, 140, 50) // refreshes every holder's expiry to 190
	assert.Equal(t, ttlLock{count: 5, expiry: 190}, l)
	assert.True(t, l.held(180))

	l.unlock(1) // does not refresh
	assert.Equal(t, ttlLock{count: 4, expiry: 190}, l)

	l.lock(1, 200, 50) // lapsed at 190: the old holds are dropped
	assert.Equal(t, ttlLock{count: 1, expiry: 250}, l)

	l.unlock(7) // floor at zero
	assert.Equal(t, ttlLock{}, l)
	assert.False(t, l.lapsed(1000))
}

func TestList(t *testing.T) {
	var l list[int]
	l.init(false)
	assert.Nil(t, l.front())
	objs := []*object[int]{{key: 0}, {key: 1}, {key: 2}}
	for _, o := range objs {
		l.pushBack(o)
	}
	order := func() []int {
		var out []int
		for o := l.front(); o != nil; o = l.after(o) {
			out = append(out, o.key)
		}
		return out
	}
	assert.Equal(t, []int{0, 1, 2}, order())
	l.moveToBack(objs[0])
	assert.Equal(t, []int{1, 2, 0}, order())
	l.moveToBack(objs[0])
	assert.Equal(t, []int{1, 2, 0}, order())
	l.remove(objs[2])
	assert.Equal(t, []int{1, 0}, order())
	assert.Equal(t, 2, l.len)

	// The expiry links are independent of the LRU links.
	var q list[int]
	q.init(true)
	q.pushBack(objs[0])
	assert.Equal(t, []int{1, 0}, order())
	assert.Equal(t, objs[0], q.front())
	assert.Nil(t, q.after(objs[0]))
}
