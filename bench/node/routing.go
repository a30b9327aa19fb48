//go:build linux

package node

import (
	"github.com/kvalloc/kvalloc/bench/trace"
)

// Routing is how data-parallel requests are spread over the engines.
type Routing struct {
	// Name is the report's label; Phrase completes "requests routed ...".
	Name, Phrase string
	// Assign returns the engine of each request of the replay, in
	// [0, engines). The replay calls it, so a routing that is not
	// deterministic makes the replay not deterministic.
	Assign func(reqs []trace.Request, engines int) ([]uint8, error)
}

// RoundRobin sends the i-th request to engine i mod engines: the default
// of a router that knows nothing about the requests.
var RoundRobin = Routing{Name: "round-robin", Phrase: "round-robin", Assign: func(reqs []trace.Request, engines int) ([]uint8, error) {
	out := make([]uint8, len(reqs))
	for i := range out {
		out[i] = uint8(i % engines)
	}
	return out, nil
}}

// BySession sends every request of a conversation (Sessions, MinShared)
// to one engine, the conversations placed round-robin in order of their
// first request: session affinity, as a sticky router does it.
var BySession = Routing{Name: "session", Phrase: "by conversation (session affinity)", Assign: func(reqs []trace.Request, engines int) ([]uint8, error) {
	s, _, err := Sessions(reqs, MinShared)
	if err != nil {
		return nil, err
	}
	out := make([]uint8, len(reqs))
	for i, c := range s {
		out[i] = uint8(int(c) % engines)
	}
	return out, nil
}}

// Routings are the two routings the benchmark compares.
var Routings = []Routing{RoundRobin, BySession}
