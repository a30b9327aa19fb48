package fuzz

import (
	"testing"
)

// withinL1Budget is the longest prefix of recs that the L1 decoder keeps
// on header h: at most l1MaxOps records, whose units plus keys sum to at
// most l1Budget and units times keys to at most l1ReserveBudget.
func withinL1Budget(h l1Header, recs []l1Record) []l1Record {
	cost, reserve := 0, 0
	for i, r := range recs {
		cost += h.units() + r.count()
		reserve += h.units() * r.count()
		if i == l1MaxOps || cost > l1Budget || reserve > l1ReserveBudget {
			return recs[:i]
		}
	}
	return recs
}

// TestL1DecodeBounded checks that an L1 input's cost is bounded where it
// is decoded: long inputs, many keys per record and the largest pool are
// cut to the budget, and no committed input is cut.
func TestL1DecodeBounded(t *testing.T) {
	fill := func(h l1Header, n int, count uint16) []l1Record {
		recs := make([]l1Record, n)
		for i := range recs {
			recs[i] = l1Record{Op: uint8(i), Stride: 1, Start: uint16(i), Count: count, Size: 64}
		}
		return recs
	}
	largest := l1Header{Units: 0xffff, KeySpace: 0xffff}
	smallest := l1Header{}
	for _, c := range []struct {
		name  string
		h     l1Header
		recs  []l1Record
		keeps int
	}{
		// A thousand records of 63 keys on the 8192-unit pool took seven
		// minutes under FuzzReserveWrite; the units alone allow one.
		{"largest pool, 63 keys", largest, fill(largest, 1000, 0x3f), 1},
		// 8192 units times 8191 keys is past the ReserveWrite budget.
		{"largest pool, most keys", largest, fill(largest, 10, 0xffff), 0},
		{"largest pool, 4095 keys", largest, fill(largest, 10, 0x8000|4095), 1},
		{"512 units, 63 keys", l1Header{Units: 511}, fill(l1Header{Units: 511}, 1000, 0x3f), l1Budget / (512 + 63)},
		{"one unit, no keys", smallest, fill(smallest, 1000, 0), l1MaxOps},
	} {
		h, recs := decodeL1(encodeL1(c.h, c.recs))
		if h != c.h || len(recs) != c.keeps {
			t.Errorf("%s: decoded %d of %d records, want %d", c.name, len(recs), len(c.recs), c.keeps)
		}
		cost, reserve := 0, 0
		for _, r := range recs {
			cost += h.units() + r.count()
			reserve += h.units() * r.count()
		}
		if cost > l1Budget || reserve > l1ReserveBudget {
			t.Errorf("%s: decoded records cost %d (budget %d), %d (budget %d)", c.name, cost, l1Budget, reserve, l1ReserveBudget)
		}
	}
	for _, target := range []string{"FuzzL1Lifecycle", "FuzzReserveWrite", "FuzzPrefixStrategies"} {
		for _, s := range corpus(t, target) {
			if len(s.data) < l1HeaderSize {
				continue
			}
			if _, recs := decodeL1(s.data); len(recs) != (len(s.data)-l1HeaderSize)/l1RecordSize {
				t.Errorf("%s/%s: decoded %d of its %d records: the budget cuts a committed input", target, s.name, len(recs), (len(s.data)-l1HeaderSize)/l1RecordSize)
			}
		}
	}
}

// TestAllocDecodeBounded checks the same of the allocator targets: at most
// maxOps records of each geometry, and every committed input whole.
func TestAllocDecodeBounded(t *testing.T) {
	long := encodeAllocOps(make([]allocRecord, 1000))
	for _, g := range []geometry{smallGeometry, largeGeometry} {
		if got := len(decodeAllocOpsIn(long, g)); got != g.maxOps || g.maxOps == 0 {
			t.Errorf("large %v: decoded %d of 1000 records, want %d", g.large, got, g.maxOps)
		}
	}
	if got := len(decodeAllocOps(long)); got != smallGeometry.maxOps {
		t.Errorf("decodeAllocOps: %d records, want %d", got, smallGeometry.maxOps)
	}
	for target, g := range map[string]geometry{"FuzzAllocator": smallGeometry, "FuzzAllocatorLarge": largeGeometry} {
		for _, s := range corpus(t, target) {
			if got, all := len(decodeAllocOpsIn(s.data, g)), len(s.data)/allocRecordSize; got != all {
				t.Errorf("%s/%s: decoded %d of its %d records: the cap cuts a committed input", target, s.name, got, all)
			}
		}
	}
}
