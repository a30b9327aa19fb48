// Package proftop ranks the functions of a pprof profile.
//
// It answers one question, "where did the time (or the bytes) go", at
// the granularity of functions, the way "pprof -top" does:
//
//   - flat is the value of the samples whose leaf frame is in the
//     function. The leaf is Sample.Location[0].Line[0]: a location with
//     several lines describes inlined calls, and the last line is the
//     caller the earlier ones were inlined into.
//   - cum is the value of the samples with the function anywhere on the
//     stack, inlined frames included, counted once per sample even when
//     the function recurses.
//
// Functions are identified by name. Frames without symbols are named by
// their address. A difference of two profiles is computed the pprof way:
// scale the base by -1, Merge, and rank the result.
package proftop

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// Func is the flat and cumulative value of one function.
type Func struct {
	Name      string
	Flat, Cum int64
}

// A Table holds every function of a profile for one sample type.
type Table struct {
	// Type and Unit describe the chosen sample value, such as "cpu"
	// and "nanoseconds".
	Type, Unit string

	// Total is the sum of the chosen value over all samples.
	Total int64

	// Funcs is in no particular order; see ByFlat, ByCum and
	// ByAbsFlat.
	Funcs []Func
}

// Functions aggregates p by function for the sample type named by
// sampleIndex ("cpu", "alloc_space", a number, ...; "" selects
// p.DefaultSampleType or else the last type).
func Functions(p *profile.Profile, sampleIndex string) (*Table, error) {
	idx, err := p.SampleIndexByName(sampleIndex)
	if err != nil {
		return nil, err
	}
	if idx < 0 || idx >= len(p.SampleType) {
		return nil, fmt.Errorf("profile has no sample types")
	}
	t := &Table{Type: p.SampleType[idx].Type, Unit: p.SampleType[idx].Unit}
	pos := make(map[string]int)
	add := func(name string) *Func {
		i, ok := pos[name]
		if !ok {
			i = len(t.Funcs)
			pos[name] = i
			t.Funcs = append(t.Funcs, Func{Name: name})
		}
		return &t.Funcs[i]
	}
	seen := make(map[string]bool)
	for _, s := range p.Sample {
		if idx >= len(s.Value) {
			continue
		}
		v := s.Value[idx]
		t.Total += v
		if len(s.Location) == 0 {
			continue
		}
		add(frameName(s.Location[0], 0)).Flat += v
		clear(seen)
		for _, loc := range s.Location {
			n := max(len(loc.Line), 1)
			for i := range n {
				name := frameName(loc, i)
				if !seen[name] {
					seen[name] = true
					add(name).Cum += v
				}
			}
		}
	}
	return t, nil
}

