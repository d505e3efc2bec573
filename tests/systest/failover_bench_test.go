package systest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// reportDurations reports the median and the worst of trials as benchmark
// metrics and logs every trial.
func reportDurations(b *testing.B, name string, trials []time.Duration) {
	slices.Sort(trials)
	var all []string
	for _, d := range trials {
		all = append(all, d.Round(time.Millisecond).String())
	}
	b.Logf("%s over %d trials: %s", name, len(trials), strings.Join(all, " "))
	b.ReportMetric(trials[len(trials)/2].Seconds(), "p50-s")
	b.ReportMetric(trials[len(trials)-1].Seconds(), "worst-s")
	b.ReportMetric(0, "ns/op")
}

// fastClient retries every 20 ms, so the measurement is not rounded up by
// back-off.
func fastClient(b *testing.B, c *testcluster.Cluster) *client.Client {
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), client.Options{
		RequestTimeout: 2 * time.Second, RetryInterval: 20 * time.Millisecond, MaxRetryInterval: 20 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// BenchmarkLeaderKillToAcceptedSubmit measures, per trial, the time from
// SIGKILL of the leader to the next acknowledged submission, with the
// masters' default Raft timeouts, then restarts the killed master and
// waits for it to rejoin. Run with -benchtime=20x. What other timeouts
// cost in needless elections, BenchmarkFalseElections and
// BenchmarkLeaderPause measure.
func BenchmarkLeaderKillToAcceptedSubmit(b *testing.B) {
	timing := defaultTiming()
	c := testcluster.New(b, testcluster.Options{Workers: 1, MasterArgs: timing.args()})
	cl := fastClient(b, c)
	p := &probe{dir: b.TempDir()}
	var trials []time.Duration
	for i := 0; i < b.N; i++ {
		leader, err := c.Leader(20 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		leader.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = cl.Submit(ctx, p.request("true", false))
		cancel()
		if err != nil {
			b.Fatalf("trial %d: submit after leader kill: %v", i, err)
		}
		trials = append(trials, time.Since(killed))
		if err := leader.Start(); err != nil {
			b.Fatal(err)
		}
		waitRejoined(b, c, leader)
	}
	reportDurations(b, fmt.Sprintf("leader SIGKILL to accepted submission (Raft timeouts %s)", timing), trials)
}

// BenchmarkLeaderKillToCLISubmit measures, per trial, a `drover client
// submit` started the moment the leader is SIGKILLed, with the CLI's own
// retry schedule: from the new leader's election (its leading_since) to
// the CLI's "submitted" line, and from the kill to that line, with the
// masters' default Raft timeouts. Run with -benchtime=10x.
func BenchmarkLeaderKillToCLISubmit(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Workers: 1, MasterArgs: defaultTiming().args()})
	var sinceElection, sinceKill []time.Duration
	for i := 0; i < b.N; i++ {
		leader, err := c.Leader(20 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(testcluster.Binary(b), "client", "submit", "--", "/bin/true")
		cmd.Env = append(os.Environ(), c.ClientEnv()...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		leader.Kill()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var acked time.Time
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "submitted ") && acked.IsZero() {
				acked = time.Now()
			}
		}
		if err := cmd.Wait(); err != nil || acked.IsZero() {
			b.Fatalf("trial %d: the CLI's submit: %v (acknowledged %v)", i, err, !acked.IsZero())
		}
		next, err := c.Leader(20 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		st, err := testcluster.State(context.Background(), next)
		if err != nil {
			b.Fatal(err)
		}
		sinceElection = append(sinceElection, acked.Sub(time.UnixMilli(st.LeadingSince)))
		sinceKill = append(sinceKill, acked.Sub(killed))
		if err := leader.Start(); err != nil {
			b.Fatal(err)
		}
		waitRejoined(b, c, leader)
	}
	reportDurations(b, "new leader ready to the CLI's acknowledged submit", sinceElection)
	b.Logf("leader SIGKILL to the CLI's acknowledged submit: %v", sinceKill)
}

// waitRejoined waits until a restarted master follows a leader and has
// applied as far as the leader had committed when it came back.
func waitRejoined(b *testing.B, c *testcluster.Cluster, n *testcluster.Node) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l, err := c.Leader(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		ls, err1 := testcluster.State(context.Background(), l)
		ns, err2 := testcluster.State(context.Background(), n)
		if err1 == nil && err2 == nil && ns.Leader == ls.ID && ns.AppliedIndex >= ls.CommitIndex {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("master %s did not rejoin", n.ID)
}

// BenchmarkWorkerKillToRelaunchRunning measures, per trial, the time from
// SIGKILL of the process group of the worker running a supervised driver to
// the driver's next attempt being RUNNING on the other worker; the killed
// worker is restarted for the next trial. Run with -benchtime=10x.
func BenchmarkWorkerKillToRelaunchRunning(b *testing.B) {
	for _, profile := range []string{"local", "lan"} {
		b.Run(profile, func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{Workers: 2, GossipProfile: profile})
			cl := fastClient(b, c)
			p := &probe{dir: b.TempDir()}
			ctx := context.Background()
			res, err := cl.Submit(ctx, p.request("sleep 600", true))
			if err != nil {
				b.Fatal(err)
			}
			var trials []time.Duration
			for i := 0; i < b.N; i++ {
				d := waitDriver(b, cl, res.DriverID, func(d *model.Driver) bool {
					return d.State == model.DriverRunning && d.Attempt == i+1
				})
				w := c.Worker(d.WorkerID)
				killed := time.Now()
				w.KillGroup()
				waitDriver(b, cl, res.DriverID, func(d *model.Driver) bool {
					return d.State == model.DriverRunning && d.Attempt == i+2
				})
				trials = append(trials, time.Since(killed))
				if err := w.Start(); err != nil {
					b.Fatal(err)
				}
				if err := c.WaitReady(30 * time.Second); err != nil {
					b.Fatal(err)
				}
			}
			reportDurations(b, fmt.Sprintf("worker SIGKILL to relaunched RUNNING (%s)", profile), trials)
		})
	}
}

