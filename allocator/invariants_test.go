//go:build invariants

package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// TestInvariantsCatchMutantsAtTheirCall: under the invariants tag a
// corruption made inside a call panics at that very call, naming it. Each
// mutant corrupts one part of the state once, after a prologue of correct
// calls that every check passed.
func TestInvariantsCatchMutantsAtTheirCall(t *testing.T) {
	mutants := []struct {
		name, op string
		call     func(a *Allocator, live []Block) error
		corrupt  func(a *Allocator)
	}{
		{"Allocate miscounts used units", "Allocate",
			func(a *Allocator, _ []Block) error { _, err := a.Allocate(4096); return err },
			func(a *Allocator) { a.usedUnits++ }},
		{"AppendBatch books a free unit as live", "AppendBatch",
			func(a *Allocator, _ []Block) error { _, err := a.AllocateBatch(4096, 3, Scattered); return err },
			func(a *Allocator) { a.live.reserve(1); a.live.insert(a.units-1, 1, a.gen) }},
		{"AppendUpTo forgets the largest extent", "AppendUpTo",
			func(a *Allocator, _ []Block) error { _, err := a.AllocateUpTo(4096, 2, ContiguousFirst); return err },
			func(a *Allocator) { a.largestUnits++ }},
		{"Free leaves a block live", "Free",
			func(a *Allocator, live []Block) error { return a.Free(live[0]) },
			func(a *Allocator) { a.liveBlocks++ }},
		{"Free of many loses free units", "Free",
			func(a *Allocator, live []Block) error { return a.Free(live[1:3]...) },
			func(a *Allocator) { a.freeUnits-- }},
		{"Reissue hands out a future generation", "Reissue",
			func(a *Allocator, live []Block) error { _, err := a.Reissue(live[3]); return err },
			func(a *Allocator) { a.live.slots[a.live.find(0)].gen = a.gen + 7 }},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			r, err := newSliceRegion(64 * 4096)
			require.NoError(t, err)
			a, err := New(r, Options{}) // not closed: a call that panics under the lock keeps it
			require.NoError(t, err)
			live, err := a.AllocateBatch(4096, 8, Contiguous) // checked: no mutant yet
			require.NoError(t, err)

			armed := true
			mutation = func(a *Allocator, op string) {
				if armed && op == m.op {
					armed = false
					m.corrupt(a)
				}
			}
			defer func() { mutation = nil }()
			v := invariants.Catch(func() { _ = m.call(a, live) })
			require.NotNil(t, v, "the corrupting call returned")
			assert.Equal(t, "allocator."+m.op, v.Op)
			assert.Contains(t, v.Error(), "invariants: after allocator."+m.op+": ")
			assert.False(t, armed)
		})
	}
}

// TestInvariantsPassACorrectRun: the checks hold through a run of every
// kind of call, growth included, so the panics above come from the
// mutants alone.
func TestInvariantsPassACorrectRun(t *testing.T) {
	f := newFakeGrowing(t, 16*4096, 4*4096)
	a, err := New(f, Options{})
	require.NoError(t, err)
	defer a.Close()
	f.grow(0)
	f.grow(2)
	bs, err := a.AllocateBatch(4096, 6, Scattered)
	require.NoError(t, err)
	bs, err = a.Reissue(bs...)
	require.NoError(t, err)
	require.Error(t, a.Free(Block{Offset: 4096, Size: 4096, Gen: 99}))
	require.NoError(t, a.Free(bs[1:4]...))
	f.grow(1)
	f.grow(3)
	up, err := a.AllocateUpTo(2*4096, 10, ContiguousFirst)
	require.NoError(t, err)
	require.NoError(t, a.Free(up...))
	one, err := a.Allocate(4096)
	require.NoError(t, err)
	require.NoError(t, a.Free(one))
	assert.Equal(t, 16*4096, int(a.Stats().Capacity))
}

// borrowed is a Region that breaks the contract: it serves another
// region's memory under a state of its own.
type borrowed struct {
	Region
	st RegionState
}

func (b *borrowed) State() *RegionState { return &b.st }

// TestInvariantsCatchTwoRegionsOverOneMemory: the RegionState claim makes
// a second allocator over one Region impossible; two Regions over the same
// memory, which only a Region that breaks its contract can make, are
// caught by the invariants build's table of region memory. Once the first
// region is closed its memory is free to claim again.
func TestInvariantsCatchTwoRegionsOverOneMemory(t *testing.T) {
	r, err := newSliceRegion(16 * 4096)
	require.NoError(t, err)
	a, err := New(r, Options{})
	require.NoError(t, err)
	_, err = New(&borrowed{Region: r}, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "two Regions over the same memory break the Region contract")

	mem := r.Bytes()
	require.NoError(t, a.Close()) // closes r: its memory's claim lapses
	c, err := New(&sliceRegion{buf: mem}, Options{})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
