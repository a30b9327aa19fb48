package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// parseSize parses a byte size: a decimal number with an optional suffix B,
// KiB, MiB, GiB or TiB. A fractional number is allowed when the result is a
// whole number of bytes ("7.5MiB"). The result must be positive.
func parseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sim.SizeUnits {
		if strings.HasSuffix(s, u.Suffix) {
			num, mult = strings.TrimSuffix(s, u.Suffix), u.Mult
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: missing number", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n <= 0 || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q: out of range", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: not a positive number with an optional B, KiB, MiB, GiB or TiB suffix", s)
	}
	b := f * float64(mult)
	if b != math.Trunc(b) || b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: not a whole number of bytes", s)
	}
	return int64(b), nil
}

// parseDuration parses a Go duration ("1s", "250ms", "4h", "1h30m");
// negative durations are rejected.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %v", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q: negative", s)
	}
	return d, nil
}

// parsePositiveDuration is parseDuration that also rejects zero.
func parsePositiveDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err == nil && d == 0 {
		err = fmt.Errorf("duration %q: must be positive", s)
	}
	return d, err
}

// parseFraction parses a number in [0, 1], written as a decimal ("0.8") or
// a percentage ("80%").
func parseFraction(s string) (float64, error) {
	num, scale := s, 1.0
	if strings.HasSuffix(s, "%") {
		num, scale = strings.TrimSuffix(s, "%"), 100
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("fraction %q: not a number", s)
	}
	f /= scale
	if f < 0 || f > 1 {
		return 0, fmt.Errorf("fraction %q: outside [0, 1]", s)
	}
	return f, nil
}

// parseRate parses an event rate "N/UNIT", such as "2/s", "90/m" or
// "0.5/s", and returns events per second. UNIT is any Go duration unit
// (ns, us, ms, s, m, h), optionally with a count ("3/10s").
func parseRate(s string) (float64, error) {
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("rate %q: want N/UNIT, such as 2/s", s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("rate %q: %q is not a non-negative number", s, num)
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("rate %q: %q is not a positive duration", s, per)
	}
	return n / d.Seconds(), nil
}

// parseInt parses a decimal integer in [lo, hi].
func parseInt(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}
