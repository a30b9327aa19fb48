//go:build linux

package server

import (
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// TestBufPool: loans stay within the budget, kept buffers count in it and
// are reused, a loan that does not fit waits for one given back or fails
// at its deadline, and a pair is lent whole or not at all.
func TestBufPool(t *testing.T) {
	if maxLoan != 20<<20 {
		t.Fatalf("maxLoan %d", maxLoan)
	}
	for n, want := range map[int]int{1: minClass, minClass: minClass, minClass + 1: 2 * minClass, wire.MaxFrame: wire.MaxFrame} {
		if got := class(n); got != want {
			t.Errorf("class(%d) = %d, want %d", n, got, want)
		}
	}
	if got := answerBound(wire.TypeReserveRead, wire.MaxFrame); got != wire.HeaderSize+8+40*wire.MaxKeys {
		t.Errorf("answerBound MaxFrame %d", got)
	}
	if got := answerBound(wire.TypePing, wire.MaxFrame); got != wire.HeaderSize+2+wire.MaxMessageLen {
		t.Errorf("answerBound ping %d", got)
	}
	// A call by handle (version 2) takes 12 bytes a key: the bound holds
	// its answer too.
	for _, n := range []int{1000, 65536} {
		var e wire.Encoder
		f, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeFinishWriteAndReserveRead, Locks: 1, Handles: make([]uint32, n), Leases: make([]l1.Lease, n)})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := answerBound(wire.TypeFinishWriteAndReserveRead, len(f)), wire.HeaderSize+8+40*n; got < want {
			t.Errorf("answerBound of a %d-byte finish_write_and_reserve_read by %d handles: %d, under its answer's %d bytes", len(f), n, got, want)
		}
	}
	const budget = 1 << 20
	p := newBufPool(budget)
	check := func(what string) {
		t.Helper()
		st := p.stats()
		if st.used > budget || st.kept > st.used || st.kept > budget/4 || st.used < 0 {
			t.Fatalf("%s: %+v", what, st)
		}
	}
	a, b, ok := p.get(600<<10, 100<<10, time.Now()) // 1 MiB + 128 KiB: over
	if ok || a != nil || b != nil {
		t.Fatal("a loan over the budget was granted")
	}
	a, b, ok = p.get(300<<10, 100<<10, time.Now()) // 512 + 128 KiB
	if !ok || cap(a) != 512<<10 || cap(b) != 128<<10 {
		t.Fatalf("get: %v %d %d", ok, cap(a), cap(b))
	}
	check("lent")
	// 512 KiB more does not fit; it waits, and gets it once a is back.
	var wg sync.WaitGroup
	wg.Add(1)
	var c []byte
	go func() {
		defer wg.Done()
		c, _, ok = p.get(400<<10, 0, time.Now().Add(10*time.Second))
	}()
	time.Sleep(50 * time.Millisecond)
	p.put(a, nil)
	wg.Wait()
	if !ok || cap(c) != 512<<10 {
		t.Fatalf("the waiting loan: %v %d", ok, cap(c))
	}
	check("after the wait")
	if _, _, ok := p.get(512<<10, 0, time.Now().Add(50*time.Millisecond)); ok {
		t.Fatal("a loan past the budget was granted after waiting")
	}
	if st := p.stats(); st.busy != 2 || st.waited != 3 { // the first get, the goroutine's, this one
		t.Fatalf("busy %d waited %d", st.busy, st.waited)
	}
	p.put(b, c)
	check("all back")
	// Small buffers come back kept and are reused.
	x, _, _ := p.get(minClass, 0, time.Now())
	p.put(x)
	y, _, _ := p.get(minClass, 0, time.Now())
	if &x[0] != &y[0] {
		t.Fatal("a kept buffer was not reused")
	}
	p.put(y)
	// Kept buffers make room: a full-budget loan drops them.
	z, _, ok := p.get(budget, 0, time.Now())
	if !ok || cap(z) != budget {
		t.Fatalf("a loan of the whole budget with buffers kept: %v", ok)
	}
	check("whole")
	p.put(z)
	check("end")
}
