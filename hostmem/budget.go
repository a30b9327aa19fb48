package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Budget says how large a pool fits on this machine now and which limit
// binds. ReadBudget fills it from the files the kernel exposes (for tests,
// from any root directory that mimics them):
//
//   - MemAvailable from /proc/meminfo: what the kernel can give without
//     swapping;
//   - the memory cgroup's limit minus its usage: memory.max and
//     memory.current (cgroup v2, every level from the process's cgroup up
//     to the root), or memory.limit_in_bytes and memory.usage_in_bytes (v1);
//   - RLIMIT_MEMLOCK minus VmLck, for mlock-pinned pools (PinLock), unless
//     the process has CAP_IPC_LOCK, which exempts it;
//   - CommitLimit minus Committed_AS, when vm.overcommit_memory is 2
//     (strict accounting ignores MAP_NORESERVE, so the reservation itself
//     counts).
//
// A limit that cannot be read is left out and named in Notes.
type Budget struct {
	// Pin is the pinning the budget was read for.
	Pin PinMode
	// Limits are the limits that apply, in the order above.
	Limits []BudgetLimit
	// Fits is the largest pool, in bytes, that fits under every limit now:
	// the smallest Headroom. It is -1 when no limit could be read.
	Fits int64
	// Binding names the limit that sets Fits ("" when Fits is -1).
	Binding string
	// Locked is the memory this process has locked (VmLck), in bytes.
	Locked int64
	// OvercommitMode is vm.overcommit_memory (0 heuristic, 1 always, 2
	// strict), or -1 when unreadable.
	OvercommitMode int
	// Notes says which limits were not read, or do not apply, and why.
	Notes []string
}

// BudgetLimit is one limit a pool counts against.
type BudgetLimit struct {
	// Name is "MemAvailable", "cgroup memory.max" (v2), "cgroup
	// memory.limit_in_bytes" (v1), "RLIMIT_MEMLOCK" or "CommitLimit".
	Name string
	// Source is the file or call the figures come from.
	Source string
	// Limit is the limit in bytes (MemTotal for MemAvailable); Used the
	// bytes already counted against it.
	Limit, Used int64
	// Headroom is what a new pool may still take, never negative.
	Headroom int64
}

// Budget limit names.
const (
	LimitMemAvailable = "MemAvailable"
	LimitCgroupV2     = "cgroup memory.max"
	LimitCgroupV1     = "cgroup memory.limit_in_bytes"
	LimitMemlock      = "RLIMIT_MEMLOCK"
	LimitCommit       = "CommitLimit"
)

// ReadBudget reads the limits that bound a pool pinned as pin, on this
// machine, now.
func ReadBudget(pin PinMode) Budget {
	return readBudget("/", pin, budgetMemlock)
}

// budgetUnlimited is RLIM_INFINITY as budgetMemlock reports it.
const budgetUnlimited = math.MaxUint64

// readBudget reads the limits under root; memlock returns RLIMIT_MEMLOCK's
// soft and hard values (budgetUnlimited for no limit).
func readBudget(root string, pin PinMode, memlock func() (cur, max uint64, err error)) Budget {
	b := Budget{Pin: pin, Fits: -1, OvercommitMode: -1}
	path := func(p string) string { return filepath.Join(root, p) }
	if pin < PinNone || pin > PinCUDA {
		b.note("unknown pin mode %v: read as an unpinned pool (PinNone), RLIMIT_MEMLOCK not read", pin)
	}

	meminfo, err := readKeyValues(path("proc/meminfo"))
	if err != nil {
		b.note("MemAvailable unread: %v", err)
	} else if avail, ok := meminfo["MemAvailable"]; !ok {
		b.note("MemAvailable unread: no MemAvailable in %s", path("proc/meminfo"))
	} else {
		total := meminfo["MemTotal"]
		b.add(BudgetLimit{Name: LimitMemAvailable, Source: "/proc/meminfo", Limit: total, Used: total - avail, Headroom: avail})
	}

	b.readCgroup(root)

	status, statusErr := readKeyValues(path("proc/self/status"))
	if statusErr == nil {
		b.Locked = status["VmLck"]
	}
	if pin == PinLock {
		b.readMemlock(status, statusErr, memlock)
	}

	if mode, err := readInt(path("proc/sys/vm/overcommit_memory")); err != nil {
		b.note("vm.overcommit_memory unread: %v", err)
	} else {
		b.OvercommitMode = int(mode)
		if mode == 2 && meminfo != nil {
			limit, used := meminfo["CommitLimit"], meminfo["Committed_AS"]
			b.add(BudgetLimit{Name: LimitCommit, Source: "/proc/meminfo (vm.overcommit_memory=2)", Limit: limit, Used: used, Headroom: max(0, limit-used)})
		}
	}
	return b
}

