package scenario

import (
	"strconv"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// Defaults of the header directives, LMCache's values where LMCache has
// one. The sweep directive defaults to sim.DefaultController.
const (
	DefaultAlign     = 4096               // align: LMCache's page alignment
	DefaultWriteTTL  = l1.DefaultWriteTTL // ttl write=
	DefaultReadTTL   = l1.DefaultReadTTL  // ttl read=
	DefaultHold      = 0                  // stream hold=
	DefaultWindow    = 1000               // stream window=
	DefaultPlotEvery = 10 * time.Second   // plot every=
)

// MaxLocks is the largest read-lock count one call may take or release,
// as in l1.
const MaxLocks = l1.MaxReadLocks

// Scenario is one parsed scenario file. FORMAT.md in testdata/scenarios
// defines the text it is parsed from.
type Scenario struct {
	Name    string   // scenario NAME, or the file name without extension
	File    string   // the path it was read from, "" for Parse
	Outcome []string // outcome lines: what the scenario demonstrates
	Seed    uint64   // seed N: the root of every random stream

	Align   int64    // align SIZE: block alignment in bytes
	Pool    int64    // pool SIZE: pool capacity in bytes, a multiple of Align
	Layouts []Layout // layout NAME SIZE, in declaration order

	Sweep    sim.Controller // sweep ...: the periodic controller, counting keys
	WriteTTL time.Duration  // ttl write=
	ReadTTL  time.Duration  // ttl read=

	Streams []Stream  // stream NAME k=v ...: traffic generators
	Groups  []Group   // key groups declared by store, restore and reserve-write
	Ops     []Op      // the timed operations, in order
	Plot    *PlotSpec // plot ...: nil when the scenario is not plotted
}

// Layout is one object size sharing the pool, one per model layout.
type Layout struct {
	Name string
	Size int64 // requested object size in bytes
}

// Reuse is the distribution over recency rank (0 = the newest earlier
// request of the stream) from which a read picks the request it re-reads.
type Reuse struct {
	Kind ReuseKind
	S    float64 // Zipf exponent, > 1, for ReuseZipf
}

// ReuseKind names a reuse distribution.
type ReuseKind uint8

// Reuse distributions.
const (
	ReuseUniform ReuseKind = iota // every rank in the window equally likely
	ReuseZipf                     // P(rank r) ∝ (1 + r)^-S
	ReuseRecent                   // always the newest earlier request
)

// Burst is a square wave on a stream's arrival rate: from At, every Every,
// the rate is multiplied by X for Len. A zero Every means no bursts.
type Burst struct {
	Every, Len, At time.Duration
	X              float64
}

// Stream is a seeded random traffic generator. Requests arrive as a
// Poisson process of Rate per second, times Burst.X inside bursts. Each
// request is, with probability Reads, a re-read of an earlier request of
// the stream picked by Reuse among the newest Window, and otherwise a store
// of a uniform random number of new chunks in [MinChunks, MaxChunks].
type Stream struct {
	Name                 string
	Line                 int
	Layout               int     // index into Scenario.Layouts
	Rate                 float64 // requests per second outside bursts
	MinChunks, MaxChunks int
	Reads                float64
	Reuse                Reuse
	Window               int
	Hold                 time.Duration // how long a read keeps its read lock
	Burst                Burst
}

// Group is a named set of keys: Requests requests of Chunks chunks each,
// all of one layout. Key (g, r, c) is chunk c of request r of group g.
type Group struct {
	Name     string
	Layout   int
	Chunks   int
	Requests int
}

// OpKind names an operation.
type OpKind uint8

// Operations. The workload steps (store, restore, read, advance, traffic)
// combine calls; the others are one l1 call per request of the selection.
const (
	OpAdvance                OpKind = iota // advance D
	OpStore                                // store NAME LAYOUT N [xR] [temp]
	OpRestore                              // restore NAME LAYOUT N [xR] [temp] [locks=L]
	OpRead                                 // read SEL [locks=L]
	OpReserveWrite                         // reserve-write NAME LAYOUT N [xR] [temp] [mode=M]
	OpFinishWrite                          // finish-write SEL
	OpAbortWrite                           // abort-write SEL
	OpReserveRead                          // reserve-read SEL [locks=L]
	OpFinishRead                           // finish-read SEL [locks=L]
	OpFinishWriteReserveRead               // finish-write-reserve-read SEL [locks=L]
	OpDelete                               // delete SEL [force]
	OpTouch                                // touch SEL
	OpClear                                // clear [force]
	OpEvictTo                              // evict-to F
	OpTraffic                              // traffic D STREAM...
)

var opNames = [...]string{
	OpAdvance:                "advance",
	OpStore:                  "store",
	OpRestore:                "restore",
	OpRead:                   "read",
	OpReserveWrite:           "reserve-write",
	OpFinishWrite:            "finish-write",
	OpAbortWrite:             "abort-write",
	OpReserveRead:            "reserve-read",
	OpFinishRead:             "finish-read",
	OpFinishWriteReserveRead: "finish-write-reserve-read",
	OpDelete:                 "delete",
	OpTouch:                  "touch",
	OpClear:                  "clear",
	OpEvictTo:                "evict-to",
	OpTraffic:                "traffic",
}

// String returns the operation's keyword.
func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// Selector picks keys of a group: chunks [From, To) of request Request, or
// of every request when Request is -1.
type Selector struct {
	Group    int
	Request  int
	From, To int
}

// Op is one operation. Which fields matter depends on Kind; see FORMAT.md.
type Op struct {
	Kind     OpKind
	Line     int
	Group    int      // store, restore, reserve-write: the group written
	Temp     bool     // store, restore, reserve-write: temporary objects
	Mode     l1.Mode  // reserve-write: mode=all, new or update
	Sel      Selector // the ops that take SEL
	Locks    int      // read locks taken or released, 1..MaxLocks
	Force    bool     // delete, clear
	Duration time.Duration
	Streams  []int   // traffic: indexes into Scenario.Streams
	Ratio    float64 // evict-to
}

// PlotSpec asks for a plot of usage, failures and evictions over simulated
// time, sampled every Every, with one line per policy in Policies (policy
// names as Policy.String writes them).
type PlotSpec struct {
	Every    time.Duration
	Policies []string
}

// AlignedSize returns layout i's object size rounded up to the alignment:
// the bytes one object really takes.
func (sc *Scenario) AlignedSize(i int) int64 {
	s := sc.Layouts[i].Size
	return (s + sc.Align - 1) / sc.Align * sc.Align
}

// Slots returns how many objects of layout i the empty pool holds.
func (sc *Scenario) Slots(i int) int64 { return sc.Pool / sc.AlignedSize(i) }

// Duration returns the simulated time the scenario covers: its advances
// and traffic, each traffic cut to maxTraffic when that is positive.
func (sc *Scenario) Duration(maxTraffic time.Duration) time.Duration {
	var d time.Duration
	for _, op := range sc.Ops {
		switch op.Kind {
		case OpAdvance:
			d += op.Duration
		case OpTraffic:
			d += trafficLen(op.Duration, maxTraffic)
		}
	}
	return d
}

func trafficLen(d, maxTraffic time.Duration) time.Duration {
	if maxTraffic > 0 && d > maxTraffic {
		return maxTraffic
	}
	return d
}
