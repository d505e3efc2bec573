package systest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/metricstest"
	"github.com/drover-project/drover/internal/testcluster"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/pki"
)

// devRun is a `drover dev` started by a test, with its --dir, its
// --env-file and what it printed in one directory of the test's.
type devRun struct {
	t                 *testing.T
	base              string
	dir, envFile, out string
	cmd               *exec.Cmd
	done              chan struct{}
}

// startDev runs drover dev with args and waits until it has written its
// env file, that is until its cluster is up. Cleanup kills dev and every
// process under its directory, and keeps the directory if the test failed.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	base, err := os.MkdirTemp("", "drover-devtest-")
	if err != nil {
		t.Fatal(err)
	}
	d := &devRun{t: t, base: base, dir: filepath.Join(base, "cluster"), envFile: filepath.Join(base, "cluster.env"),
		out: filepath.Join(base, "dev.out"), done: make(chan struct{})}
	outf, err := os.Create(d.out)
	if err != nil {
		t.Fatal(err)
	}
	defer outf.Close()
	d.cmd = exec.Command(testcluster.Binary(t), append([]string{"dev", "--dir", d.dir, "--env-file", d.envFile}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = outf, outf
	// Killed with the test process should it die first; dev's own nodes
	// die with dev.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if d.running() {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		testcluster.KillUnder(base)
		if t.Failed() {
			t.Logf("drover dev's output, logs and data kept in %s; it printed:\n%s", base, d.output())
			return
		}
		_ = os.RemoveAll(base)
	})
	waitFor(t, 90*time.Second, "drover dev is up", func() bool {
		if !d.running() {
			t.Fatalf("drover dev exited (%s) before its cluster was up:\n%s", d.cmd.ProcessState, d.output())
		}
		_, err := os.Stat(d.envFile)
		return err == nil
	})
	return d
}

func (d *devRun) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// output is what dev printed so far.
func (d *devRun) output() string {
	b, _ := os.ReadFile(d.out)
	return string(b)
}

