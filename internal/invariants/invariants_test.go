package invariants_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

func TestCheck(t *testing.T) {
	invariants.Check("Nothing", nil)
	bad := errors.New("free units 3, recomputed 2")
	defer func() {
		v, ok := recover().(*invariants.Violation)
		require.True(t, ok, "Check panics with a *Violation")
		assert.Equal(t, "invariants: after Free: free units 3, recomputed 2", v.Error())
		assert.ErrorIs(t, v, bad)
	}()
	invariants.Check("Free", bad)
	t.Fatal("Check returned on an error")
}

func TestCatch(t *testing.T) {
	assert.Nil(t, invariants.Catch(func() {}))
	v := invariants.Catch(func() { invariants.Check("Free", errors.New("bad")) })
	require.NotNil(t, v)
	assert.Equal(t, "Free", v.Op)
	assert.PanicsWithValue(t, "other", func() { invariants.Catch(func() { panic("other") }) })
}
