//go:build linux

package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// Bandwidth is L2's measured (or stated) throughput for values of one
// size.
type Bandwidth struct {
	ValueBytes int64
	// Get and Set are bytes per second of values moved by GET and SET.
	Get, Set float64
	// GetLatency is the mean latency of one GET (one batch, for
	// MeasureTier) as measured.
	GetLatency time.Duration
	// Source says what measured it.
	Source string
}

// KVModel is a model's KV bytes per token, for the break-even table.
type KVModel struct {
	Name       string
	TokenBytes int64
}

// KVModels are the models of the break-even table: the trace's (Kimi K2,
// MLA: 61 layers × (512 + 64) × 2 bytes; bench/node's constants), and a
// GQA model with more KV per token (Llama-3.1-8B: 32 layers × 8 KV heads
// × 128 × (K and V) × 2 bytes = 131,072 bytes).
var KVModels = []KVModel{
	{"Kimi K2 (MLA)", node.TokenBytes},
	{"Llama-3.1-8B (GQA)", 32 * 8 * 128 * 2 * 2},
}

// BreakEven is the bandwidth at which loading a block from L2 takes as
// long as prefilling its tokens: tokenBytes × prefillRate bytes per
// second, whatever the block's tokens (a block of k tokens is k ×
// tokenBytes bytes and k ÷ prefillRate seconds of prefill).
func BreakEven(tokenBytes int64, prefillRate float64) float64 {
	return float64(tokenBytes) * prefillRate
}

// BreakEvenTable puts, for each model and each measured value size, the
// time to load one block of blockTokens tokens from L2 (its KV split into
// values of that size, at the measured GET bandwidth) beside the replay
// timing model's prefill time for the same tokens (blockTokens ÷
// prefillRate; bench/trace's request model holds a request for its
// missed tokens ÷ the rate), and whether the load pays.
func BreakEvenTable(bws []Bandwidth, models []KVModel, blockTokens int64, prefillRate float64) *sim.Table {
	if prefillRate <= 0 {
		prefillRate = trace.DefaultPrefillRate
	}
	if blockTokens <= 0 {
		blockTokens = trace.DefaultBlockTokens
	}
	prefill := time.Duration(float64(blockTokens) / prefillRate * float64(time.Second))
	t := &sim.Table{Columns: []string{"model", "KV / block", "break-even", "measured by", "value size", "GET GB/s", "load / block", "prefill / block", "load ÷ prefill", "L2 hit pays"}}
	for _, m := range models {
		blk := m.TokenBytes * blockTokens
		for _, b := range bws {
			if b.Get <= 0 {
				continue
			}
			load := time.Duration(float64(blk) / b.Get * float64(time.Second))
			pays := "yes"
			if load >= prefill {
				pays = "no"
			}
			src := b.Source
			if src == "" {
				src = "stated"
			}
			t.Rows = append(t.Rows, []string{m.Name, bytesStr(float64(blk)), gbps(BreakEven(m.TokenBytes, prefillRate)), src,
				sim.FormatSize(b.ValueBytes), gbps(b.Get), ms(load), ms(prefill),
				strconv.FormatFloat(float64(load)/float64(prefill), 'f', 2, 64) + "×", pays})
		}
	}
	return t
}

func gbps(b float64) string { return strconv.FormatFloat(b/1e9, 'f', 2, 64) + " GB/s" }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

// StatedBandwidths are the numbers the project's notes give for one local
// redis-server 7.0 on the loaded 2-core development machine
// (redis-benchmark): 8 MiB values at 0.48 GB/s GET and 0.25 GB/s SET,
// 64 KiB values at 2.5 and 1.9 GB/s. Used when nothing is measured.
var StatedBandwidths = []Bandwidth{
	{ValueBytes: 64 << 10, Get: 2.5e9, Set: 1.9e9},
	{ValueBytes: 8 << 20, Get: 0.48e9, Set: 0.25e9},
}

// String describes b.
func (b Bandwidth) String() string {
	src := b.Source
	if src == "" {
		src = "stated"
	}
	return fmt.Sprintf("%s, %s: GET %s, SET %s", src, sim.FormatSize(b.ValueBytes), gbps(b.Get), gbps(b.Set))
}

// PaysTable is the L2 hits a daemon counts under its rate rule: a lookup
// counts an L2 hit only while the daemon's measured load rate is at or
// above -l2-min-rate, set to the model's break-even (BreakEven at
// prefillRate), so a tier slower than that counts none of the hits it
// holds. For each trace and cell, the write-through replay's L2 hits
// (kvallocd's one write policy; the blocks read from L2, and their share
// of the blocks asked for), then for each bandwidth measured at
// valueBytes by MeasureTier (one per L2 format) or stated, its GET rate and, per model, the L2
// hits it counts: all of them or none.
func PaysTable(reps []*Report, bws []Bandwidth, models []KVModel, valueBytes int64, prefillRate float64) *sim.Table {
	if prefillRate <= 0 {
		prefillRate = trace.DefaultPrefillRate
	}
	t := &sim.Table{Columns: []string{"trace", "nodes", "routing", "Q", "L2 hits (blocks)", "of blocks asked", "L2 format", "GET GB/s at " + sim.FormatSize(valueBytes)}}
	for _, m := range models {
		t.Columns = append(t.Columns, m.Name+" ("+gbps(BreakEven(m.TokenBytes, prefillRate))+"): L2 hits counted")
	}
	for _, r := range reps {
		wt := -1
		for i, w := range r.Plan.Writes {
			if w == WriteThrough {
				wt = i
			}
		}
		if wt < 0 {
			continue
		}
		for _, c := range r.Cells {
			x := c.Tiered[wt]
			for _, b := range bws {
				// The daemon's own path (MeasureTier) or a stated figure;
				// redis-benchmark's is no daemon's load rate.
				tier := b.Source == "" || strings.HasPrefix(b.Source, "l2.Tier")
				if b.ValueBytes != valueBytes || b.Get <= 0 || !tier {
					continue
				}
				src := b.Source
				if src == "" {
					src = "stated"
				}
				row := []string{r.Trace.Name, strconv.Itoa(c.Nodes), c.Routing.Name, qName(c),
					strconv.FormatInt(x.L2Hits, 10), sim.Percent(ratio(x.L2Hits, x.Refs), 1), src, gbps(b.Get)}
				for _, m := range models {
					n := int64(0)
					if b.Get >= BreakEven(m.TokenBytes, prefillRate) {
						n = x.L2Hits
					}
					row = append(row, strconv.FormatInt(n, 10))
				}
				t.Rows = append(t.Rows, row)
			}
		}
	}
	return t
}
