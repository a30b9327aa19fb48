package bench

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the CPU time the whole process spends (every thread:
// the caller, a daemon's connection goroutines, the garbage collector),
// from start to report. On a loaded machine wall time per op swings with
// the scheduler; CPU time per op barely does, so a ratio of two cpu-ns
// metrics says what a change saved when ns/op cannot (see
// server/DESIGN.md, "Numbers").
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

// report adds the CPU time per unit as the metric "cpu-"+unit, perOp units
// an op: call it after the loop.
func (c cpuClock) report(b *testing.B, perOp int, unit string) {
	if b.N == 0 || perOp == 0 || c.start == 0 {
		return
	}
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N)/float64(perOp), "cpu-"+unit)
}