// env is dev's env file as a map.
func (d *devRun) env() map[string]string {
	d.t.Helper()
	b, err := os.ReadFile(d.envFile)
	if err != nil {
		d.t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	return env
}

// pid is the PID the env file gives node id.
func (d *devRun) pid(id string) int {
	d.t.Helper()
	pid, err := strconv.Atoi(d.env()[id+"_PID"])
	if err != nil {
		d.t.Fatalf("%s_PID in %s: %v", id, d.envFile, err)
	}
	return pid
}

// client talks to the given masters (dev's, by default) with the
// credentials of dev's exports.
func (d *devRun) client(masters ...string) *client.Client {
	d.t.Helper()
	env := d.env()
	if masters == nil {
		masters = strings.Split(env["DROVER_MASTERS"], ",")
	}
	opts, err := client.SecureOptions(env[client.EnvCACert], "", "", env[client.EnvTokenFile])
	if err != nil {
		d.t.Fatal(err)
	}
	opts.RequestTimeout = 2 * time.Second
	c, err := client.New(masters, opts)
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// state is /v1/state as master id itself sees it.
func (d *devRun) state(id string) (*api.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return d.client(d.env()[id+"_HTTP"]).State(ctx)
}

// leader waits for a master that says it leads and returns its state.
func (d *devRun) leader() *api.State {
	d.t.Helper()
	var last []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		last = last[:0]
		for _, id := range []string{"m1", "m2", "m3"} {
			st, err := d.state(id)
			if err == nil && st.Leader == st.ID {
				return st
			}
			if err == nil {
				err = fmt.Errorf("leader %q", st.Leader)
			}
			last = append(last, fmt.Sprintf("%s: %v", id, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("no master leads within 30s: %s", strings.Join(last, "; "))
	return nil
}

// stopAndCheck stops dev as Ctrl-C does and checks that it exits 0 having
// stopped every process it started: none remains under its directory.
func (d *devRun) stopAndCheck() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("drover dev still running 60s after SIGINT:\n%s", d.output())
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		d.t.Errorf("drover dev exited %d after SIGINT, want 0", code)
	}
	if left := testcluster.ProcessesUnder(d.dir); len(left) > 0 {
		var desc []string
		for _, pid := range left {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			desc = append(desc, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
		d.t.Fatalf("processes left under %s after dev stopped:\n%s", d.dir, strings.Join(desc, "\n"))
	}
}

// workerMetrics scrapes worker id's /metrics as a master does, with the
// master certificate dev made.
func (d *devRun) workerMetrics(id string) (*metricstest.Scrape, error) {
	sec := filepath.Join(d.dir, "secrets")
	cfg, err := pki.Files{CA: filepath.Join(sec, "ca.pem"), Cert: filepath.Join(sec, "master.pem"), Key: filepath.Join(sec, "master-key.pem")}.ClientConfig(pki.RoleWorker)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	return metricstest.Get(hc, "https://"+d.env()[id+"_HTTP"]+"/metrics", "")
}

// alive reports whether pid is a live process.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// worker returns the row of worker id in st, or nil.
func worker(st *api.State, id string) *model.Worker {
	for _, w := range st.Workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// TestDevRestartsKilledNodes SIGKILLs the leader of a drover dev cluster,
// then a worker, and expects dev to say so and bring each back as a new
// process: the master answers /v1/state naming a leader, the worker
// heartbeats with the leader. Stopping dev then stops every process it started, the
// restarted ones and a running driver's included.
func TestDevRestartsKilledNodes(t *testing.T) {
	d := startDev(t, "--restart-after", "1s")
	cl := d.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := cl.Submit(ctx, api.SubmitRequest{Argv: []string{"/bin/sleep", "600"}, Cores: 1, MemoryMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	testcluster.AwaitDriver(t, cl, sub.DriverID, 30*time.Second, "RUNNING", isState(model.DriverRunning))

	leader := d.leader().ID
	old := d.pid(leader)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "dev restarts master "+leader, func() bool {
		p := d.pid(leader)
		return p != old && alive(p)
	})
	waitFor(t, 30*time.Second, "the restarted "+leader+" answers and names a leader", func() bool {
		st, err := d.state(leader)
		return err == nil && st.ID == leader && st.Leader != ""
	})
	for _, line := range []string{
		fmt.Sprintf("master %s (pid %d) exited: signal: killed; restarting it in 1s\n", leader, old),
		fmt.Sprintf("master %s restarted: pid %d\n", leader, d.pid(leader)),
	} {
		if !strings.Contains(d.output(), line) {
			t.Errorf("dev did not print %q; it printed:\n%s", line, d.output())
		}
	}

	oldW := d.pid("w1")
	if err := syscall.Kill(oldW, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "dev restarts w1", func() bool {
		p := d.pid("w1")
		return p != oldW && alive(p)
	})
	// The counter starts at 0 in each process: the new one has heard
	// from a leader.
	waitFor(t, 30*time.Second, "the restarted w1 heartbeats with the leader", func() bool {
		s, err := d.workerMetrics("w1")
		if err != nil {
			return false
		}
		v, _ := s.Value("drover_worker_heartbeats_total", "result", "ok")
		return v >= 1
	})
	if w := worker(d.leader(), "w1"); w == nil || w.State != model.WorkerAlive {
		t.Errorf("the leader's row of the restarted w1: %+v, want ALIVE", w)
	}
	if line := fmt.Sprintf("worker w1 (pid %d) exited: signal: killed; restarting it in 1s\n", oldW); !strings.Contains(d.output(), line) {
		t.Errorf("dev did not print %q; it printed:\n%s", line, d.output())
	}
	d.stopAndCheck()
}

// TestDevRestartAfterZero SIGKILLs a worker of a drover dev run with
// --restart-after 0: dev says it leaves it dead, and it stays dead until
// the leader declares it lost and after; stopping dev stops the rest.
func TestDevRestartAfterZero(t *testing.T) {
	d := startDev(t, "--restart-after", "0")
	old := d.pid("w2")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("worker w2 (pid %d) exited: signal: killed; not restarted (--restart-after 0)\n", old)
	waitFor(t, 30*time.Second, "dev notices w2's death", func() bool { return strings.Contains(d.output(), line) })
	// Detection and --worker-timeout take seconds: a restart, even a
	// prompt one, would have registered w2 again by then.
	waitFor(t, 60*time.Second, "the leader declares w2 lost", func() bool {
		w := worker(d.leader(), "w2")
		return w != nil && w.State == model.WorkerDead
	})
	if left := testcluster.ProcessesUnder(filepath.Join(d.dir, "w2")); len(left) > 0 || d.pid("w2") != old || strings.Contains(d.output(), " restarted: pid") {
		t.Fatalf("w2 came back (processes %v, env file pid %d, was %d); dev printed:\n%s", left, d.pid("w2"), old, d.output())
	}
	d.stopAndCheck()
}