// frameName names line i of loc, the innermost being 0.
func frameName(loc *profile.Location, i int) string {
	if i < len(loc.Line) {
		if fn := loc.Line[i].Function; fn != nil {
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

// Diff returns cur minus base per function: the base is copied, scaled
// by -1 and merged with cur, so both must have the same sample types
// (two CPU profiles, two heap profiles).
func Diff(base, cur *profile.Profile, sampleIndex string) (*Table, error) {
	neg := base.Copy()
	neg.Scale(-1)
	merged, err := profile.Merge([]*profile.Profile{neg, cur})
	if err != nil {
		return nil, fmt.Errorf("merging profiles: %w", err)
	}
	return Functions(merged, sampleIndex)
}

// Map returns the functions by name.
func (t *Table) Map() map[string]Func {
	m := make(map[string]Func, len(t.Funcs))
	for _, f := range t.Funcs {
		m[f.Name] = f
	}
	return m
}

// ByFlat returns the functions sorted by decreasing flat, then cum,
// then name.
func (t *Table) ByFlat() []Func {
	return t.sorted(func(a, b Func) bool {
		if a.Flat != b.Flat {
			return a.Flat > b.Flat
		}
		if a.Cum != b.Cum {
			return a.Cum > b.Cum
		}
		return a.Name < b.Name
	})
}

// ByCum returns the functions sorted by decreasing cum, then flat,
// then name.
func (t *Table) ByCum() []Func {
	return t.sorted(func(a, b Func) bool {
		if a.Cum != b.Cum {
			return a.Cum > b.Cum
		}
		if a.Flat != b.Flat {
			return a.Flat > b.Flat
		}
		return a.Name < b.Name
	})
}

// ByAbsFlat returns the functions with a non-zero flat value sorted by
// decreasing |flat|, then name; it ranks a Diff.
func (t *Table) ByAbsFlat() []Func {
	var fs []Func
	for _, f := range t.Funcs {
		if f.Flat != 0 {
			fs = append(fs, f)
		}
	}
	sort.Slice(fs, func(i, j int) bool {
		a, b := abs(fs[i].Flat), abs(fs[j].Flat)
		if a != b {
			return a > b
		}
		return fs[i].Name < fs[j].Name
	})
	return fs
}

func (t *Table) sorted(less func(a, b Func) bool) []Func {
	fs := append([]Func(nil), t.Funcs...)
	sort.Slice(fs, func(i, j int) bool { return less(fs[i], fs[j]) })
	return fs
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// WriteTop prints the first n of fs with the columns of pprof -top:
// flat, flat%, sum%, cum, cum% and the function name (ShortName), one
// function a line, right-aligned. Percentages are of t.Total; sum% accumulates flat% down the list.
func (t *Table) WriteTop(w io.Writer, fs []Func, n int) error {
	if n < len(fs) {
		fs = fs[:n]
	}
	if _, err := fmt.Fprintf(w, "%10s %7s %7s %10s %7s\n", "flat", "flat%", "sum%", "cum", "cum%"); err != nil {
		return err
	}
	var sum int64
	for _, f := range fs {
		sum += f.Flat
		if _, err := fmt.Fprintf(w, "%10s %7s %7s %10s %7s  %s\n",
			FormatValue(f.Flat, t.Unit), t.percent(f.Flat), t.percent(sum),
			FormatValue(f.Cum, t.Unit), t.percent(f.Cum), ShortName(f.Name)); err != nil {
			return err
		}
	}
	return nil
}

func (t *Table) percent(v int64) string {
	if t.Total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(v)/float64(t.Total))
}

// FormatValue formats v in unit the way pprof labels do: nanoseconds
// as "1.50s" or "20ms", bytes as "1.50MB" (powers of 1024), counts as
// plain integers, anything else as "v unit". Zero is "0" in any unit.
func FormatValue(v int64, unit string) string {
	if v == 0 {
		return "0"
	}
	sign := ""
	if v < 0 {
		sign = "-"
	}
	a := math.Abs(float64(v))
	scaled := func(steps []float64, names []string) string {
		i := 0
		for i+1 < len(steps) && a >= steps[i+1] {
			i++
		}
		return sign + trimFloat(a/steps[i]) + names[i]
	}
	switch strings.ToLower(unit) {
	case "nanoseconds", "ns":
		return scaled([]float64{1, 1e3, 1e6, 1e9}, []string{"ns", "us", "ms", "s"})
	case "microseconds", "us":
		return scaled([]float64{1, 1e3, 1e6}, []string{"us", "ms", "s"})
	case "milliseconds", "ms":
		return scaled([]float64{1, 1e3}, []string{"ms", "s"})
	case "seconds", "s":
		return sign + trimFloat(a) + "s"
	case "bytes", "b":
		return scaled([]float64{1, 1 << 10, 1 << 20, 1 << 30, 1 << 40}, []string{"B", "kB", "MB", "GB", "TB"})
	case "count", "":
		return strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10) + " " + unit
}

// trimFloat prints two decimals and drops ".00" so that whole numbers
// stay short ("20ms", "1.50s").
func trimFloat(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 2, 64), ".00")
}

// ModulePrefix is the import path prefix ShortName drops.
const ModulePrefix = "github.com/kvalloc/kvalloc/"

// ShortName shortens a function name for a one-line table: it drops
// ModulePrefix wherever it occurs and replaces the type arguments of a
// generic function or type, which pprof spells out in full (such as
// "[go.shape.struct { ChunkHash string; Model string; ... }]"), with
// "[…]". "github.com/kvalloc/kvalloc/l1.(*Manager[go.shape.string]).Delete"
// becomes "l1.(*Manager[…]).Delete".
func ShortName(name string) string {
	name = strings.ReplaceAll(name, ModulePrefix, "")
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

// Focus returns a copy of p with only the samples that have a frame
// (inlined ones included) whose function name matches re, as pprof
// -focus does. It keeps a profile of a benchmark to the code the
// benchmark measures and drops its setup.
func Focus(p *profile.Profile, re *regexp.Regexp) *profile.Profile {
	q := p.Copy()
	kept := q.Sample[:0]
	for _, s := range q.Sample {
		if sampleMatches(s, re) {
			kept = append(kept, s)
		}
	}
	q.Sample = kept
	return q
}

func sampleMatches(s *profile.Sample, re *regexp.Regexp) bool {
	for _, loc := range s.Location {
		for i := range max(len(loc.Line), 1) {
			if re.MatchString(frameName(loc, i)) {
				return true
			}
		}
	}
	return false
}

// IsRuntime reports whether name is a function of the Go runtime or of
// the standard library's internals (runtime., internal/, sync/atomic.,
// syscall.): code a benchmark reaches through allocation, GC and
// scheduling, which shifts with the heap and the machine rather than
// with the code under test.
func IsRuntime(name string) bool {
	for _, p := range []string{"runtime.", "internal/", "sync/atomic.", "syscall.", "gcWriteBarrier", "memeqbody", "indexbytebody", "cmpbody"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ByAbsFlatCodeFirst is ByAbsFlat with the functions IsRuntime reports
// moved after all others, each group still by decreasing |flat|. It
// ranks a difference of two profiles: a regression in the code under
// test comes before the runtime noise around it (a different number of
// garbage collections, a heap grown at another moment), which can be
// larger in absolute terms.
func (t *Table) ByAbsFlatCodeFirst() []Func {
	fs := t.ByAbsFlat()
	sort.SliceStable(fs, func(i, j int) bool { return !IsRuntime(fs[i].Name) && IsRuntime(fs[j].Name) })
	return fs
}
