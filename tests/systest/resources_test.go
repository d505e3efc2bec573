package systest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// gpuProbe prints the addresses its environment names and the resources
// file's, then runs until killed.
const gpuProbe = `echo "gpu=$DROVER_RESOURCE_GPU"; cat "$DROVER_RESOURCES_FILE"; echo; exec sleep 300`

// printedGPU waits until driver id has printed the addresses it was
// given, and returns them with its resources file.
func printedGPU(t *testing.T, c *testcluster.Cluster, id string) (gpu, file string) {
	t.Helper()
	waitFor(t, 20*time.Second, id+" prints its addresses", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b, _, err := c.Client().Logs(ctx, id, false, 0, 0)
		if err != nil || !strings.HasPrefix(string(b), "gpu=") || strings.Count(string(b), "\n") < 2 {
			return false
		}
		first, rest, _ := strings.Cut(string(b), "\n")
		gpu, file = strings.TrimPrefix(first, "gpu="), strings.TrimSpace(rest)
		return true
	})
	return gpu, file
}

// held is what each driver's current attempt holds, as one master's
// /v1/state says, with the worker's books.
func held(t *testing.T, n *testcluster.Node, ids ...string) (map[string]string, string) {
	t.Helper()
	st, err := testcluster.State(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range st.Drivers {
		if slices.Contains(ids, d.ID) {
			if cur := d.CurrentAttempt(); cur != nil && !d.State.Terminal() {
				out[d.ID] = cur.Resources.String()
			}
		}
	}
	return out, st.Workers[0].ResourcesUsed.String()
}

// TestGPUDriversGetDistinctAddresses: on a worker offering gpu=0,1 two
// drivers asking for one GPU each get different addresses, which they
// read from their environment and their resources file; a third waits.
// After the leader's SIGKILL every surviving master holds the same
// holdings, and a freed address goes to the waiting driver, never to a
// second live one.
func TestGPUDriversGetDistinctAddresses(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerArgs: []string{"--resource", "gpu=0,1"}})
	req := api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", gpuProbe}, Cores: 1, MemoryMB: 64, Resources: model.ResourceAmounts{"gpu": 1}}}
	a := submit(t, c, req)
	b := submit(t, c, req)
	for _, id := range []string{a, b} {
		c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))
	}
	third := submit(t, c, req)
	gpuA, fileA := printedGPU(t, c, a)
	gpuB, _ := printedGPU(t, c, b)
	if gpuA == gpuB || !slices.Contains([]string{"0", "1"}, gpuA) || !slices.Contains([]string{"0", "1"}, gpuB) {
		t.Fatalf("the drivers were given gpu %q and %q, want 0 and 1 one each", gpuA, gpuB)
	}
	if !strings.Contains(fileA, `"componentName":"spark.driver","resourceName":"gpu"},"addresses":["`+gpuA+`"]`) {
		t.Fatalf("driver %s's resources file %s does not name gpu %s", a, fileA, gpuA)
	}
	d := c.WaitDriver(third, 10*time.Second, "waiting for a free GPU", func(d *model.Driver) bool {
		return d.WorkerID == "" && strings.Contains(d.Message, "waiting for a worker with free resources")
	})
	t.Logf("%s holds gpu %s, %s gpu %s; %s: %s", a, gpuA, b, gpuB, third, d.Message)

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before, books := held(t, leader, a, b, third)
	leader.Kill()
	if _, err := c.Leader(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	var alive []*testcluster.Node
	for _, m := range c.Masters {
		if m.Running() {
			alive = append(alive, m)
		}
	}
	waitSameTables(t, c, alive...)
	for _, m := range alive {
		after, booksAfter := held(t, m, a, b, third)
		if len(after) != 2 || after[a] != before[a] || after[b] != before[b] || booksAfter != books || books != "gpu=0,1" {
			t.Fatalf("master %s after the leader's SIGKILL: holdings %v (worker holds %q), before %v (%q)", m.ID, after, booksAfter, before, books)
		}
	}

	// Driver a's GPU goes to the third driver, and only to it.
	if err := c.Client().Kill(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(third, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	if gpu, _ := printedGPU(t, c, third); gpu != gpuA {
		t.Fatalf("the third driver was given gpu %q, want the freed %s", gpu, gpuA)
	}
	if now, _ := held(t, alive[0], b, third); now[b] != "gpu="+gpuB || now[third] != "gpu="+gpuA {
		t.Fatalf("holdings after the kill: %v", now)
	}
}

// TestMaxRestartsEndsAfterExactlyThreeRuns: submit --supervise
// --max-restarts 2 of a program that always fails ends FAILED after
// exactly 3 runs, saying so, and status shows the runs counted.
func TestMaxRestartsEndsAfterExactlyThreeRuns(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerArgs: []string{"--restart-backoff", "100ms"}})
	p := newProbe(t)
	// Without --wait, so that a driver the bounds fail to end fails the
	// test instead of hanging it.
	stdout, stderr, code := runDrover(t, c.ClientEnv(), "client", "submit", "--supervise", "--max-restarts", "2", "--restart-window", "10m",
		"--env", "PROBE="+p.dir, "--env", "BODY=exit 1", "--", "/bin/sh", "-c", probeScript)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	id := lines[len(lines)-1]
	if code != 0 && code != 1 {
		t.Fatalf("submit exited %d, want 0 (RUNNING) or 1 (FAILED already):\n%s", code, stderr)
	}
	d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if starts := p.starts(id); d.State != model.DriverFailed || len(starts) != 3 || d.Attempt != 1 {
		t.Fatalf("driver %s ended %s at attempt %d after %d runs %v, want FAILED at attempt 1 after exactly 3", id, d.State, d.Attempt, len(starts), starts)
	}
	if !strings.HasPrefix(d.Message, "3 runs failed in ") || !strings.Contains(d.Message, "within 10m0s") {
		t.Fatalf("message %q does not say how many runs failed in how long", d.Message)
	}
	status, _, _ := runDrover(t, c.ClientEnv(), "client", "status", id)
	if !strings.Contains(status, "restarts:   3 failed runs counted, at most 2 restarts within 10m0s") {
		t.Fatalf("status does not show the runs counted:\n%s", status)
	}
}

// TestRescheduleAfterMovesTheThirdRun: with --reschedule-after 2 the
// first two runs fail on one worker and the third runs on the other; with
// --max-restarts 3 the fourth failure there ends the driver FAILED.
func TestRescheduleAfterMovesTheThirdRun(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerArgs: []string{"--restart-backoff", "100ms"}})
	p := newProbe(t)
	req := p.request("exit 1", true)
	req.MaxRestarts, req.RescheduleAfter = 3, 2
	id := submit(t, c, req)
	d := c.WaitDriver(id, 60*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	starts := p.starts(id)
	if d.State != model.DriverFailed || len(starts) != 4 {
		t.Fatalf("driver ended %s after %d runs %v, want FAILED after 4", d.State, len(starts), starts)
	}
	first := starts[0][2]
	if starts[1][2] != first || starts[2][2] == first || starts[3][2] != starts[2][2] || starts[2][1] != "2" {
		t.Fatalf("runs %v: want two on one worker (attempt 1), then attempt 2 on the other", starts)
	}
	if !d.Attempts[0].Rescheduled || !strings.Contains(d.Attempts[0].Reason, "2 runs failed in a row") || !strings.HasPrefix(d.Message, "4 runs failed") {
		t.Fatalf("attempts %+v, message %q", d.Attempts, d.Message)
	}
}
