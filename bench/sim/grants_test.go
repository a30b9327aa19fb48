package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrants: a call with nothing to allocate does not count; a failed
// call counts as failed with free bytes only when the free bytes after it
// plus what it granted would have held every key.
func TestGrants(t *testing.T) {
	var g Grants
	require.False(t, g.Add(0, 0, 4096, 0))
	require.True(t, g.Add(3, 0, 4096, 0))
	require.True(t, g.Add(1, 2, 4096, 2*4096))   // 2 free + 1 granted = 3 needed: fragmentation
	require.True(t, g.Add(1, 2, 4096, 2*4096-1)) // a byte short: exhaustion
	require.Equal(t, Grants{Requested: 9, Granted: 5, OOMKeys: 4, Calls: 3, FailedCalls: 2, FailedWithFree: 1}, g)
	before := g
	g.Add(0, 1, 4096, 4096)
	require.Equal(t, Grants{Requested: 1, OOMKeys: 1, Calls: 1, FailedCalls: 1, FailedWithFree: 1}, g.Sub(before))
}
