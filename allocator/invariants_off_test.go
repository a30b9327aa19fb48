//go:build !invariants

package allocator

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseBuildRunsNoChecks: without the invariants tag no call reaches
// the checks (they are compiled out): a mutation hook is never called, and
// the corruption it would make goes unnoticed by the calls themselves.
func TestReleaseBuildRunsNoChecks(t *testing.T) {
	r, err := newSliceRegion(64 * 4096)
	require.NoError(t, err)
	a, err := New(r, Options{})
	require.NoError(t, err)
	defer a.Close()
	calls := 0
	mutation = func(*Allocator, string) { calls++ }
	defer func() { mutation = nil }()
	bs, err := a.AllocateBatch(4096, 4, Scattered)
	require.NoError(t, err)
	b, err := a.Allocate(4096)
	require.NoError(t, err)
	bs, err = a.Reissue(bs...)
	require.NoError(t, err)
	require.NoError(t, a.Free(append(bs, b)...))
	require.Zero(t, calls)
}
