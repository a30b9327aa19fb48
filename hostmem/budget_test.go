// Tests for the budget helper, over fake /proc and /sys trees.

package hostmem

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRoot writes files (path -> content) under a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

const (
	gib         = int64(1) << 30
	meminfo64   = "MemTotal:       67108864 kB\nMemFree:        1000 kB\nMemAvailable:   50331648 kB\nCommitLimit:    33554432 kB\nCommitted_AS:   8388608 kB\n"
	statusNoCap = "Name:\tx\nVmLck:\t    1024 kB\nCapEff:\t0000000000000000\n"
	statusCap   = "Name:\tx\nVmLck:\t       0 kB\nCapEff:\t000001ffffffffff\n"
)

func memlock(cur, max uint64) func() (uint64, uint64, error) {
	return func() (uint64, uint64, error) { return cur, max, nil }
}

func TestBudget(t *testing.T) {
	t.Run("cgroup-v2-nested-binds", func(t *testing.T) {
		root := fakeRoot(t, map[string]string{
			"proc/meminfo":                               meminfo64,
			"proc/self/status":                           statusCap,
			"proc/self/cgroup":                           "0::/kube/pod1/ctr\n",
			"proc/sys/vm/overcommit_memory":              "0\n",
			"sys/fs/cgroup/kube/pod1/ctr/memory.max":     "max\n",
			"sys/fs/cgroup/kube/pod1/ctr/memory.current": "1073741824\n",
			"sys/fs/cgroup/kube/pod1/memory.max":         "34359738368\n", // 32 GiB, the tighter level
			"sys/fs/cgroup/kube/pod1/memory.current":     "4294967296\n",
			"sys/fs/cgroup/kube/memory.max":              "68719476736\n",
			"sys/fs/cgroup/kube/memory.current":          "4294967296\n",
		})
		b := readBudget(root, PinLock, memlock(8<<20, 8<<20))
		assert.Equal(t, LimitCgroupV2, b.Binding)
		assert.Equal(t, 28*gib, b.Fits)
		require.Len(t, b.Limits, 2, "%s", b)
		assert.Equal(t, BudgetLimit{Name: LimitMemAvailable, Source: "/proc/meminfo", Limit: 64 * gib, Used: 16 * gib, Headroom: 48 * gib}, b.Limits[0])
		assert.Equal(t, BudgetLimit{Name: LimitCgroupV2, Source: "/sys/fs/cgroup/kube/pod1/memory.max", Limit: 32 * gib, Used: 4 * gib, Headroom: 28 * gib}, b.Limits[1])
		assert.Contains(t, b.Notes, "RLIMIT_MEMLOCK does not apply: the process has CAP_IPC_LOCK")
		assert.Equal(t, 0, b.OvercommitMode)
		require.NoError(t, b.Check(28*gib))
		err := b.Check(28*gib + 4096)
		require.ErrorIs(t, err, ErrOutOfMemory)
		assert.Equal(t, "hostmem: out of memory: a pool of 30064775168 bytes (28.0 GiB) does not fit: cgroup memory.max binds (limit 32 GiB, used 4 GiB, headroom 28 GiB, from /sys/fs/cgroup/kube/pod1/memory.max)", err.Error())
		assert.Contains(t, b.String(), "a pool pinned by mlock fits in 28 GiB; cgroup memory.max binds")
	})
	t.Run("memlock-binds-without-cap", func(t *testing.T) {
		root := fakeRoot(t, map[string]string{
			"proc/meminfo":                  meminfo64,
			"proc/self/status":              statusNoCap,
			"proc/self/cgroup":              "0::/\n",
			"proc/sys/vm/overcommit_memory": "1\n",
			"sys/fs/cgroup/memory.max":      "max\n",
		})
		b := readBudget(root, PinLock, memlock(64<<20, budgetUnlimited))
		assert.Equal(t, LimitMemlock, b.Binding)
		assert.Equal(t, int64(63<<20), b.Fits, "the soft limit less VmLck")
		assert.Equal(t, int64(1<<20), b.Locked)
		assert.Contains(t, b.Notes, "cgroup memory.max: no limit set")
		l := b.Limits[len(b.Limits)-1]
		assert.Equal(t, BudgetLimit{Name: LimitMemlock, Source: "getrlimit (hard=unlimited)", Limit: 64 << 20, Used: 1 << 20, Headroom: 63 << 20}, l)
		assert.Equal(t, "vm.overcommit_memory=1 (always)", b.OvercommitText())

		// The same machine, populate-only: RLIMIT_MEMLOCK is not read.
		b = readBudget(root, PinNone, func() (uint64, uint64, error) { panic("memlock read for PinNone") })
		assert.Equal(t, LimitMemAvailable, b.Binding)
		assert.Equal(t, 48*gib, b.Fits)
	})
	t.Run("memlock-unlimited-or-unreadable", func(t *testing.T) {
		root := fakeRoot(t, map[string]string{"proc/meminfo": meminfo64, "proc/self/status": statusNoCap})
		b := readBudget(root, PinLock, memlock(budgetUnlimited, budgetUnlimited))
		assert.Contains(t, b.Notes, "RLIMIT_MEMLOCK is unlimited")
		assert.Equal(t, LimitMemAvailable, b.Binding)
		b = readBudget(root, PinLock, func() (uint64, uint64, error) { return 0, 0, errors.New("nope") })
		assert.Contains(t, b.Notes, "RLIMIT_MEMLOCK unread: nope")
	})
	t.Run("cgroup-v1", func(t *testing.T) {
		root := fakeRoot(t, map[string]string{
			"proc/meminfo":     meminfo64,
			"proc/self/status": statusCap,
			"proc/self/cgroup": "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "8589934592\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n", // v1 "unlimited"
			"proc/sys/vm/overcommit_memory":                         "2\n",
		})
		b := readBudget(root, PinCUDA, nil)
		assert.Equal(t, LimitCgroupV1, b.Binding)
		assert.Equal(t, 7*gib, b.Fits)
		assert.Equal(t, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", b.Limits[1].Source)
		// Strict overcommit: CommitLimit counts too (32 GiB - 8 GiB).
		require.Len(t, b.Limits, 3)
		assert.Equal(t, BudgetLimit{Name: LimitCommit, Source: "/proc/meminfo (vm.overcommit_memory=2)", Limit: 32 * gib, Used: 8 * gib, Headroom: 24 * gib}, b.Limits[2])
		assert.Equal(t, "vm.overcommit_memory=2 (strict: MAP_NORESERVE is ignored; CommitLimit 32 GiB, Committed_AS 8 GiB)", b.OvercommitText())
	})
	t.Run("cgroup-namespace-path-missing", func(t *testing.T) {
		// Inside a cgroup namespace /proc/self/cgroup may name a path the
		// mount does not show: the mount's own files are the cgroup's.
		root := fakeRoot(t, map[string]string{
			"proc/self/cgroup":             "0::/host/path/not/visible\n",
			"sys/fs/cgroup/memory.max":     "2147483648\n",
			"sys/fs/cgroup/memory.current": "3221225472\n", // over the limit: no headroom
		})
		b := readBudget(root, PinNone, nil)
		assert.Equal(t, LimitCgroupV2, b.Binding)
		assert.Zero(t, b.Fits)
		assert.Equal(t, "/sys/fs/cgroup/memory.max", b.Limits[0].Source)
		require.ErrorContains(t, b.Check(1), "cgroup memory.max binds")
	})
	t.Run("nothing-readable", func(t *testing.T) {
		b := readBudget(t.TempDir(), PinLock, func() (uint64, uint64, error) { return 0, 0, errors.New("nope") })
		assert.Equal(t, int64(-1), b.Fits)
		assert.Empty(t, b.Binding)
		assert.Empty(t, b.Limits)
		assert.Equal(t, -1, b.OvercommitMode)
		assert.Len(t, b.Notes, 4, "%q", b.Notes)
		require.NoError(t, b.Check(1<<50), "no known limit refuses nothing")
		assert.Contains(t, b.String(), "no memory limit could be read for a pool pinned by mlock")
	})
}

// TestReadBudgetHere reads this machine's budget: MemAvailable is always
// there on Linux.
func TestReadBudgetHere(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	b := ReadBudget(PinLock)
	t.Logf("%s", b)
	assert.Positive(t, b.Fits)
	assert.NotEmpty(t, b.Binding)
}

// TestBudgetCheckRejectsNonPositive: a pool of 0 bytes or fewer is not a
// pool; Check says so with ErrInvalidArgument instead of "fits" (before,
// Check(0) and Check(-1) returned nil).
func TestBudgetCheckRejectsNonPositive(t *testing.T) {
	b := Budget{Fits: 1 << 30, Binding: LimitMemAvailable}
	for _, size := range []int64{0, -1, math.MinInt64} {
		err := b.Check(size)
		require.ErrorIs(t, err, ErrInvalidArgument, "size %d", size)
		assert.NotErrorIs(t, err, ErrOutOfMemory)
		assert.Contains(t, err.Error(), "must be positive")
	}
	require.ErrorIs(t, Budget{Fits: -1}.Check(0), ErrInvalidArgument, "even when no limit was read")
	require.NoError(t, b.Check(1))
}

// TestReadBudgetUnknownPinMode: an unknown pin mode is named in Notes, not
// kept silently in Pin (before, ReadBudget(PinMode(7)) read the budget of
// an unpinned pool and said nothing).
func TestReadBudgetUnknownPinMode(t *testing.T) {
	b := ReadBudget(PinMode(7))
	assert.Equal(t, PinMode(7), b.Pin)
	require.NotEmpty(t, b.Notes)
	assert.Contains(t, b.Notes[0], "unknown pin mode PinMode(7)")
	assert.Contains(t, b.String(), "unknown pin mode PinMode(7)")
	for _, p := range []PinMode{PinNone, PinLock, PinCUDA} {
		for _, n := range ReadBudget(p).Notes {
			assert.NotContains(t, n, "unknown pin mode")
		}
	}
}
