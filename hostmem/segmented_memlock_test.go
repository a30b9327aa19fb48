//go:build linux

package hostmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// segMemlockEnv selects the stage of TestSegmentedRegionMemlockRefused that
// a re-executed test binary runs.
const segMemlockEnv = "KVALLOC_TEST_SEGMENTED_MEMLOCK"

// segMemlockSoft is the soft RLIMIT_MEMLOCK the child runs under: room for
// four 1 MiB segments and a half, under the 8 MiB hard limit containers
// commonly get.
const segMemlockSoft = 4<<20 + 512<<10

// TestSegmentedRegionMemlockRefused pins a 16 MiB region of 1 MiB segments
// under a soft RLIMIT_MEMLOCK of 4.5 MiB, with CAP_IPC_LOCK dropped (root is
// exempt from the limit only through it): four segments become ready, the
// fifth fails with an error that names RLIMIT_MEMLOCK and the segment, and
// the four keep serving.
//
// setrlimit and capabilities are process-wide and the workers run on any
// thread, so the test runs in a child process, in two stages: the first
// drops CAP_IPC_LOCK from its bounding set and lowers the limit, then
// re-executes the binary, which starts without the capability on every
// thread; the second runs the scenario. The parent's limits never change.
func TestSegmentedRegionMemlockRefused(t *testing.T) {
	switch os.Getenv(segMemlockEnv) {
	case "drop":
		segMemlockDropAndExec(t)
		return
	case "run":
		segMemlockScenario(t)
		return
	}
	var before unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &before))
	cmd := exec.Command(os.Args[0], "-test.run=^TestSegmentedRegionMemlockRefused$", "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = segMemlockStage("drop")
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	var after unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &after))
	require.Equal(t, before, after, "the parent's RLIMIT_MEMLOCK is untouched")
	if m := regexp.MustCompile(`(?m)^\s*\S+\.go:\d+: (cannot force an mlock refusal here: .*)$`).FindSubmatch(out); m != nil {
		t.Skip(string(m[1]))
	}
	require.NoError(t, err, "child failed")
	require.Contains(t, string(out), "segmented memlock scenario verified", "the child must have run the scenario")
}

// segMemlockDropAndExec is the first stage.
func segMemlockDropAndExec(t *testing.T) {
	runtime.LockOSThread() // exec from the thread whose bounding set shrank
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_IPC_LOCK, 0, 0, 0); err != nil {
		// Not root: fine as long as CAP_IPC_LOCK is not held anyway.
		if b := ReadBudget(PinLock); slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, "CAP_IPC_LOCK") }) {
			t.Skipf("cannot force an mlock refusal here: prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK): %v, and the process holds CAP_IPC_LOCK", err)
		}
	}
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim))
	if lim.Max != unix.RLIM_INFINITY && lim.Max < segMemlockSoft {
		t.Skipf("cannot force an mlock refusal here: hard RLIMIT_MEMLOCK %d is below %d", lim.Max, segMemlockSoft)
	}
	lim.Cur = segMemlockSoft
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim))
	err := syscall.Exec(os.Args[0], os.Args, segMemlockStage("run"))
	require.Fail(t, fmt.Sprintf("exec: %v", err))
}

// segMemlockScenario is the second stage.
func segMemlockScenario(t *testing.T) {
	if b := ReadBudget(PinLock); strings.Contains(strings.Join(b.Notes, ";"), "CAP_IPC_LOCK") {
		t.Skipf("cannot force an mlock refusal here: CAP_IPC_LOCK survived the exec: %s", b)
	}
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim))
	require.Equal(t, uint64(segMemlockSoft), lim.Cur)
	require.Zero(t, vmLockedBytes(t))
	b := ReadBudget(PinLock)
	require.Equal(t, LimitMemlock, b.Binding, "the budget names the binding limit: %s", b)
	require.Equal(t, int64(segMemlockSoft), b.Fits)
	require.ErrorContains(t, b.Check(16*regionMiB), "RLIMIT_MEMLOCK binds")

	r, err := NewSegmentedRegion(16*regionMiB, SegmentedOptions{SegmentSize: regionMiB, Workers: 2, Pin: PinLock})
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Wait(ctx)
	require.Error(t, err)
	t.Logf("refusal: %v", err)

	var se *SegmentError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrOutOfMemory)
	assert.True(t, errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EAGAIN), "%v", err)
	assert.Equal(t, "mlock", se.Op)
	// Two workers finish out of order, so the segment that meets the limit
	// is the fifth or sixth claimed, or an earlier one a slow worker held.
	assert.Less(t, se.Index, 6)
	for i := range r.Grown() {
		off, _ := r.GrownRange(i)
		assert.NotEqual(t, se.Offset, off, "the failed segment is not ready")
	}
	msg := err.Error()
	assert.Contains(t, msg, fmt.Sprintf("hostmem: out of memory: segment %d of 16 [%s, %s) of 16 MiB: mlock: ",
		se.Index, regionOffsetString(se.Offset), regionOffsetString(se.Offset+regionMiB)))
	assert.Contains(t, msg, fmt.Sprintf("(RLIMIT_MEMLOCK soft=%d hard=", segMemlockSoft))
	assert.Contains(t, msg, "4 MiB locked by this process; raise it with ulimit -l")
	assert.Equal(t, 1, strings.Count(msg, "hostmem:"), msg)

	// The four ready segments serve, and nothing else does.
	p := r.Progress()
	assert.True(t, p.Done)
	assert.Equal(t, 4, p.Ready)
	assert.Equal(t, 4*regionMiB, p.ReadyBytes)
	assert.Equal(t, 4*regionMiB, p.PinnedBytes)
	assert.Equal(t, 4*regionMiB, vmLockedBytes(t), "the failed segments hold no locked pages")
	bs, err := a.AllocateBatch(regionMiB, 4, allocator.Scattered)
	require.NoError(t, err)
	for _, blk := range bs {
		mem := a.Bytes(blk)
		mem[0], mem[len(mem)-1] = 1, 2 // pinned, resident, writable
	}
	_, err = a.Allocate(4096)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory)
	assert.Equal(t, 4*regionMiB, a.Stats().Capacity)
	require.NoError(t, a.Verify())
	require.NoError(t, a.Close())
	assert.Zero(t, vmLockedBytes(t), "Close unlocked everything")
	t.Log("segmented memlock scenario verified")
}

// segMemlockStage returns the environment with the stage variable set to
// stage, and set once.
func segMemlockStage(stage string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, segMemlockEnv+"=") })
	return append(env, segMemlockEnv+"="+stage)
}
