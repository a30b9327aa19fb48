package fuzz

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
)

// fuzzedAllocator is what FuzzAllocator checks: the allocator itself.
// Built with the kvalloc_fuzz_mutant tag (mutant_build.go) it is a broken
// variant instead, so that .clusterfuzzlite/libfuzzer.sh can prove its
// crash path: libFuzzer finds the failure, and the input it writes back
// makes go test fail too. It lives in a non-test file because the
// libFuzzer build compiles no _test.go file but the target's.
var fuzzedAllocator = func(a *allocator.Allocator) allocref.UnderTest { return a }
