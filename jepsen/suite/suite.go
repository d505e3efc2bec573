// Package suite runs one chaos test: a real Drover cluster as OS processes
// inside the caller's private network namespace, the workload's clients and
// the nemesis's faults for a while, then a heal, a drain, and the checkers.
// Everything goes into a run folder: history.jsonl, results.json, the
// sampler's sightings.json, the porcupine visualization, timeline.html,
// plot.svg, the nodes' logs.
package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/jepsen/changes"
	"github.com/drover-project/drover/jepsen/checker"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/nemesis"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/jepsen/report"
	"github.com/drover-project/drover/jepsen/workload"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// Config is one run's shape. Zero values take the defaults noted.
type Config struct {
	// Nemesis lists fault families (see nemesis.Families); empty for none.
	Nemesis []string
	// Time is how long clients and faults run (default 60s).
	Time time.Duration
	// Seed draws the fault schedule and the clients' operations.
	Seed uint64
	// Masters and Workers size the cluster (default 3 and 3).
	Masters, Workers int
	// Clients is the number of concurrent clients (default 6).
	Clients int
	// WorkerCores is what each worker offers (default 16; 4 with
	// Namespaces). With room to spare, a relaunch is placed at once
	// instead of queueing behind new submissions; with namespaces the
	// cluster is small enough that their work contends, so fair share
	// and preemption have something to decide.
	WorkerCores int
	// Namespaces applies workload.Namespaces before the faults start,
	// spreads the submissions over them and default, records every
	// committed row change (package changes) and runs the namespace
	// checkers on it.
	Namespaces bool
	// Cron creates workload.Schedules before the faults start, lets the
	// clients ask them for manual runs, suspends them after the heal
	// (before the drain), records every committed row change and runs
	// the schedule checker on it and on every master's final rows.
	Cron bool
	// Strict runs masters and workers with --fencing strict.
	Strict bool
	// Isolation is the workers' --isolation (default auto, theirs):
	// cgroups makes a run fail at once where no cgroup can be made.
	Isolation string
	// Out is the folder under which the run folder is made.
	Out string
	// Drain bounds the wait, after the heal, for every driver to end
	// (default 90s); while drivers still end it goes on, up to
	// drainCap Drains in all (see drain).
	Drain time.Duration
	// WriteBound is how soon after the heal a write must be acknowledged
	// (default 15s).
	WriteBound time.Duration
	// Binary is the drover binary (default: built from this module).
	Binary string
	// Logf reports progress (default: discard).
	Logf func(format string, args ...any)
}

// Outcome is a finished run.
type Outcome struct {
	Dir     string
	Seed    uint64
	Valid   bool
	Results []checker.Result
	// ClusterDir is the cluster's directory (data, work dirs, logs),
	// kept when the run is not valid and removed otherwise; its logs are
	// also copied to Dir/logs.
	ClusterDir string
}

// Timing of the drivers relative to the fault detectors: the probe's kill
// grace covers a SIGTERM reaching it through a healthy worker; the cut
// slack covers a worker learning, after a fault ends, that its attempt was
// superseded or killed.
const (
	killGrace = 5 * time.Second
	cutSlack  = 5 * time.Second
)

// InNetns reports whether this process was started in the suite's private
// network namespace (by Reexec).
func InNetns() bool { return os.Getenv(NetnsEnv) == "1" }

// NetnsEnv marks a process that runs in the suite's private network namespace.
const NetnsEnv = "DROVER_JEPSEN_NETNS"

