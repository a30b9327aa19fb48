//go:build !invariants

package l1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReleaseBuildRunsNoChecks: without the invariants tag no call
// reaches the checks (they are compiled out): the mutation hook is never
// called, and a corruption goes unnoticed by the calls themselves.
func TestReleaseBuildRunsNoChecks(t *testing.T) {
	m, clk := newClockedManager(t, 16, time.Second)
	calls := 0
	mutation = func(string, any) { calls++ }
	defer func() { mutation = nil }()
	rs, err := m.ReserveWrite([]int{1, 2}, nil, 4096, ModeAll)
	require.NoError(t, err)
	_, err = m.FinishWriteAndReserveRead([]int{1, 2}, []Lease{rs[0].Lease, rs[1].Lease}, 1)
	require.NoError(t, err)
	m.held++ // caught at the next call under the tag
	clk.Advance(2 * time.Second)
	_, err = m.EvictTo(0)
	require.NoError(t, err)
	m.held--
	require.Zero(t, calls)
}
