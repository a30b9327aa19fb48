package fuzz

// A seed is one named input of a fuzz target, committed under
// testdata/fuzz/<target>/<name>.
type seed struct {
	name string
	data []byte
}

// seedSets lists every target's named seeds; each target's file adds its
// own in an init function. It lives in a non-test file, as fuzzedAllocator
// does, because the libFuzzer build compiles no _test.go file but the
// target's, and the files of FuzzFrameDecoder and FuzzDaemonOwnership
// register their seeds here.
var seedSets = map[string][]seed{}