func waitDriver(b *testing.B, cl *client.Client, id string, cond func(*model.Driver) bool) *model.Driver {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := cl.Driver(ctx, id)
		cancel()
		if err == nil && cond(d) {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("driver %s: condition not reached", id)
	return nil
}

// BenchmarkLeaderAndWorkerKillToRelaunch measures, per trial, the time from
// SIGKILL of the leader together with the process group of the worker
// running a supervised driver (Nomad's issue 1747: the new leader has no
// connection from the dead worker to go by) to the driver's next attempt
// being RUNNING on the other worker. Both are restarted for the next trial.
// The masters run the default Raft timeouts (master.DefaultConfig) and
// the lan gossip profile. Run with -benchtime=10x.
func BenchmarkLeaderAndWorkerKillToRelaunch(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Workers: 2, GossipProfile: "lan", MasterArgs: defaultTiming().args()})
	cl := fastClient(b, c)
	p := &probe{dir: b.TempDir()}
	res, err := cl.Submit(context.Background(), p.request("sleep 600", true))
	if err != nil {
		b.Fatal(err)
	}
	var trials []time.Duration
	for i := 0; i < b.N; i++ {
		d := waitDriver(b, cl, res.DriverID, func(d *model.Driver) bool {
			return d.State == model.DriverRunning && d.Attempt == i+1
		})
		leader, err := c.Leader(20 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		w := c.Worker(d.WorkerID)
		killed := time.Now()
		leader.Kill()
		w.KillGroup()
		waitDriver(b, cl, res.DriverID, func(d *model.Driver) bool {
			return d.State == model.DriverRunning && d.Attempt == i+2
		})
		trials = append(trials, time.Since(killed))
		if err := leader.Start(); err != nil {
			b.Fatal(err)
		}
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		waitRejoined(b, c, leader)
		if err := c.WaitReady(30 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
	reportDurations(b, "leader and worker SIGKILL to relaunched RUNNING", trials)
}
