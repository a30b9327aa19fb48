# kvalloc: see README.md. Every target runs from a fresh clone with Go 1.26;
# modules come from the Go proxy on first use.

GO       ?= go
PKGS     ?= ./...

.PHONY: test vet unit unit-invariants fuzz fuzz-smoke fuzz-replay print-fuzz-smoke

## test: go vet, the whole suite with the race detector, the suites of
## INVARIANTS_PKGS again under -tags invariants, then a short run of every
## fuzz target, in that order (also under make -j).
test:
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory unit-invariants
	@$(MAKE) --no-print-directory fuzz-smoke

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags invariants $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

# INVARIANTS_PKGS are the packages whose suites run a second time built
# with -tags invariants (internal/invariants), where every call that
# changes an allocator verifies it and panics at that call on a violation.
# Verify is O((L + F) log(L + F)) per call, so the list holds the suites
# that check the allocator itself, not every package that uses one.
INVARIANTS_PKGS ?= ./allocator/ ./hostmem/ ./internal/invariants/

## unit-invariants: the race suites of INVARIANTS_PKGS under -tags invariants.
unit-invariants:
	$(GO) test -race -count=1 -tags invariants $(INVARIANTS_PKGS)

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

.PHONY: bench bench-run bench-report bench-trace bench-ci bench-diff profile

## bench: the whole benchmark pipeline, its steps in this order (also
## under make -j): bench-run, bench-report, scenarios, bench-trace.
bench:
	@$(MAKE) --no-print-directory bench-run
	@$(MAKE) --no-print-directory bench-report
	@$(MAKE) --no-print-directory scenarios
	@$(MAKE) --no-print-directory bench-trace

## bench-run: the suite in BENCH_COUNT interleaved rounds of BENCH_TIME each
## into bench/out/bench.txt, the commit measured in bench/out/bench.commit
## (bench/run.sh).
bench-run:
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
## the GPU and a CUDA-host region, a segmented pool pinned with
## cudaHostRegister and pageable memory; print GiB/s, the ratios and time to
## first allocation ÷ time to pin the pool; check every round trip's bytes.
## At most 5 minutes. Without a GPU it exits 3, "no GPU: ..." (see
## bench/cmd/devicecheck).
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

## cflite-check: the build half of make libfuzzer: build.sh and the check of
## the seed zips' layout against the built harness; runs nothing.
cflite-check:
	bash .clusterfuzzlite/libfuzzer.sh -build-only
