package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// The profile difference printed after a confirmed timing regression:
// the functions whose flat CPU time differs most between base and head.
// It is what go tool pprof -top -diff_base=base.pprof head.pprof would
// rank, with two things it cannot do: each line shows the base's and the
// head's flat time beside the difference, and the code under test comes
// first, the runtime after it, so that a regression in Free does not rank
// below runtime.memclrNoHeapPointers, whose share moves with when the
// heap grows and how often the GC runs.

// flatTimes returns each function's flat value in p for its default
// sample type (CPU profiles: "cpu"), the total, and the type and unit.
// Flat is charged to a sample's leaf frame, Location[0].Line[0], the
// innermost inlined function, as pprof does.
func flatTimes(p *profile.Profile) (flat map[string]int64, total int64, typ, unit string, err error) {
	idx, err := p.SampleIndexByName("")
	if err != nil {
		return nil, 0, "", "", err
	}
	if idx < 0 || idx >= len(p.SampleType) {
		return nil, 0, "", "", fmt.Errorf("profile has no sample types")
	}
	flat = make(map[string]int64)
	for _, s := range p.Sample {
		if idx >= len(s.Value) {
			continue
		}
		total += s.Value[idx]
		if len(s.Location) > 0 {
			flat[frameName(s.Location[0])] += s.Value[idx]
		}
	}
	return flat, total, p.SampleType[idx].Type, p.SampleType[idx].Unit, nil
}

// frameName names a location's innermost function, or its address when
// it has no symbol.
func frameName(loc *profile.Location) string {
	if len(loc.Line) > 0 {
		if fn := loc.Line[0].Function; fn != nil {
			if fn.Name != "" {
				return fn.Name
			}
			if fn.SystemName != "" {
				return fn.SystemName
			}
		}
	}
	return fmt.Sprintf("0x%x", loc.Address)
}

// writeProfileDiff prints the n functions of the code under test whose
// flat CPU time differs most between base and head, then at least three
// of the runtime's (more when the code has fewer than n).
func writeProfileDiff(w io.Writer, base, head *profile.Profile, benchtime string, n int) error {
	bm, bt, _, _, err := flatTimes(base)
	if err != nil {
		return err
	}
	hm, ht, typ, unit, err := flatTimes(head)
	if err != nil {
		return err
	}
	var code, rt []string
	for name := range union(bm, hm) {
		if hm[name] == bm[name] {
			continue
		}
		if isRuntime(name) {
			rt = append(rt, name)
		} else {
			code = append(code, name)
		}
	}
	for _, names := range [][]string{code, rt} {
		sort.Slice(names, func(i, j int) bool {
			a, b := abs(hm[names[i]]-bm[names[i]]), abs(hm[names[j]]-bm[names[j]])
			if a != b {
				return a > b
			}
			return names[i] < names[j]
		})
	}
	nRT := min(len(rt), max(3, n-len(code)))
	code, rt = code[:min(len(code), n)], rt[:nRT]
	fmt.Fprintf(w, "\nCPU profile, head - base, largest flat differences, the code under test first (%s, -test.benchtime=%s; base total %s, head total %s):\n",
		typ, benchtime, formatValue(bt, unit), formatValue(ht, unit))
	fmt.Fprintf(w, "%10s %10s %10s  %s\n", "delta", "base", "head", "function")
	line := func(name string) {
		d := formatValue(hm[name]-bm[name], unit)
		if hm[name] > bm[name] {
			d = "+" + d
		}
		fmt.Fprintf(w, "%10s %10s %10s  %s\n", d, formatValue(bm[name], unit), formatValue(hm[name], unit), shortName(name))
	}
	for _, name := range code {
		line(name)
	}
	if len(rt) > 0 {
		fmt.Fprintf(w, "runtime and standard library internals (allocation, GC, scheduling):\n")
		for _, name := range rt {
			line(name)
		}
	}
	return nil
}

func union(a, b map[string]int64) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// isRuntime reports whether name is a function of the Go runtime or of
// the standard library's internals (runtime., internal/, sync/atomic.,
// syscall.): code a benchmark reaches through allocation, GC and
// scheduling, which shifts with the heap and the machine rather than
// with the code under test.
func isRuntime(name string) bool {
	for _, p := range []string{"runtime.", "internal/", "sync/atomic.", "syscall.", "gcWriteBarrier", "memeqbody", "indexbytebody", "cmpbody"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// formatValue formats v in unit the way pprof labels do: nanoseconds as
// "1.50s" or "20ms", counts as plain integers, anything else as "v
// unit". Zero is "0" in any unit.
func formatValue(v int64, unit string) string {
	if v == 0 {
		return "0"
	}
	switch strings.ToLower(unit) {
	case "nanoseconds", "ns":
		sign := ""
		if v < 0 {
			sign = "-"
		}
		a := math.Abs(float64(v))
		steps, names := []float64{1, 1e3, 1e6, 1e9}, []string{"ns", "us", "ms", "s"}
		i := 0
		for i+1 < len(steps) && a >= steps[i+1] {
			i++
		}
		return sign + strings.TrimSuffix(strconv.FormatFloat(a/steps[i], 'f', 2, 64), ".00") + names[i]
	case "count", "":
		return strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10) + " " + unit
}

// modulePrefix is the import path prefix shortName drops.
const modulePrefix = "github.com/kvalloc/kvalloc/"

// shortName shortens a function name for a one-line table: it drops
// modulePrefix wherever it occurs and replaces the type arguments of a
// generic function or type, which pprof spells out in full (such as
// "[go.shape.struct { ChunkHash string; Model string; ... }]"), with
// "[…]". "github.com/kvalloc/kvalloc/l1.(*Manager[go.shape.string]).Delete"
// becomes "l1.(*Manager[…]).Delete".
func shortName(name string) string {
	name = strings.ReplaceAll(name, modulePrefix, "")
	if !strings.Contains(name, "[") {
		return name
	}
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[…]")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
