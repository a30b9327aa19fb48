package sim

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParallelRunsEveryJob(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 100} {
		done := make([]atomic.Int32, 50)
		require.NoError(t, Parallel(workers, len(done), func(i int) error { done[i].Add(1); return nil }))
		for i := range done {
			require.EqualValues(t, 1, done[i].Load(), "job %d, %d workers", i, workers)
		}
	}
	require.NoError(t, Parallel(2, 0, func(int) error { panic("no job") }))
}

// TestParallelStopsAtAFailure: on one worker, jobs start in order and none
// starts after the failure; on several, the lowest failed index wins.
func TestParallelStopsAtAFailure(t *testing.T) {
	var ran atomic.Int32
	err := Parallel(1, 10, func(i int) error {
		ran.Add(1)
		if i >= 3 {
			return fmt.Errorf("job %d", i)
		}
		return nil
	})
	require.EqualError(t, err, "job 3")
	require.EqualValues(t, 4, ran.Load())
	errLow := errors.New("low")
	gate := make(chan struct{})
	err = Parallel(2, 2, func(i int) error {
		if i == 1 {
			close(gate)
			return errors.New("high")
		}
		<-gate // job 0 fails after job 1
		return errLow
	})
	require.ErrorIs(t, err, errLow)
}
