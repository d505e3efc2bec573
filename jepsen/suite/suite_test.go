package suite

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/jepsen/checker"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestMain removes the drover binary the package's tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.RemoveBuilt()
	os.Exit(code)
}

func runSchedule(t *testing.T, cfg Config) *Outcome {
	t.Helper()
	t.Setenv(NetnsEnv, "1")
	// Kept when the test fails, for its history, probes and node logs.
	dir, err := os.MkdirTemp("", "drover-jepsen-")
	if err == nil {
		// The run's probes, run as nobody, pass through it.
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("run kept in %s", dir)
			return
		}
		if err := testcluster.RemoveDir(dir); err != nil {
			t.Errorf("run directory not removed: %v", err)
		}
	})
	cfg.Out = dir
	cfg.Logf = t.Logf
	out, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// An invalid run keeps its cluster's directory, which a test that
	// expects one (the injected bug) has no use for once it passed.
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := testcluster.RemoveDir(out.ClusterDir); err != nil {
			t.Errorf("cluster directory not removed: %v", err)
		}
	})
	for _, r := range out.Results {
		t.Log(r.Line())
	}
	return out
}

// TestDrainGoesOnWhileDriversEnd: the drain ends at its deadline when no
// driver ended since the read before, is pushed drainStall past a read
// that found fewer drivers left, and never past its limit.
func TestDrainGoesOnWhileDriversEnd(t *testing.T) {
	start := time.Unix(1000, 0)
	deadline, limit := start.Add(90*time.Second), start.Add(270*time.Second)
	for _, c := range []struct {
		now           time.Duration
		before, after int
		want          time.Duration
	}{
		{10 * time.Second, -1, 20, 90 * time.Second},  // the first read
		{10 * time.Second, 20, 20, 90 * time.Second},  // none ended
		{10 * time.Second, 20, 25, 90 * time.Second},  // more left: a new submission
		{10 * time.Second, 20, 19, 90 * time.Second},  // one ended, well before the deadline
		{80 * time.Second, 20, 19, 110 * time.Second}, // one ended near it
		{260 * time.Second, 5, 4, 270 * time.Second},  // never past the limit
	} {
		got := drainDeadline(deadline, limit, start.Add(c.now), c.before, c.after)
		if got.Sub(start) != c.want {
			t.Errorf("at %s, %d then %d left: deadline %s, want %s", c.now, c.before, c.after, got.Sub(start), c.want)
		}
	}
}

// TestRandomizedSchedules runs short randomized schedules of every fault
// family against the real code, in both fencing modes; every checker must
// pass. Longer runs: go run ./jepsen (see jepsen/README.md).
func TestRandomizedSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs chaos schedules of about a minute each")
	}
	if !testcluster.InOwnNetns(t) {
		return
	}
	for _, cfg := range []Config{
		// With the schedule workload: slots fire through the kills.
		{Nemesis: []string{"kill", "pause"}, Seed: 11, Time: 35 * time.Second, Cron: true},
		{Nemesis: []string{"partition", "flaky"}, Seed: 12, Time: 35 * time.Second},
		{Nemesis: []string{"worker", "kill"}, Seed: 13, Time: 35 * time.Second, Strict: true},
	} {
		t.Run(strings.Join(cfg.Nemesis, "+"), func(t *testing.T) {
			if out := runSchedule(t, cfg); !out.Valid {
				t.Errorf("seed %d: a checker failed; run folder %s", cfg.Seed, out.Dir)
			}
		})
	}
}

// TestFindsInjectedBug builds drover with a known bug (a strict-mode
// leader relaunching a silent worker's drivers before their lease ran
// out) and expects the suite to report two live attempts of a driver.
func TestFindsInjectedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a chaos schedule of about a minute")
	}
	if !testcluster.InOwnNetns(t) {
		return
	}
	bin, err := testcluster.Build("drover_bug_early_relaunch")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(strings.TrimSuffix(bin, "/drover"))
	// Cores to spare, so that the early relaunch is placed at once and not
	// only after the lease ran out, which would hide the bug by chance.
	out := runSchedule(t, Config{Nemesis: []string{"worker"}, Seed: 3, Time: 40 * time.Second, Strict: true, Binary: bin, WorkerCores: 64})
	for _, r := range out.Results {
		if r.Name == checker.NameSingleLiveAttempt {
			if r.Valid {
				t.Fatalf("the injected bug went unnoticed: %s", r.Line())
			}
			return
		}
	}
	t.Fatalf("no %s result", checker.NameSingleLiveAttempt)
}
