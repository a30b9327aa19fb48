// Package sim is the replay core that bench/scenario and bench/trace
// share: what every replay of l1 over the allocator on simulated time
// needs, so that each replay holds only its own workload and metrics.
//
//   - Clock is simulated time; its Time method is l1's Config.Now, so lock
//     lifetimes run on it. Only the replay moves it, and only forward.
//   - Queue is the event heap: events by instant, then kind (the replay's
//     order of the events of one instant), then push order.
//   - Controller is LMCache's periodic eviction controller: every Every
//     of simulated time, at usage ≥ Watermark, evict Ratio of the objects
//     (Keys, LMCache's loop) or of the bytes (Bytes, its docstring's
//     reading). Tick is one tick; the replay schedules them.
//   - Policy is one l1 configuration, one row of a report, named by the
//     report; Config is its l1.Config and NewManager builds its manager.
//   - Grants tallies what the ReserveWrite calls granted, and the calls
//     that failed while the bytes were free; Gauge keeps the peak and mean
//     of a sampled figure, such as allocator.Stats.Fragmentation after
//     every operation.
//   - Table writes a report's table as aligned text or markdown;
//     WriteFigure and WriteFigureFile write gonum plots, one panel or
//     several stacked, as SVG or PNG; AddLine and Palette style a series.
//   - Parallel runs independent replays on several goroutines.
//
// # A new l1 knob
//
// A Policy field carries each knob a report varies, and Policy.Config (in
// policy.go) applies them all to the l1.Config, for NewManager or for a
// daemon's manager (bench/node): a new knob of l1 is a field of Policy and
// one line of Config, and every replay can use it.
// A report that wants rows for it lists them: bench/scenario's matrix
// (matrix.go) or bench/trace's table (policy.go). The prefix strategies
// are named through Prefix and its constants, so should the baselines
// (binary search, all-or-nothing) stop being l1 settings, Prefix and
// Config are all that change.
package sim