func (b *Budget) note(format string, args ...any) {
	b.Notes = append(b.Notes, fmt.Sprintf(format, args...))
}

func (b *Budget) add(l BudgetLimit) {
	l.Headroom = max(0, l.Headroom)
	b.Limits = append(b.Limits, l)
	if b.Fits < 0 || l.Headroom < b.Fits {
		b.Fits, b.Binding = l.Headroom, l.Name
	}
}

// readCgroup finds the process's memory cgroup from /proc/self/cgroup and
// adds the tightest limit on the way from it to the root of the hierarchy.
func (b *Budget) readCgroup(root string) {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		b.note("cgroup unread: %v", err)
		return
	}
	var v1, v2 string
	haveV1, haveV2 := false, false
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, haveV2 = parts[2], true
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "memory" {
				v1, haveV1 = parts[2], true
			}
		}
	}
	switch {
	case haveV1:
		b.walkCgroup(root, "sys/fs/cgroup/memory", v1, LimitCgroupV1, "memory.limit_in_bytes", "memory.usage_in_bytes")
	case haveV2:
		b.walkCgroup(root, "sys/fs/cgroup", v2, LimitCgroupV2, "memory.max", "memory.current")
	default:
		b.note("cgroup: no memory controller in /proc/self/cgroup")
	}
}

// walkCgroup reads limitFile and usageFile in the cgroup directory
// root/mount/rel and each ancestor up to root/mount, and adds the level
// with the least headroom. A cgroup path that is not under the mount (the
// process sees the host's path from inside a cgroup namespace) is read at
// the mount itself.
func (b *Budget) walkCgroup(root, mount, rel, name, limitFile, usageFile string) {
	top := filepath.Join(root, mount)
	dir := filepath.Join(top, rel)
	if _, err := os.Stat(dir); err != nil {
		dir = top
	}
	found := false
	var best BudgetLimit
	for {
		limit, err := readLimit(filepath.Join(dir, limitFile))
		if err == nil && limit >= 0 {
			used, _ := readInt(filepath.Join(dir, usageFile))
			src := filepath.Join("/", mount, strings.TrimPrefix(dir, top), limitFile)
			l := BudgetLimit{Name: name, Source: src, Limit: limit, Used: used, Headroom: limit - used}
			if !found || l.Headroom < best.Headroom {
				best, found = l, true
			}
		}
		if len(dir) <= len(top) {
			break
		}
		dir = filepath.Dir(dir)
	}
	if !found {
		b.note("%s: no limit set", name)
		return
	}
	b.add(best)
}

// readMemlock adds RLIMIT_MEMLOCK when it binds an mlock-pinned pool.
func (b *Budget) readMemlock(status map[string]int64, statusErr error, memlock func() (uint64, uint64, error)) {
	if statusErr == nil {
		if capEff, ok := status["CapEff"]; ok && capEff&(1<<14) != 0 { // CAP_IPC_LOCK
			b.note("RLIMIT_MEMLOCK does not apply: the process has CAP_IPC_LOCK")
			return
		}
	}
	cur, hard, err := memlock()
	switch {
	case err != nil:
		b.note("RLIMIT_MEMLOCK unread: %v", err)
	case cur == budgetUnlimited:
		b.note("RLIMIT_MEMLOCK is unlimited")
	default:
		lim := int64(min(cur, math.MaxInt64))
		src := "getrlimit (hard=unlimited)"
		if hard != budgetUnlimited {
			src = fmt.Sprintf("getrlimit (hard=%d)", hard)
		}
		b.add(BudgetLimit{Name: LimitMemlock, Source: src, Limit: lim, Used: b.Locked, Headroom: lim - b.Locked})
	}
}