// Reexec runs this program again, with the same arguments, in a new
// network namespace (unshare --net), and returns its exit code. Everything
// the run starts lives in that namespace, which the kernel removes once its
// last process is gone; every node is also killed with its parent.
func Reexec() (int, error) {
	if os.Geteuid() != 0 {
		return 0, errors.New("needs root: it makes a network namespace and iptables rules")
	}
	for _, tool := range []string{"unshare", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return 0, fmt.Errorf("%s is not installed (Debian: util-linux, iptables, iproute2)", tool)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", self}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), NetnsEnv+"=1")
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// Run runs one test in the current network namespace (see Reexec), which
// must be private: it brings loopback up and installs iptables rules. ctx
// ending (Ctrl-C) cuts the run short; it still heals, checks and reports.
func Run(ctx context.Context, cfg Config) (out *Outcome, err error) {
	cfg = withDefaults(cfg)
	if !InNetns() {
		return nil, errors.New("not in the suite's network namespace")
	}
	if b, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip link set lo up: %v: %s", err, b)
	}
	steps, err := nemesis.Plan(cfg.Seed, cfg.Nemesis, cfg.Time)
	if err != nil {
		return nil, err
	}
	// Absolute: probes write here from their attempts' own directories.
	dir, err := filepath.Abs(filepath.Join(cfg.Out, fmt.Sprintf("%s-seed%d", time.Now().UTC().Format("20060102T150405Z"), cfg.Seed)))
	if err != nil {
		return nil, err
	}
	probes := filepath.Join(dir, "probes")
	if err := os.MkdirAll(probes, 0o755); err != nil {
		return nil, err
	}
	// Workers run as root run the probes as nobody, as they would any
	// job's program: the probes must reach their program and write their
	// traces, as a job's user reaches what it runs and writes where it
	// may. The run folder lets them pass, the probes' folder is open to
	// all as /tmp is, and the program is built inside the run folder.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	if err := os.Chmod(probes, os.ModeSticky|0o777); err != nil {
		return nil, err
	}
	// Without the race detector, whatever this process was built with:
	// the probes check nothing of Drover's, and race-instrumented ones,
	// dozens starting at once, starved the workers of a two-core machine
	// until they missed their heartbeats.
	program := filepath.Join(dir, "probe-program")
	if err := testcluster.GoBuild(program, "github.com/drover-project/drover/jepsen/cmd/probe", false, ""); err != nil {
		return nil, fmt.Errorf("probe program: %w", err)
	}
	// Mode 0755 whatever the umask: nobody runs it.
	if err := os.Chmod(program, 0o755); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "schedule.json"), steps); err != nil {
		return nil, err
	}
	tb := &runTB{logf: cfg.Logf}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				tb.setFailed(true)
				tb.cleanup()
				panic(r)
			}
			err = errors.New(string(f))
		}
		tb.cleanup()
	}()
	fencing := "default"
	if cfg.Strict {
		fencing = "strict"
	}
	c := testcluster.New(tb, testcluster.Options{
		Masters: cfg.Masters, Workers: cfg.Workers, WorkerCores: cfg.WorkerCores, WorkerMemory: "8g",
		Binary:     cfg.Binary,
		MasterArgs: []string{"--fencing", fencing, "--retained-drivers", "100000000"},
		WorkerArgs: []string{"--fencing", fencing, "--isolation", cfg.Isolation},
	})
	tb.Cleanup(func() { copyLogs(c.Dir, filepath.Join(dir, "logs")) })
	netw := &nemesis.Net{}
	if err := netw.Setup(); err != nil {
		return nil, err
	}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	masters := strings.Split(c.MasterAddrs, ",")
	wcfg := workload.Config{
		Masters: masters, Clients: cfg.Clients, Seed: cfg.Seed, Program: program, ProbeDir: probes,
		OpTimeout: 5 * time.Second, Pause: 500 * time.Millisecond,
	}
	var nss []model.Namespace
	var scheds []string
	var changeRec *changes.Recorder
	if cfg.Namespaces || cfg.Cron {
		if changeRec, err = changes.Start(masters, func(err error) { cfg.Logf("change stream: %v", err) }); err != nil {
			return nil, err
		}
		defer changeRec.Stop(0)
	}
	if cfg.Namespaces {
		if nss, err = setupNamespaces(c, cfg.Logf); err != nil {
			return nil, err
		}
		wcfg.Namespaces = names(nss)
	}
	if cfg.Cron {
		if scheds, err = setupSchedules(c, program, probes, cfg.Logf); err != nil {
			return nil, err
		}
		wcfg.Schedules = scheds
	}
	wl, err := workload.New(wcfg, rec)
	if err != nil {
		return nil, err
	}
	env := &nemesis.Env{Cluster: c, Net: netw, Election: 500 * time.Millisecond, Logf: cfg.Logf}

	sampleCtx, stopSampler := context.WithCancel(context.Background())
	sightings := make(chan []probe.Sighting, 1)
	go func() { sightings <- probe.Sample(sampleCtx, program, 50*time.Millisecond) }()
	defer stopSampler()

	cfg.Logf("run %s: %d masters, %d workers, %d clients, %s fencing, isolation %s, nemesis %v for %s, seed %d",
		dir, cfg.Masters, cfg.Workers, cfg.Clients, fencing, cfg.Isolation, cfg.Nemesis, cfg.Time, cfg.Seed)
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Time)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); wl.Run(runCtx) }()
	go func() { defer wg.Done(); nemesis.Run(runCtx, env, steps, rec) }()
	wg.Wait()
	stopRun()

	if err := nemesis.HealAll(env); err != nil {
		cfg.Logf("heal: %v", err)
	}
	in := checker.Input{
		Strict: cfg.Strict, HealAt: time.Now().UnixNano(),
		WriteBound: cfg.WriteBound, KillGrace: killGrace, CutSlack: cutSlack,
	}
	cfg.Logf("healed; waiting for an acknowledged write")
	wctx, cancel := context.WithTimeout(context.Background(), 2*cfg.WriteBound)
	in.WriteAcceptedAt = wl.AwaitWrite(wctx, cfg.Clients)
	cancel()
	if len(scheds) > 0 {
		suspendSchedules(c, scheds, cfg.Logf)
	}
	cfg.Logf("draining (up to %s, longer while drivers still end)", cfg.Drain)
	in.DrainEnd = drain(c, cfg.Drain, cfg.Logf)
	in.Final, in.Leader = finalViews(c, dir, len(scheds) > 0)
	if changeRec != nil {
		log := stopRecorder(changeRec, in, cfg.Logf)
		in.Changes, in.Namespaces, in.Schedules = &log, nss, scheds
		if err := log.Write(filepath.Join(dir, "changes.jsonl")); err != nil {
			return nil, err
		}
	}
	stopSampler()
	in.Sightings = <-sightings
	// Kept beside the probes' traces: the checkers read both, and a
	// failed one is read again from the folder.
	if err := writeJSON(filepath.Join(dir, "sightings.json"), in.Sightings); err != nil {
		return nil, err
	}
	if err := rec.Close(); err != nil {
		return nil, err
	}
	in.Ops = rec.Ops()
	if in.Runs, err = probe.ReadRuns(probes); err != nil {
		return nil, err
	}

	results := append(checker.Check(in), partitionsEffective(env))
	out = &Outcome{Dir: dir, Seed: cfg.Seed, Valid: true, Results: results, ClusterDir: c.Dir}
	for _, r := range results {
		out.Valid = out.Valid && r.Valid
	}
	tb.setFailed(!out.Valid)
	stats := report.Summarize(in.Ops)
	if err := writeJSON(filepath.Join(dir, "results.json"), map[string]any{
		"valid": out.Valid, "seed": cfg.Seed, "nemesis": cfg.Nemesis, "time_s": cfg.Time.Seconds(),
		"masters": cfg.Masters, "workers": cfg.Workers, "clients": cfg.Clients, "fencing": fencing, "namespaces": nss, "cron": scheds,
		"schedule": steps, "stats": stats, "results": results,
	}); err != nil {
		return out, err
	}
	err = errors.Join(
		report.Timeline(filepath.Join(dir, "timeline.html"), in.Ops),
		report.Plot(filepath.Join(dir, "plot.svg"), in.Ops),
		checker.VisualizeReads(in, filepath.Join(dir, "linearizability.html")),
	)
	return out, err
}

