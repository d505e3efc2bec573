package systest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/tests/testcluster"
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
	return startDevIn(t, true, args...)
}

// startDevIn is startDev; without withDir dev gets no --dir but d.dir as
// its $TMPDIR, so that the directory it makes is under d.dir.
func startDevIn(t *testing.T, withDir bool, args ...string) *devRun {
	t.Helper()
	base, err := os.MkdirTemp("", "drover-devtest-")
	if err == nil {
		// Its workers, run as root, run programs as nobody, who must
		// pass through to the cluster's directory.
		err = os.Chmod(base, 0o711)
	}
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
	args = append([]string{"dev", "--env-file", d.envFile}, args...)
	if withDir {
		args = append(args, "--dir", d.dir)
	}
	d.cmd = exec.Command(testcluster.Binary(t), args...)
	if !withDir {
		if err := os.Mkdir(d.dir, 0o711); err != nil {
			t.Fatal(err)
		}
		d.cmd.Env = append(os.Environ(), "TMPDIR="+d.dir)
	}
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
		if err := testcluster.RemoveDir(base); err != nil {
			t.Errorf("drover dev's directory not removed: %v", err)
		}
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

// env is what a shell that sources dev's env file holds, as a map.
func (d *devRun) env() map[string]string {
	d.t.Helper()
	b, err := exec.Command("env", "-i", "/bin/sh", "-c", `set -a && . "$1" && env`, "sh", d.envFile).CombinedOutput()
	if err != nil {
		d.t.Fatalf("sourcing %s: %v\n%s", d.envFile, err, b)
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
// certificate dev made for master m1.
func (d *devRun) workerMetrics(id string) (*metricstest.Scrape, error) {
	sec := filepath.Join(d.dir, "secrets")
	cfg, err := pki.Files{CA: filepath.Join(sec, "ca.pem"), Cert: filepath.Join(sec, "master-m1.pem"), Key: filepath.Join(sec, "master-m1-key.pem")}.ClientConfig(pki.RoleWorker)
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
	sub, err := cl.Submit(ctx, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "600"}, Cores: 1, MemoryMB: 64}})
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

// TestDevRemovesItsDirectoryOnCtrlC stops a drover dev given no --dir
// with SIGINT: its nodes stop and the temporary directory it made is gone;
// with --keep the directory stays, and dev says where it is.
func TestDevRemovesItsDirectoryOnCtrlC(t *testing.T) {
	for _, keep := range []bool{false, true} {
		args := []string{"--insecure", "--masters", "1", "--workers", "0"}
		if keep {
			args = append(args, "--keep")
		}
		d := startDevIn(t, false, args...)
		made := d.env()["DROVER_DEV_DIR"]
		if filepath.Dir(made) != d.dir {
			t.Fatalf("dev made %q, not a directory of its $TMPDIR %s", made, d.dir)
		}
		d.stopAndCheck()
		_, err := os.Stat(made)
		switch {
		case !keep && !os.IsNotExist(err):
			t.Errorf("dev left %s after SIGINT (%v); it printed:\n%s", made, err, d.output())
		case keep && err != nil:
			t.Errorf("dev --keep removed %s: %v", made, err)
		case keep && !strings.Contains(d.output(), "kept "+made+" "):
			t.Errorf("dev --keep did not say it kept %s; it printed:\n%s", made, d.output())
		case !keep && !strings.Contains(d.output(), "removed "+made):
			t.Errorf("dev did not say it removed %s; it printed:\n%s", made, d.output())
		}
	}
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

// consecutiveFreePorts returns a port p of ip such that p to p+n-1 are
// free.
func consecutiveFreePorts(t *testing.T, ip string, n int) int {
	t.Helper()
	for range 100 {
		ports, err := freeport.Get(ip, 1)
		if err != nil {
			t.Fatal(err)
		}
		var held []net.Listener
		for p := ports[0]; p < ports[0]+n; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
			if err != nil {
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if len(held) == n {
			return ports[0]
		}
	}
	t.Fatalf("no %d consecutive free ports on %s", n, ip)
	return 0
}

// TestDevSparkRESTPorts runs drover dev with --spark-rest-port P: master
// mN serves Spark's REST protocol on P+N-1, dev prints and exports the
// spark:// URL of all three, and a submission through one port runs
// dev's --spark-launcher and is seen through the others. With one of the ports taken, dev refuses to start
// and names it.
func TestDevSparkRESTPorts(t *testing.T) {
	const ip = "127.0.0.1"
	p := consecutiveFreePorts(t, ip, 3)
	taken, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p+1)))
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runDrover(t, nil, "dev", "--insecure", "--dir", t.TempDir(), "--spark-rest-port", strconv.Itoa(p))
	taken.Close()
	if want := fmt.Sprintf("port %d of %s", p+1, ip); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("dev with port %d taken: exit %d, stderr %q; want 1 and a line naming %q", p+1, code, stderr, want)
	}

	// --insecure: Spark's own client speaks plain HTTP without a token.
	d := startDev(t, "--insecure", "--workers", "1", "--spark-rest-port", strconv.Itoa(p),
		"--spark-launcher", `["/bin/echo", "class {{mainClass}}"]`)
	addrs := []string{net.JoinHostPort(ip, strconv.Itoa(p)), net.JoinHostPort(ip, strconv.Itoa(p+1)), net.JoinHostPort(ip, strconv.Itoa(p+2))}
	url := "spark://" + strings.Join(addrs, ",")
	if !strings.Contains(d.output(), "  spark:   "+url+"\n") || !strings.Contains(d.output(), "export SPARK_MASTER_URL="+url+"\n") {
		t.Errorf("dev did not print the URL %s and its export; it printed:\n%s", url, d.output())
	}
	if got := d.env()["SPARK_MASTER_URL"]; got != url {
		t.Errorf("env file: SPARK_MASTER_URL=%q, want %q", got, url)
	}
	hc := &http.Client{}
	a := sparkCall(t, hc, "http://"+addrs[1]+"/v1/submissions/create", http.MethodPost, "", createJSON("org.example.Probe"))
	id := a.str("submissionId")
	if a.status != http.StatusOK || a.fields["success"] != true || !sparkDriverID.MatchString(id) {
		t.Fatalf("create through %s: %d %s", addrs[1], a.status, a.raw)
	}
	// dev handed --spark-launcher to the masters.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drv, err := d.client().Driver(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/echo", "class org.example.Probe"}; !slices.Equal(drv.Argv, want) {
		t.Errorf("driver %s from Spark REST runs %q, want %q: the --spark-launcher given to dev", id, drv.Argv, want)
	}
	for _, addr := range addrs {
		s := sparkCall(t, hc, "http://"+addr+"/v1/submissions/status/"+id, http.MethodGet, "", "")
		if s.status != http.StatusOK || s.str("action") != restsubmit.ActionSubmissionStatusResponse || s.fields["success"] != true || s.str("submissionId") != id {
			t.Errorf("status of %s through %s: %d %s", id, addr, s.status, s.raw)
		}
	}
}