// Check returns nil when a pool of size bytes fits, else an error wrapping
// ErrOutOfMemory that names the binding limit and its figures. A size of 0
// or less is an error wrapping ErrInvalidArgument.
func (b Budget) Check(size int64) error {
	if size <= 0 {
		return fmt.Errorf("%w: a pool of %d bytes: the size must be positive", ErrInvalidArgument, size)
	}
	if b.Fits < 0 || size <= b.Fits {
		return nil
	}
	for _, l := range b.Limits {
		if l.Name == b.Binding {
			return fmt.Errorf("%w: a pool of %s does not fit: %s binds (%s)", ErrOutOfMemory, regionSizeString(size), l.Name, l)
		}
	}
	return fmt.Errorf("%w: a pool of %s does not fit in %s", ErrOutOfMemory, regionSizeString(size), regionSizeString(b.Fits))
}

// String formats the limit: "limit 8 GiB, used 7 GiB, headroom 1 GiB, from
// /sys/fs/cgroup/memory.max".
func (l BudgetLimit) String() string {
	return fmt.Sprintf("limit %s, used %s, headroom %s, from %s",
		regionOffsetString(l.Limit), regionOffsetString(l.Used), regionOffsetString(l.Headroom), l.Source)
}

// LimitsText formats every limit in one line, for error messages.
func (b Budget) LimitsText() string {
	var parts []string
	for _, l := range b.Limits {
		parts = append(parts, fmt.Sprintf("%s: %s", l.Name, l))
	}
	parts = append(parts, b.OvercommitText())
	return strings.Join(parts, "; ")
}

// OvercommitText names the overcommit policy.
func (b Budget) OvercommitText() string {
	switch b.OvercommitMode {
	case 0:
		return "vm.overcommit_memory=0 (heuristic)"
	case 1:
		return "vm.overcommit_memory=1 (always)"
	case 2:
		for _, l := range b.Limits {
			if l.Name == LimitCommit {
				return fmt.Sprintf("vm.overcommit_memory=2 (strict: MAP_NORESERVE is ignored; CommitLimit %s, Committed_AS %s)",
					regionOffsetString(l.Limit), regionOffsetString(l.Used))
			}
		}
		return "vm.overcommit_memory=2 (strict: MAP_NORESERVE is ignored)"
	}
	return "vm.overcommit_memory unknown"
}

// String reports the budget: what fits, which limit binds, every limit and
// the notes.
func (b Budget) String() string {
	var s strings.Builder
	if b.Fits < 0 {
		fmt.Fprintf(&s, "no memory limit could be read for a pool pinned by %v", b.Pin)
	} else {
		fmt.Fprintf(&s, "a pool pinned by %v fits in %s; %s binds", b.Pin, regionOffsetString(b.Fits), b.Binding)
	}
	for _, l := range b.Limits {
		fmt.Fprintf(&s, "\n  %s: %s", l.Name, l)
	}
	fmt.Fprintf(&s, "\n  %s", b.OvercommitText())
	for _, n := range b.Notes {
		fmt.Fprintf(&s, "\n  note: %s", n)
	}
	return s.String()
}

// readKeyValues parses "Key: value [kB]" lines (/proc/meminfo,
// /proc/self/status) into bytes; "kB" values are scaled and CapEff is read
// as hexadecimal.
func readKeyValues(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		if k == "CapEff" {
			if n, err := strconv.ParseUint(fields[0], 16, 64); err == nil {
				out[k] = int64(n)
			}
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n <<= 10
		}
		out[k] = n
	}
	return out, nil
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// readLimit reads a cgroup memory limit: -1 for "max" (v2) or a v1 value
// of 2⁶² or more (v1's "unlimited" is the largest page multiple below
// 2⁶³).
func readLimit(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if n >= 1<<62 {
		return -1, nil
	}
	return n, nil
}
