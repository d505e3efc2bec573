package systest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// isolationKillTimeout is the workers' --kill-timeout in these tests.
const isolationKillTimeout = 2 * time.Second

// isolatedCluster starts three masters and one worker that must put
// every attempt in a cgroup of its own (--isolation cgroups); without
// root or usable cgroups the test skips, saying why.
func isolatedCluster(t *testing.T) (*testcluster.Cluster, *testcluster.Node) {
	t.Helper()
	needCgroups(t)
	// The lease outlasts a detached worker's restart on a loaded machine.
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerArgs: []string{
		"--isolation", "cgroups", "--kill-timeout", isolationKillTimeout.String(), "--lease", "15s"}})
	return c, c.Workers[0]
}

// needCgroups skips the test, saying why, unless this process may make
// cgroups, as a worker with --isolation cgroups does.
func needCgroups(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroups need root (CI runs as root)")
	}
	probe, err := isolation.New(isolation.Config{Name: fmt.Sprintf("systest-probe-%d", os.Getpid())})
	if err != nil {
		t.Skipf("skipped: no usable cgroups here: %v", err)
	}
	_ = probe.Remove()
}

// attemptCgroup opens the cgroup of attempt n of driver id on worker w,
// as its spec names it.
func attemptCgroup(t *testing.T, w *testcluster.Node, id string, n int) *isolation.Cgroup {
	t.Helper()
	spec, err := unitdir.ReadSpec(filepath.Join(w.Dir, id, "attempt-"+strconv.Itoa(n)))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Cgroup == nil {
		t.Fatalf("attempt %d of %s runs without a cgroup", n, id)
	}
	ref, err := isolation.ParseRef(spec.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	c, err := isolation.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOutOfMemoryFailsTheDriverOnly: a driver with 64 MiB that allocates
// 512 MiB ends FAILED with a reason that says out of memory and names the
// limit; its worker and another driver on it run on.
func TestOutOfMemoryFailsTheDriverOnly(t *testing.T) {
	c, w := isolatedCluster(t)
	other := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "1000"}, Cores: 1, MemoryMB: 256}})
	c.WaitDriver(other, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	// awk doubles a string to 2^29 bytes: 512 MiB, and a copy on the way.
	hog := submit(t, c, api.SubmitRequest{
		DriverSpec: model.DriverSpec{
			Argv:     []string{"/usr/bin/awk", `BEGIN { s = "x"; for (i = 0; i < 29; i++) s = s s; print length(s) }`},
			Cores:    1,
			MemoryMB: 64,
		},
	})
	d := c.WaitDriver(hog, 60*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if d.State != model.DriverFailed || d.Message != "out of memory: killed at the 64 MiB limit" {
		t.Fatalf("driver ended %s with %q, want FAILED with %q", d.State, d.Message, isolation.OOMReason(64))
	}
	if !w.Running() {
		t.Fatal("the worker died with the driver")
	}
	if o := c.WaitDriver(other, 10*time.Second, "read", func(*model.Driver) bool { return true }); o.State != model.DriverRunning || o.Attempt != 1 {
		t.Fatalf("the other driver is %s at attempt %d, want RUNNING at 1", o.State, o.Attempt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Client().Kill(ctx, other); err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(other, 30*time.Second, "KILLED", isState(model.DriverKilled))
}

// grandchildScript starts a grandchild in a session of its own, which
// writes its PID to $PROBE/$DROVER_DRIVER_ID, and waits.
const grandchildScript = `setsid /bin/sh -c 'echo $$ > "$PROBE/$DROVER_DRIVER_ID.tmp"; mv "$PROBE/$DROVER_DRIVER_ID.tmp" "$PROBE/$DROVER_DRIVER_ID"; exec sleep 1000' & wait`

// TestSetsidGrandchildDiesWithItsDriver: a grandchild that left its
// driver's process group and session is gone within the kill timeout of
// a kill of the driver, of a kill after its worker detached and was
// started again (adopting it), of its worker daemon's SIGKILL (the runner
// that follows the daemon ends the whole cgroup), and of its worker's
// decommission.
func TestSetsidGrandchildDiesWithItsDriver(t *testing.T) {
	for _, how := range []string{"kill", "kill after adoption", "worker SIGKILL", "decommission"} {
		t.Run(strings.ReplaceAll(how, " ", "-"), func(t *testing.T) {
			c, w := isolatedCluster(t)
			probe := newProbe(t).dir
			id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", grandchildScript}, Env: map[string]string{"PROBE": probe}, Cores: 1, MemoryMB: 64}})
			c.WaitDriver(id, 30*time.Second, "RUNNING", isState(model.DriverRunning))
			var gc int
			waitFor(t, 30*time.Second, "the grandchild's PID", func() bool {
				b, err := os.ReadFile(filepath.Join(probe, id))
				gc, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil && gc > 0
			})
			if sid, _ := getsid(gc); sid != gc {
				t.Fatalf("grandchild %d is not in a session of its own (sid %d): the test tests nothing", gc, sid)
			}
			if how == "kill after adoption" {
				if err := w.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, "the worker daemon to detach", func() bool { return !w.Running() })
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 30*time.Second, "the restarted worker to adopt the attempt", func() bool {
					return strings.Contains(w.Log(), "adopted attempt")
				})
				if pids, _ := attemptCgroup(t, w, id, 1).Pids(); len(pids) < 2 {
					t.Fatalf("the adopted attempt's cgroup holds %v, want the driver and its grandchild", pids)
				}
			}
			sent := time.Now()
			switch how {
			case "worker SIGKILL":
				w.Kill()
			case "decommission":
				go w.Stop(60 * time.Second)
			default:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.Client().Kill(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, isolationKillTimeout+3*time.Second, "the grandchild to be gone", func() bool { return processGone(gc) })
			t.Logf("grandchild gone %s after the %s", time.Since(sent).Round(time.Millisecond), how)
			if how == "worker SIGKILL" {
				// The leader finds the worker gone: an unsupervised
				// driver on a lost worker is ERROR (Spark's).
				c.WaitDriver(id, 30*time.Second, "ERROR", isState(model.DriverError))
				return
			}
			c.WaitDriver(id, 30*time.Second, "KILLED", isState(model.DriverKilled))
		})
	}
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

// processGone says whether pid has ended: no longer in the process table,
// or a zombie its new parent has not reaped yet.
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return err == nil && len(f) > 0 && f[0] == "Z"
}

// TestBusyLoopWithOneCoreUsesOneCore: two busy loops of a driver given
// one core use about one core, by the cgroup's own CPU accounting.
func TestBusyLoopWithOneCoreUsesOneCore(t *testing.T) {
	c, w := isolatedCluster(t)
	id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", `while :; do :; done & while :; do :; done`}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(id, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	cg := attemptCgroup(t, w, id, 1)
	waitFor(t, 10*time.Second, "both loops in the cgroup", func() bool {
		pids, _ := cg.Pids()
		return len(pids) == 2
	})
	before, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	time.Sleep(3 * time.Second)
	after, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(began)
	cores := float64(after.CPUMicros-before.CPUMicros) / float64(wall.Microseconds())
	t.Logf("two busy loops with one core used %.2f cores over %s", cores, wall.Round(time.Millisecond))
	if cores > 1.15 {
		t.Fatalf("used %.2f cores, want at most about one", cores)
	}
	if cores == 0 {
		t.Fatal("the cgroup counted no CPU time")
	}
}