// setupNamespaces applies workload.Namespaces (within a minute, through
// any failure without authority), before any client or fault starts.
func setupNamespaces(c *testcluster.Cluster, logf func(string, ...any)) ([]model.Namespace, error) {
	nss := workload.Namespaces()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := workload.ApplyNamespaces(ctx, c.Client(), nss); err != nil {
		return nil, err
	}
	logf("applied namespaces %s", strings.Join(names(nss), ", "))
	return nss, nil
}

// setupSchedules creates workload.Schedules, whose runs are probes of
// program tracing into probes (within a minute, through any failure
// without authority), before any client or fault starts, and returns
// their names.
func setupSchedules(c *testcluster.Cluster, program, probes string, logf func(string, ...any)) ([]string, error) {
	reqs := workload.Schedules(program, probes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := workload.CreateSchedules(ctx, c.Client(), reqs); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Name)
	}
	logf("created schedules %s", strings.Join(out, ", "))
	return out, nil
}

// suspendSchedules suspends the run's schedules (within a minute), so
// that the drain can end; a failure is reported and the drain goes on:
// the schedule checker still accounts every slot up to the last one
// accounted.
func suspendSchedules(c *testcluster.Cluster, scheds []string, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := workload.SuspendSchedules(ctx, c.Client(), scheds); err != nil {
		logf("suspend: %v", err)
		return
	}
	logf("suspended schedules %s", strings.Join(scheds, ", "))
}

