//go:build kvalloc_fuzz_mutant

package fuzz

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// With the kvalloc_fuzz_mutant tag FuzzAllocator fuzzes an allocator whose
// Used is one unit off, which every committed seed catches; only
// .clusterfuzzlite/libfuzzer.sh's self-test builds it.
func init() {
	fuzzedAllocator = func(a *allocator.Allocator) allocref.UnderTest { return mutant.UsedOffByOne{Allocator: a} }
}
