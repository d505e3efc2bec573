package systest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// probeScript is the body of a test driver run by /bin/sh. It appends one
// line per event to $PROBE/$DROVER_DRIVER_ID: "start ATTEMPT WORKER PID
// UNIXTIME" when it starts and "end ATTEMPT" when it ends normally. $BODY
// runs between the two.
const probeScript = `f="$PROBE/$DROVER_DRIVER_ID"
echo "start $DROVER_ATTEMPT $DROVER_WORKER_ID $$ $(date +%s.%N)" >> "$f"
eval "$BODY"
rc=$?
echo "end $DROVER_ATTEMPT $rc" >> "$f"
exit $rc`

// probe is a directory where test drivers record what they did.
type probe struct {
	t   *testing.T
	dir string
}

// newProbe makes the probe's directory, which every user may write, as
// /tmp (programs run as nobody). It is removed at the end of the
// test, which comes before the cluster's end (cleanups run last first), so
// a program still beating may add a file while the directory is removed:
// the removal is tried again until the directory is gone, which stops the
// program's writes.
func newProbe(t *testing.T) *probe {
	dir, err := os.MkdirTemp("", "drover-probe-")
	if err == nil {
		err = os.Chmod(dir, os.ModeSticky|0o777)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testcluster.RemoveDir(dir); err != nil {
			t.Errorf("probe directory not removed: %v", err)
		}
	})
	return &probe{t: t, dir: dir}
}

// request returns a submission of the probe script running body.
func (p *probe) request(body string, supervise bool) api.SubmitRequest {
	return api.SubmitRequest{
		DriverSpec: model.DriverSpec{
			Argv:      []string{"/bin/sh", "-c", probeScript},
			Env:       map[string]string{"PROBE": p.dir, "BODY": body},
			Cores:     1,
			MemoryMB:  256,
			Supervise: supervise,
		},
	}
}

// lines returns the events driver id recorded, each split into fields.
func (p *probe) lines(id string) [][]string {
	b, err := os.ReadFile(filepath.Join(p.dir, id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		p.t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, strings.Fields(l))
		}
	}
	return out
}

// starts returns the "start" events of a driver.
func (p *probe) starts(id string) [][]string {
	var out [][]string
	for _, l := range p.lines(id) {
		if l[0] == "start" {
			out = append(out, l)
		}
	}
	return out
}

// finishTimeout bounds the wait for a driver to end. The programs run
// for 20 s at most; on a loaded 2-core machine, where the race detector
// slows every process and a relaunch waits for a lease, they took up to
// a minute more. The bound tells a driver that ends from one that never
// does, not how fast it ends.
const finishTimeout = 3 * time.Minute

// finishes waits for driver id to end and fails the test unless it ended
// FINISHED in the given attempt, its probe having started exactly once per
// attempt: a relaunch never ran an attempt twice or skipped a number.
func (p *probe) finishes(c *testcluster.Cluster, id string, attempt int) *model.Driver {
	p.t.Helper()
	d := c.WaitDriver(id, finishTimeout, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if starts := p.starts(id); d.State != model.DriverFinished || d.Attempt != attempt || len(starts) != attempt {
		p.t.Fatalf("driver ended %s at attempt %d after %d starts %v; want FINISHED at attempt %d after %d",
			d.State, d.Attempt, len(starts), starts, attempt, attempt)
	}
	return d
}

func submit(t testing.TB, c *testcluster.Cluster, req api.SubmitRequest) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Client().Submit(ctx, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.DriverID
}

// driverRow is the part of a listed driver the namespace tests and
// benchmarks count.
type driverRow struct {
	State     model.DriverState `json:"state"`
	WorkerID  string            `json:"worker_id"`
	Namespace string            `json:"namespace"`
	Cores     int               `json:"cores"`
}

// listDrivers lists every driver of the cluster in one request (GET
// /v1/drivers).
func listDrivers(t testing.TB, ctx context.Context, cl *client.Client) []driverRow {
	t.Helper()
	var ds []driverRow
	if err := cl.Do(ctx, "GET", api.PathDrivers, nil, &ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

func isState(s model.DriverState) func(*model.Driver) bool {
	return func(d *model.Driver) bool { return d.State == s }
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runDroverLimit bounds a command runDrover runs: one that should have
// refused to start and did not is killed (exit code -1) rather than
// holding the test until its own deadline.
const runDroverLimit = 2 * time.Minute

// mustDrover is runDrover that fails the test unless drover exits 0, and
// returns what it printed on stdout.
func mustDrover(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := runDrover(t, env, args...)
	if code != 0 {
		t.Fatalf("drover %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// runDrover runs the drover binary with args, as a user would, with env
// added to this process's environment (where a name is given twice, the
// later entry wins), and returns what it printed and its exit code.
func runDrover(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runDroverLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// Killed with the test process should it die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if _, ok := errors.AsType[*exec.ExitError](err); !ok {
			t.Fatalf("drover %s: %v", strings.Join(args, " "), err)
		}
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// stateHash is the hash of node n's tables, from its /v1/state.
func stateHash(t *testing.T, n *testcluster.Node) string {
	t.Helper()
	st, err := testcluster.State(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return st.StateHash
}

// waitSameTables waits until every given master holds the leader's tables.
func waitSameTables(t *testing.T, c *testcluster.Cluster, ms ...*testcluster.Node) {
	t.Helper()
	waitFor(t, 30*time.Second, "masters hold the same tables", func() bool {
		l, err := c.Leader(5 * time.Second)
		if err != nil {
			return false
		}
		want, err := testcluster.State(context.Background(), l)
		if err != nil {
			return false
		}
		for _, m := range ms {
			st, err := testcluster.State(context.Background(), m)
			if err != nil || st.StateHash != want.StateHash {
				return false
			}
		}
		return true
	})
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// buildWordcount builds examples/wordcount into the test's temp dir.
func buildWordcount(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(sharedDir(t), "wordcount")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/drover-project/drover/examples/wordcount").CombinedOutput(); err != nil {
		t.Fatalf("build wordcount: %v\n%s", err, out)
	}
	return bin
}

// sharedDir is a new temporary directory that every user may read and
// pass through (0755, and 0711 the test's directories above it), for what
// programs, run as nobody by a worker run as root, read or run.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func registerApp(t *testing.T, c *testcluster.Cluster, spec client.AppSpec) *client.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := c.Client().RegisterApp(ctx, spec)
	if err != nil {
		t.Fatalf("register app: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

// nextEvent returns the first event of the app that satisfies cond.
func nextEvent(t *testing.T, a *client.App, timeout time.Duration, what string, cond func(client.ExecutorEvent) bool) client.ExecutorEvent {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-a.Events():
			if !ok {
				t.Fatalf("%s: the app's events ended (%v, state %s)", what, a.Err(), a.Status().State)
			}
			if cond(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
}

func kind(k client.EventKind) func(client.ExecutorEvent) bool {
	return func(ev client.ExecutorEvent) bool { return ev.Kind == k }
}

func appStatus(t *testing.T, c *testcluster.Cluster, id string) api.AppStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Client().AppStatus(ctx, id)
	if err != nil {
		t.Fatalf("app %s: %v", id, err)
	}
	return s
}