// names lists the namespaces' names, in order.
func names(nss []model.Namespace) []string {
	out := make([]string, 0, len(nss))
	for _, n := range nss {
		out = append(out, n.Name)
	}
	return out
}

// stopRecorder stops the change recorder once it has the last change of
// the masters' final driver and schedule rows (or after 15 s), and
// returns its log.
func stopRecorder(rec *changes.Recorder, in checker.Input, logf func(string, ...any)) changes.Log {
	var last uint64
	for _, v := range in.Final {
		for _, d := range v.Drivers {
			last = max(last, d.ModifyIndex)
		}
		for _, s := range v.Schedules {
			last = max(last, s.ModifyIndex)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rec.Await(ctx, last)
	log := rec.Stop(last)
	logf("recorded %s", log.Summary())
	return log
}

// partitionsEffective is the suite's check on itself: a partition result
// counts only if an isolated leader really stepped down.
func partitionsEffective(env *nemesis.Env) checker.Result {
	ps := env.Problems()
	r := checker.Result{Name: "partitions-effective", Valid: len(ps) == 0,
		Summary: "every isolated leader stepped down"}
	if len(ps) > 0 {
		r.Summary = fmt.Sprintf("%d faults did not take: %s", len(ps), strings.Join(ps, "; "))
	}
	return r
}

func withDefaults(cfg Config) Config {
	if cfg.Time <= 0 {
		cfg.Time = 60 * time.Second
	}
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	if cfg.Workers == 0 {
		cfg.Workers = 3
	}
	if cfg.Clients == 0 {
		cfg.Clients = 6
	}
	if cfg.WorkerCores == 0 {
		cfg.WorkerCores = 16
		if cfg.Namespaces {
			cfg.WorkerCores = 4
		}
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 90 * time.Second
	}
	if cfg.WriteBound <= 0 {
		cfg.WriteBound = 15 * time.Second
	}
	if cfg.Out == "" {
		cfg.Out = "jepsen/store"
	}
	if cfg.Isolation == "" {
		cfg.Isolation = "auto"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return cfg
}

// drain waits until the leader's tables hold no unfinished driver, or
// timeout passes, and returns when it stopped waiting (Unix ns).
// drainStall is how long the drain goes on past its Drain while drivers
// still end: a machine that runs a relaunched backlog slowly is not a
// driver that never finishes, and a driver that makes no progress for
// drainStall past the Drain still fails supervised-finish.
const drainStall = 30 * time.Second

// drainCap bounds the whole drain to this many times its Drain.
const drainCap = 3

// drain waits until every driver has ended: up to timeout, and past it
// for as long as one more driver ends every drainStall, at most drainCap
// times timeout in all. It returns when it stopped, in Unix nanoseconds.
func drain(c *testcluster.Cluster, timeout time.Duration, logf func(string, ...any)) int64 {
	cl := c.Client()
	start := time.Now()
	deadline, limit := start.Add(timeout), start.Add(drainCap*timeout)
	left := -1
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ds, err := cl.Drivers(ctx)
		cancel()
		if err == nil {
			n := notEnded(ds)
			deadline = drainDeadline(deadline, limit, time.Now(), left, n)
			if left = n; n == 0 {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	logf("drained in %s; %d drivers had not ended at the last read", time.Since(start).Round(time.Second), max(left, 0))
	return time.Now().UnixNano()
}

// drainDeadline is the drain's deadline after a read at now found after
// drivers not ended, where the read before found before (-1: there was
// none): drainStall from now if fewer are left, never past limit.
func drainDeadline(deadline, limit, now time.Time, before, after int) time.Time {
	if before < 0 || after >= before {
		return deadline
	}
	if ext := now.Add(drainStall); ext.After(deadline) {
		deadline = ext
	}
	if deadline.After(limit) {
		return limit
	}
	return deadline
}

// notEnded counts the drivers of ds not in a final state.
func notEnded(ds []*model.Driver) int {
	n := 0
	for _, d := range ds {
		if !d.State.Terminal() {
			n++
		}
	}
	return n
}

// finalViews reads every master's own tables once they have all applied
// the same index (or after 15 s), with its schedule rows when schedules
// is set, and returns them with the leader's position. When the tables
// differ at one index, it writes each master's /v1/state into dir as
// state-<id>.json, for a diff of the rows.
func finalViews(c *testcluster.Cluster, dir string, schedules bool) ([]checker.MasterView, int) {
	var views []checker.MasterView
	var states []*api.State
	leader := 0
	deadline := time.Now().Add(15 * time.Second)
	for {
		views, states, leader = views[:0], states[:0], 0
		same := true
		for i, n := range c.Masters {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			st, err := testcluster.State(ctx, n)
			var rows []*model.Schedule
			if err == nil && schedules {
				rows, err = ownSchedules(ctx, n)
			}
			cancel()
			if err != nil {
				views = append(views, checker.MasterView{ID: n.ID})
				same = false
				continue
			}
			if st.Role == "Leader" {
				leader = i
			}
			views = append(views, checker.MasterView{ID: n.ID, StateHash: st.StateHash, StateIndex: st.StateIndex, Drivers: st.Drivers, Schedules: rows})
			states = append(states, st)
			same = same && st.StateIndex == views[0].StateIndex
		}
		if same || time.Now().After(deadline) {
			if same && slices.ContainsFunc(views, func(v checker.MasterView) bool { return v.StateHash != views[0].StateHash }) {
				for _, st := range states {
					if b, err := json.MarshalIndent(st, "", " "); err == nil {
						_ = os.WriteFile(filepath.Join(dir, "state-"+st.ID+".json"), b, 0o644)
					}
				}
			}
			return views, leader
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ownSchedules reads master n's own schedule rows (GET /v1/schedules,
// stale: answered from its tables, not the leader's). Schedules do not
// change once suspended, so they are those of the tables read with them.
func ownSchedules(ctx context.Context, n *testcluster.Node) ([]*model.Schedule, error) {
	var list api.ScheduleList
	if err := testcluster.Get(ctx, n, api.V1Schedules.Pattern+"?all_namespaces=true&stale=true", &list); err != nil {
		return nil, fmt.Errorf("%s: GET schedules: %w", n.ID, err)
	}
	rows := make([]*model.Schedule, 0, len(list.Schedules))
	for _, s := range list.Schedules {
		row := s.Schedule
		rows = append(rows, &row)
	}
	return rows, nil
}

func copyLogs(from, to string) {
	logs, _ := filepath.Glob(filepath.Join(from, "*.log"))
	if len(logs) == 0 || os.MkdirAll(to, 0o755) != nil {
		return
	}
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(to, filepath.Base(l)), b, 0o644)
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// runTB gives the cluster helpers what a test would: Fatal ends the run
// (Run recovers it into an error), Cleanup runs at the end.
type runTB struct {
	logf     func(string, ...any)
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

type fatal string

func (t *runTB) Helper()                           {}
func (t *runTB) Fatal(args ...any)                 { t.fail(fmt.Sprint(args...)) }
func (t *runTB) Fatalf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }
func (t *runTB) Logf(format string, args ...any)   { t.logf(format, args...) }
func (t *runTB) Failed() bool                      { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }

func (t *runTB) fail(msg string) {
	t.setFailed(true)
	panic(fatal(msg))
}

func (t *runTB) setFailed(v bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = v
}

func (t *runTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *runTB) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
