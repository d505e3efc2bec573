package runner_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// alloc touches mb MiB, one at a time, and exits 0 if it got them all.
func alloc(mb string) int {
	n, err := strconv.Atoi(mb)
	if err != nil {
		return 2
	}
	var keep [][]byte
	for range n {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println("allocated", len(keep), "MiB")
	return 0
}

// unitCgroup makes a cgroup with limits l for one unit of the test, as a
// worker would, and removes it at the end: its JSON as a spec carries it,
// and the Ref. Without root it skips.
func unitCgroup(t *testing.T, l isolation.Limits) (json.RawMessage, isolation.Ref) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroups need root (CI runs as root)")
	}
	m, err := isolation.New(isolation.Config{Name: fmt.Sprintf("runner-test-%d", os.Getpid())})
	if err != nil {
		t.Skipf("skipped: no usable cgroups: %v", err)
	}
	unit := strings.ReplaceAll(t.Name(), "/", "-")
	r, err := m.Create(unit, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := isolation.Destroy(r, 5*time.Second); err != nil {
			t.Error(err)
		}
		// The last test to end removes the worker's cgroup.
		_ = m.Remove()
	})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

// TestOutOfMemoryFails: a program over the unit's memory limit is killed
// by the kernel, and the attempt fails with a reason that says so and
// names the limit, the runner alive to report it.
func TestOutOfMemoryFails(t *testing.T) {
	cg, _ := unitCgroup(t, isolation.Limits{MemoryMB: 64})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := startRunner(t, unitdir.Spec{Argv: []string{self, "alloc", "512"}, Cgroup: cg})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	e := h.final()
	if e.State != model.DriverFailed || e.Reason != isolation.OOMReason(64) || exitCode(e) != 128+int(syscall.SIGKILL) {
		t.Fatalf("final = %+v, want FAILED with %q", e, isolation.OOMReason(64))
	}
	if e.Reason != "out of memory: killed at the 64 MiB limit" {
		t.Fatalf("reason %q", e.Reason)
	}
	st, err := unitdir.ReadStatus(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryPeakBytes < 32<<20 || st.MemoryPeakBytes > 65<<20 {
		t.Errorf("peak memory %d bytes, want near the 64 MiB limit", st.MemoryPeakBytes)
	}
}

// TestSupervisedOutOfMemoryRelaunches: a supervised program killed out
// of memory is relaunched like any failed run, the reason saying why.
func TestSupervisedOutOfMemoryRelaunches(t *testing.T) {
	cg, _ := unitCgroup(t, isolation.Limits{MemoryMB: 32})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The first run asks for too much, the second for little.
	script := fmt.Sprintf(`if [ -e ran ]; then exec %q alloc 1; fi; touch ran; exec %q alloc 256`, self, self)
	h := startRunner(t, unitdir.Spec{Argv: []string{"/bin/sh", "-c", script}, Supervise: true,
		BackoffBase: 300 * time.Millisecond, Cgroup: cg})
	h.next(unitdir.EventStarted)
	if ex := h.next(unitdir.EventExited); ex.Code == nil || *ex.Code != 128+int(syscall.SIGKILL) {
		t.Fatalf("first run exited %+v, want killed", ex)
	}
	// The back-off's status says why the run failed.
	deadline := time.Now().Add(failSafe)
	for {
		st, err := unitdir.ReadStatus(h.dir)
		if err == nil && strings.HasPrefix(st.Reason, isolation.OOMReason(32)+"; relaunching in ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v (%v) never gave the out-of-memory reason", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished || e.Runs != 2 {
		t.Fatalf("final = %+v", e)
	}
}

// TestKillEndsEscapedDescendants: with a cgroup, a descendant that left
// the program's session is ended by a kill, by strict fencing (the
// worker's stop file and SIGUSR2), by a lapsed lease, and by the
// program's own clean exit; the runner stays outside the cgroup.
func TestKillEndsEscapedDescendants(t *testing.T) {
	for _, how := range []string{"killed", "fenced", "lease", "exited"} {
		t.Run(how, func(t *testing.T) {
			cg, ref := unitCgroup(t, isolation.Limits{})
			wait := "sleep 1000"
			if how == "exited" {
				wait = "echo done"
			}
			spec := unitdir.Spec{
				Argv: []string{"/bin/sh", "-c", `setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 1000' &
while [ ! -e escaped ]; do sleep 0.01; done; ` + wait},
				Env:         []string{"PATH=/usr/bin:/bin"},
				KillTimeout: time.Minute,
				Cgroup:      cg,
			}
			if how == "lease" {
				// A lease file nobody renews.
				spec.LeaseFile = filepath.Join(t.TempDir(), "lease")
				spec.Lease = 500 * time.Millisecond
				if err := os.WriteFile(spec.LeaseFile, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h := startRunner(t, spec)
			h.next(unitdir.EventStarted)
			pid, err := strconv.Atoi(h.waitFile("escaped"))
			if err != nil {
				t.Fatal(err)
			}
			c, err := isolation.Open(ref)
			if err != nil {
				t.Fatal(err)
			}
			pids, _ := c.Pids()
			for _, p := range pids {
				if p == h.cmd.Process.Pid {
					t.Fatalf("the runner %d is in the unit's cgroup %v", p, pids)
				}
			}
			want, reason := model.DriverKilled, unitdir.ReasonKilled
			switch how {
			case "killed":
				if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			case "fenced":
				reason = unitdir.ReasonFenced
				if err := unitdir.RequestStop(h.dir, true); err != nil {
					t.Fatal(err)
				}
				if err := h.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
					t.Fatal(err)
				}
			case "lease":
				reason = unitdir.LeaseExpiredReason(spec.Lease)
			case "exited":
				want, reason = model.DriverFinished, ""
			}
			h.next(unitdir.EventExited)
			if e := h.final(); e.State != want || e.Reason != reason {
				t.Fatalf("final = %+v, want %s (%q)", e, want, reason)
			}
			assertGone(t, "escaped descendant", pid)
			if _, err := isolation.Open(ref); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the unit's cgroup outlived its runner: %v", err)
			}
		})
	}
}

// BenchmarkLaunch measures what a cgroup adds to the launch of a unit:
// from the worker's first step (with isolation, making the unit's
// cgroup) through writing the spec and starting the runner to the
// runner's started event, for a program (/bin/true) that exits at once,
// with and without a cgroup. It reports the median and the 90th
// percentile over the launches (run it with -benchtime 100x); removing
// the cgroup afterwards is not counted.
func BenchmarkLaunch(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var m *isolation.Manager
	b.Run("no-cgroup", func(b *testing.B) { benchLaunch(b, self, nil) })
	b.Run("cgroup", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("skipped: cgroups need root")
		}
		if m, err = isolation.New(isolation.Config{Name: fmt.Sprintf("runner-bench-%d", os.Getpid())}); err != nil {
			b.Skipf("skipped: no usable cgroups: %v", err)
		}
		defer m.Remove()
		benchLaunch(b, self, m)
	})
}

func benchLaunch(b *testing.B, self string, m *isolation.Manager) {
	var took []time.Duration
	n := 0
	for b.Loop() {
		n++
		dir := b.TempDir()
		began := time.Now()
		spec := unitdir.Spec{Argv: []string{"/bin/true"}}
		var cg *isolation.Ref
		if m != nil {
			r, err := m.Create(fmt.Sprintf("driver-1-%d", n), isolation.Limits{MemoryMB: 256, Cores: 1, Pids: isolation.DefaultPidsLimit})
			if err != nil {
				b.Fatal(err)
			}
			cg = &r
			if spec.Cgroup, err = json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := unitdir.WriteSpec(dir, spec); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(self, "runner", "--dir", dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e unitdir.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				b.Fatal(err)
			}
			if e.Event == unitdir.EventStarted {
				took = append(took, time.Since(began))
			}
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if cg != nil {
			if err := isolation.Destroy(*cg, 5*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(took)
	if len(took) == 0 {
		b.Fatal("no launch reached its started event")
	}
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}
