package scenario

import (
	"fmt"
	"strings"
)

// Prefix is the l1 prefix strategy a policy uses when a batch does not fit.
type Prefix uint8

// Prefix strategies, as l1.PrefixStrategy.
const (
	PrefixNone         Prefix = iota // all or nothing, LMCache before the fix
	PrefixBinarySearch               // the reference fix: probes over [1, want-1]
	PrefixOnePass                    // allocator.AllocateUpTo, no probes
)

// Placement is the allocator placement a policy uses for a batch.
type Placement uint8

// Placements, as allocator.Placement.
const (
	PlaceContiguous      Placement = iota // one run or nothing
	PlaceScattered                        // any free extents, smallest first
	PlaceContiguousFirst                  // one run when one extent holds it
)

// Eviction is how a policy makes room.
type Eviction uint8

// Evictions.
const (
	// EvictPeriodic is LMCache's reference controller: every sweep period of
	// simulated time, at usage ≥ watermark, evict ratio of the keys, least
	// recently used first. Reservations never evict.
	EvictPeriodic Eviction = iota
	// EvictOnDemand is l1's Config.EvictOnDemand: a reservation that does
	// not fit evicts least recently used objects inside the same call.
	EvictOnDemand
)

var (
	prefixNames    = [...]string{"none", "binarysearch", "onepass"}
	placementNames = [...]string{"contiguous", "scattered", "contiguous-first"}
	evictionNames  = [...]string{"periodic", "on-demand"}
)

// String returns "none", "binarysearch" or "onepass".
func (p Prefix) String() string { return enumName(prefixNames[:], int(p), "Prefix") }

// String returns "contiguous", "scattered" or "contiguous-first".
func (p Placement) String() string { return enumName(placementNames[:], int(p), "Placement") }

// String returns "periodic" or "on-demand".
func (e Eviction) String() string { return enumName(evictionNames[:], int(e), "Eviction") }

func enumName(names []string, i int, typ string) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

// Policy is one cell of the matrix: prefix × placement × eviction.
type Policy struct {
	Prefix    Prefix
	Placement Placement
	Eviction  Eviction
}

// String returns "PREFIX/PLACEMENT/EVICTION", such as
// "onepass/contiguous-first/on-demand"; ParsePolicy reads it back.
func (p Policy) String() string {
	return p.Prefix.String() + "/" + p.Placement.String() + "/" + p.Eviction.String()
}

// Policies returns the whole matrix, 3 × 3 × 2 = 18 policies, prefix
// outermost and eviction innermost, in the order of the constants.
func Policies() []Policy {
	var ps []Policy
	for pr := range len(prefixNames) {
		for pl := range len(placementNames) {
			for ev := range len(evictionNames) {
				ps = append(ps, Policy{Prefix(pr), Placement(pl), Eviction(ev)})
			}
		}
	}
	return ps
}

// ParsePolicy parses a policy name as Policy.String writes it.
func ParsePolicy(s string) (Policy, error) {
	parts := strings.Split(s, "/")
	if len(parts) == 3 {
		pr, ok1 := index(prefixNames[:], parts[0])
		pl, ok2 := index(placementNames[:], parts[1])
		ev, ok3 := index(evictionNames[:], parts[2])
		if ok1 && ok2 && ok3 {
			return Policy{Prefix(pr), Placement(pl), Eviction(ev)}, nil
		}
	}
	return Policy{}, fmt.Errorf("policy %q: want PREFIX/PLACEMENT/EVICTION with PREFIX one of %s, PLACEMENT one of %s, EVICTION one of %s",
		s, strings.Join(prefixNames[:], ", "), strings.Join(placementNames[:], ", "), strings.Join(evictionNames[:], ", "))
}

// MatchPolicies returns the policies of the matrix that pattern selects.
// A pattern is PREFIX/PLACEMENT/EVICTION where any part may be "*"; the
// empty pattern selects all.
func MatchPolicies(pattern string) ([]Policy, error) {
	if pattern == "" {
		return Policies(), nil
	}
	parts := strings.Split(pattern, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("policy pattern %q: want PREFIX/PLACEMENT/EVICTION, parts may be *", pattern)
	}
	var out []Policy
	for _, p := range Policies() {
		got := [3]string{p.Prefix.String(), p.Placement.String(), p.Eviction.String()}
		ok := true
		for i := range parts {
			ok = ok && (parts[i] == "*" || parts[i] == got[i])
		}
		if ok {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("policy pattern %q matches no policy", pattern)
	}
	return out, nil
}

func index(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}
