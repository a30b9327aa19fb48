// Command nodebench measures what one kvallocd pool per node gains over a
// pool per engine process, on a serving trace in the Mooncake JSONL
// format: TP dedup of an MLA model's KV across 8 ranks, and DP sharing
// between 8 engines routed round-robin or by conversation, each replayed
// through real daemons over their sockets with 8 Go clients driven in a
// fixed order (package github.com/kvalloc/kvalloc/bench/node). It prints
// the TP and DP tables, what the socket costs per block reference, and the
// configuration it recommends to a serving engine; it fails when a shared
// pool's hits differ from bench/trace's in-process single engine of the
// same pool.
//
// Usage:
//
//	nodebench [flags] FILE
//
// Flags:
//
//	-pool LIST          node pool sizes P, fractions of the trace's distinct blocks in
//	                    (0, 1], comma-separated (default 0.1,0.25,0.5)
//	-policies LIST      bench/trace policy names for the DP rows, comma-separated, on-demand
//	                    ones only; TP runs under the first (default
//	                    on-demand/scattered/prefix+partial,on-demand/scattered,on-demand/scattered/s3fifo)
//	-tp, -dp            run TP's and DP's configurations (default both true)
//	-prefill-rate R     modelled prefill, tokens per second (default 10000)
//	-max-requests N     replay only the first N requests (default 0: all)
//	-out DIR            where node-NAME.md and, with two or more pools,
//	                    node-NAME-hitrate.{svg,png} go, NAME being the file's base name;
//	                    "" writes none (default "")
//	-j N                concurrent replays (default GOMAXPROCS)
//
// Linux only (the daemon's pool is a memfd). Example, as make node-bench
// runs it:
//
//	go run ./bench/cmd/nodebench -out bench/out testdata/traces/mooncake-conversation.jsonl.gz
package main
