package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Report is everything docs/benchmarks.md and docs/benchmarks.json say.
type Report struct {
	Date    string      `json:"date"`
	Commit  string      `json:"commit"`
	Command string      `json:"command"`
	Quick   bool        `json:"quick"`
	Machine Machine     `json:"machine"`
	Targets []Row       `json:"targets"`
	Apply   []ApplyRow  `json:"fsm_apply"`
	Output  []OutputRow `json:"log_output,omitempty"`
	Runs    []RunInfo   `json:"runs"`

	// Artifacts are the staging and upload figures, which have no target
	// (Status is empty or notMeasured).
	Artifacts []Row `json:"artifacts,omitempty"`
	// Timings compare the Raft timeouts the defaults were chosen among.
	Timings []TimingRow `json:"raft_timings,omitempty"`
	// Retired are the rows of earlier reports that bench no longer
	// makes, with their histories, kept so that no recorded figure is
	// lost; the Markdown leaves them out.
	Retired []Row `json:"retired,omitempty"`
}

// TimingRow is one setting of the Raft timeouts: the elections a loaded
// cluster held on its own (BenchmarkFalseElections) and, per length of a
// SIGSTOP of the leader, how many pauses an election followed
// (BenchmarkLeaderPause).
type TimingRow struct {
	Timing    string      `json:"timing"` // the sub-benchmark's name
	Reason    string      `json:"reason,omitempty"`
	Elections string      `json:"elections,omitempty"` // "0 in 2.0 min"
	Pauses    []PauseCell `json:"pauses,omitempty"`
	Stats     []Stat      `json:"stats,omitempty"`
	notRun    bool        // as Row's
}

// PauseCell is the trials of one pause length.
type PauseCell struct {
	Pause    string `json:"pause"`    // "200ms"
	Followed string `json:"followed"` // "0 of 5"
}

// Machine describes where the figures were measured.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	// Load is the load averages (1, 5 and 15 minutes) at the start and
	// the end of the runs; empty in reports that predate it.
	Load string `json:"load,omitempty"`
}

// Row statuses.
const (
	met         = "met"
	notMet      = "not met"
	notMeasured = "not measured"
)

// Row is one figure of the targets table.
type Row struct {
	Figure   string `json:"figure"`
	How      string `json:"how"`
	Target   string `json:"target"`
	Status   string `json:"status"`
	Measured string `json:"measured"` // the figures, or why there are none
	Stats    []Stat `json:"stats,omitempty"`
	// History is every run that measured the row, oldest first: the
	// first recorded figure is the "before" of every change since, the
	// last the current one. A run that could not measure the row adds
	// nothing, so the last entry may be older than Status and Measured.
	History []Measurement `json:"history,omitempty"`
	// notRun: a benchmark the row needs was not in this bench's runs
	// (--only), so a report it is merged into keeps its own row.
	notRun bool
	// formerly are earlier names of the figure, under which an earlier
	// report holds its history.
	formerly []string
}

// names reports whether figure is r's figure or a former name of it.
func (r Row) names(figure string) bool {
	return r.Figure == figure || slices.Contains(r.formerly, figure)
}

// Measurement is one run's figures of a row: when, at which commit and
// under which load they were measured.
type Measurement struct {
	Date     string `json:"date"`
	Commit   string `json:"commit"`
	Load     string `json:"load,omitempty"` // as Machine.Load
	Status   string `json:"status"`
	Measured string `json:"measured"`
	Stats    []Stat `json:"stats,omitempty"`
}

// ApplyRow is one command type's line of the FSM table.
type ApplyRow struct {
	Command string `json:"command"`
	Reason  string `json:"reason,omitempty"` // why it was not measured
	Stats   []Stat `json:"stats,omitempty"`  // ns/op, allocs/op, B/op
	notRun  bool   // as Row's
}

// OutputRow is one way BenchmarkOutput50MiB writes the program's 50 MiB:
// straight into a file, or through a runner with rotation off or on.
type OutputRow struct {
	Case   string `json:"case"`
	Reason string `json:"reason,omitempty"` // why it was not measured
	Stats  []Stat `json:"stats,omitempty"`  // program-MB/s, then the runner's peak RSS where there is a runner
	notRun bool   // as Row's
}

// RunInfo is one go test run. Date and Commit are set on the runs of a
// --only bench merged into an earlier report, whose header names another
// date and commit.
type RunInfo struct {
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
	Date    string  `json:"date,omitempty"`
	Commit  string  `json:"commit,omitempty"`
}

// Stat is one metric of one benchmark over its runs (-count).
type Stat struct {
	Benchmark string    `json:"benchmark"`
	Unit      string    `json:"unit"`
	Median    float64   `json:"median"`
	Min       float64   `json:"min"`
	Max       float64   `json:"max"`
	Runs      []float64 `json:"runs"` // one value per run, in run order
}

func newStat(bench, unit string, runs []float64) Stat {
	s := slices.Sorted(slices.Values(runs))
	n := len(s)
	return Stat{Benchmark: bench, Unit: unit, Median: (s[(n-1)/2] + s[n/2]) / 2, Min: s[0], Max: s[n-1], Runs: runs}
}

// ran is one go test run and what it reported.
type ran struct {
	spec    run
	info    RunInfo
	outcome *outcome
}

// figures are the outcomes of all runs, looked up by benchmark name.
type figures struct {
	runs  []*ran
	byTop map[string]*ran // top-level benchmark name -> the run that ran it
}

func newFigures() *figures { return &figures{byTop: map[string]*ran{}} }

func (f *figures) add(r *ran) {
	f.runs = append(f.runs, r)
	for _, b := range r.spec.benches {
		f.byTop[b] = r
	}
}

// subs returns the sub-benchmarks of top (a benchmark or one of its
// sub-benchmarks) in the order they ran, or top itself when it has none.
func (f *figures) subs(top string) []string {
	var out []string
	root, _, _ := strings.Cut(top, "/")
	if r := f.byTop[root]; r != nil {
		for _, name := range r.outcome.order {
			if rest, ok := strings.CutPrefix(name, top+"/"); ok && !strings.Contains(rest, "/") {
				out = append(out, name)
			}
		}
	}
	if len(out) == 0 {
		return []string{top}
	}
	return out
}

// test returns the log of a benchmark that ran.
func (f *figures) test(name string) *testLog {
	top, _, _ := strings.Cut(name, "/")
	return f.byTop[top].outcome.tests[name]
}

// results returns the results of a benchmark, or why there are none.
func (f *figures) results(name string) ([]Result, error) {
	top, _, _ := strings.Cut(name, "/")
	r := f.byTop[top]
	if r == nil {
		return nil, fmt.Errorf("%s %w", top, errNotRun)
	}
	tests := r.outcome.tests
	if rs := r.outcome.results[name]; len(rs) > 0 {
		return rs, nil
	}
	for n := name; ; {
		if t := tests[n]; t != nil && (t.failed > 0 || t.skipped) {
			what := "failed"
			if t.failed == 0 {
				what = "skipped"
			}
			return nil, fmt.Errorf("%s %s: %s", n, what, why(t))
		}
		i := strings.LastIndex(n, "/")
		if i < 0 {
			break
		}
		n = n[:i]
	}
	if r.info.Error != "" {
		return nil, fmt.Errorf("go test: %s", r.info.Error)
	}
	if tests[top] == nil {
		return nil, fmt.Errorf("%s is not in %s", top, r.spec.pkg)
	}
	return nil, fmt.Errorf("%s reported no figures", name)
}

// errNotRun is the error of a benchmark no run of this bench ran.
var errNotRun = errors.New("was not run")

// why says why a benchmark failed or was skipped: its panic, or its last
// log message.
func why(t *testLog) string {
	for _, l := range lines(t) {
		if strings.HasPrefix(l, "panic: ") {
			return l
		}
	}
	if msg := lastLog(t); msg != "" {
		return msg
	}
	return "no message"
}

// judgement collects the figures one row uses, and the first reason one of
// them is missing.
type judgement struct {
	f     *figures
	err   error
	stats []Stat
	notes []string
}

// stat returns the Stat of unit over the runs of benchmark name; after a
// failure it returns zeros and j.err says why.
func (j *judgement) stat(name, unit string) Stat {
	if j.err != nil {
		return Stat{}
	}
	rs, err := j.f.results(name)
	if err != nil {
		j.err = err
		return Stat{}
	}
	vs := make([]float64, len(rs))
	for i, r := range rs {
		v, ok := r.Metrics[unit]
		if !ok {
			j.err = fmt.Errorf("%s reported no %q", name, unit)
			return Stat{}
		}
		vs[i] = v
	}
	seen := false
	for _, s := range j.stats {
		seen = seen || s.Benchmark == name
	}
	if t := j.f.test(name); t.failed > 0 && !seen {
		j.notes = append(j.notes, fmt.Sprintf("%d of %d runs of %s failed: %s", t.failed, t.failed+len(rs), name, why(t)))
	}
	s := newStat(name, unit, vs)
	j.stats = append(j.stats, s)
	return s
}

// trials is the number of iterations over all runs of benchmark name.
func (j *judgement) trials(name string) int64 {
	rs, err := j.f.results(name)
	if err != nil {
		j.err = cmp.Or(j.err, err)
		return 0
	}
	var n int64
	for _, r := range rs {
		n += r.N
	}
	return n
}

// row fills in r's status and measured figures from judge, which returns
// the figures as text and whether they meet the target.
func (f *figures) row(r Row, judge func(j *judgement) (measured string, ok bool)) Row {
	j := &judgement{f: f}
	measured, ok := judge(j)
	switch {
	case j.err != nil:
		r.Status, r.Measured, r.notRun = notMeasured, j.err.Error(), errors.Is(j.err, errNotRun)
		return r
	case ok:
		r.Status = met
	default:
		r.Status = notMet
	}
	r.Measured = strings.Join(append([]string{measured}, j.notes...), "; ")
	r.Stats = j.stats
	return r
}

// runs says how many runs a Stat is over.
func runs(s Stat) string {
	if len(s.Runs) == 1 {
		return "1 run"
	}
	return fmt.Sprintf("median of %d runs", len(s.Runs))
}

// submitRate is the row of one shape of BenchmarkSubmitThroughput, met
// when its median reaches least submissions/s. Beside it goes the same
// shape with the client's batching off (unbatched-SHAPE), one request per
// submission, when the bench ran it.
func submitRate(f *figures, r Row, shape string, least float64) Row {
	return f.row(r, func(j *judgement) (string, bool) {
		s := j.stat("BenchmarkSubmitThroughput/"+shape, "submits/s")
		text := fmt.Sprintf("%s (%s, lowest %s)", rate(s.Median), runs(s), rate(s.Min))
		if rs, err := f.results("BenchmarkSubmitThroughput/unbatched-" + shape); err == nil {
			alone := make([]float64, 0, len(rs))
			for _, r := range rs {
				alone = append(alone, r.Metrics["submits/s"])
			}
			text += fmt.Sprintf("; one request per submission: %s", rate(newStat("", "", alone).Median))
		}
		return text, s.Median >= least
	})
}

// targetRows are the performance targets, judged on the medians over runs; the
// failover figures, whose runs each hold many trials, also on the worst
// trial.
func targetRows(f *figures) []Row {
	rows := []Row{
		submitRate(f, Row{Figure: "acknowledged submissions/s, 3 masters, fsync on", How: "64 concurrent clients over HTTP, each committed by a quorum; the Go client gathers concurrent submissions into batch requests", Target: ">= 10,000/s"},
			"sticky-64", 10_000),
		submitRate(f, Row{Figure: "acknowledged submissions/s at 256 in flight", How: "same, 256 concurrent clients", Target: ">= 15,000/s"},
			"sticky-256", 15_000),
		submitRate(f, Row{Figure: "acknowledged submissions/s through the CLI's fan-out", How: "same as at 64, each request sent to every master", Target: ">= 5,000/s (half the sticky target)"},
			"fanout-64", 5_000),
		f.row(Row{Figure: "submit latency p50/p99 at 2,000 submissions/s", How: "same, offered at 2,000/s", Target: "p99 <= 20 ms"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkSubmitLatencyAt2000"
				p50, p99, got := j.stat(b, "p50_ms"), j.stat(b, "p99_ms"), j.stat(b, "achieved/s")
				text := fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (%s, worst %.1f ms) at %s achieved", p50.Median, p99.Median, runs(p99), p99.Max, rate(got.Median))
				if got.Median < 0.95*2000 {
					return text + ", short of 2,000/s", false
				}
				return text, p99.Median <= 20
			}),
		f.row(Row{Figure: "placements/s: SUBMITTED to RUNNING acknowledged by workers", How: "100,000 drivers waiting, 1,000 simulated workers started", Target: ">= 5,000/s (Nomad's C1M placed about 3,750/s)"},
			func(j *judgement) (string, bool) {
				s, cpu := j.stat("BenchmarkPlacement", "placements/s"), j.stat("BenchmarkPlacement", "leader_cpu_ms/placement")
				return fmt.Sprintf("%s (%s, lowest %s), leader CPU %.3f ms per placement", rate(s.Median), runs(s), rate(s.Min), cpu.Median), s.Median >= 5_000
			}),
		f.row(Row{Figure: "placements/s across 1,000 namespaces", How: "the same, the drivers spread over 1,000 namespaces of weights 1 to 4, placed in weighted fair-share order",
			Target: ">= 5,000/s"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkPlacementNamespaces"
				s, cpu := j.stat(b, "placements/s"), j.stat(b, "leader_cpu_ms/placement")
				text := fmt.Sprintf("%s (%s, lowest %s), leader CPU %.3f ms per placement", rate(s.Median), runs(s), rate(s.Min), cpu.Median)
				// Beside it the same figure without namespaces, when
				// BenchmarkPlacement measured it.
				if rs, err := f.results("BenchmarkPlacement"); err == nil {
					alone := make([]float64, 0, len(rs))
					for _, r := range rs {
						alone = append(alone, r.Metrics["leader_cpu_ms/placement"])
					}
					text += fmt.Sprintf(" (%.3f ms without namespaces)", newStat("", "", alone).Median)
				}
				return text, s.Median >= 5_000
			}),
		f.row(Row{Figure: "starved namespace to 90 % of its fair share, with preemption",
			How:    "two namespaces of weight 1 on 32 cores; one holds every core with drivers deaf to SIGTERM, the other, --preempt, submits 32; --preemption-grace 2s, --preemption-interval 200ms",
			Target: "<= the grace + 2 s"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkFairShareConvergence/preemption"
				to90, past, grace := j.stat(b, "to_90pct_s"), j.stat(b, "past_grace_s"), j.stat(b, "grace_s")
				return fmt.Sprintf("%.2f s with a %.0f s grace: %.2f s past it (%s, worst %.2f s past)", to90.Median, grace.Median, past.Median, runs(past), past.Max), past.Median <= 2
			}),
		f.figure(Row{Figure: "starved namespace to 90 % of its fair share, without preemption",
			How: "the same without --preempt; the other's drivers end one every 0.25 s (over 8 s), as many more of its waiting", Target: "none: reported"},
			func(j *judgement) string {
				b := "BenchmarkFairShareConvergence/no-preemption"
				to90, past := j.stat(b, "to_90pct_s"), j.stat(b, "past_freed_s")
				return fmt.Sprintf("%.2f s (%s, slowest %.2f s), %.2f s after as many of the other's drivers had ended", to90.Median, runs(to90), to90.Max, past.Median)
			}),
	}
	// failover adds a row per trial benchmark name, judged on the median
	// and the worst trial; formerly names the row's figure in earlier
	// reports.
	failover := func(name string, r Row, p50Max, worstMax float64) {
		rows = append(rows, f.row(r, func(j *judgement) (string, bool) {
			p50, worst, n := j.stat(name, "p50-s"), j.stat(name, "worst-s"), j.trials(name)
			return fmt.Sprintf("p50 %.2f s, worst %.2f s over %d trials", p50.Median, worst.Max, n), p50.Median <= p50Max && worst.Max <= worstMax
		}))
	}
	failover("BenchmarkLeaderKillToAcceptedSubmit", Row{Figure: "leader SIGKILL to next accepted write, default Raft timeouts", How: "20 trials",
		Target: "p50 <= 1 s, worst <= 1.5 s (Spark with ZooKeeper: 1-2 minutes)",
		// Until the defaults became 400 ms, the benchmark measured them
		// as a sub-benchmark beside drover dev's timings.
		formerly: []string{"leader SIGKILL to next accepted write (raft-1s-default)"}}, 1, 1.5)
	for _, profile := range []string{"local", "lan"} {
		failover("BenchmarkWorkerKillToRelaunchRunning/"+profile, Row{Figure: "worker SIGKILL to relaunched driver RUNNING (" + profile + ")",
			How: "20 trials, lan and local profiles", Target: "p50 <= 2 s, worst <= 4 s (Spark: 60 s worker timeout)"}, 2, 4)
	}
	failover("BenchmarkLeaderAndWorkerKillToRelaunch", Row{Figure: "leader and worker SIGKILL together to relaunched driver RUNNING",
		How: "20 trials, lan profile", Target: "worst <= 5 s (Nomad's issue 1747)"}, 5, 5)
	failover("BenchmarkLeaderKillToCLISubmit", Row{Figure: "next leader ready to a CLI submit acknowledged", How: "10 trials, the CLI started at the leader's SIGKILL",
		Target: "worst <= 0.3 s"}, 0.3, 0.3)
	rows = append(rows, f.row(Row{Figure: "leader SIGSTOP for 200 ms, default Raft timeouts",
		How: "5 trials: SIGSTOP, 200 ms, SIGCONT; an election within 3 heartbeat timeouts and an election timeout counts", Target: "no election"},
		func(j *judgement) (string, bool) {
			name := "BenchmarkLeaderPause/default/pause-200ms"
			share, n := j.stat(name, "elections/trial"), j.trials(name)
			elected := math.Round(share.Median * float64(n))
			return fmt.Sprintf("an election after %.0f of %d pauses", elected, n), elected == 0
		}))
	rows = append(rows,
		f.row(Row{Figure: "event delivery latency at 1,000 events/s", How: "submission acknowledged to its event on a follower's stream, 10 s", Target: "p99 <= 100 ms"},
			func(j *judgement) (string, bool) {
				p50, p99 := j.stat("BenchmarkEventDelivery", "p50-ms"), j.stat("BenchmarkEventDelivery", "p99-ms")
				return fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (%s, worst p99 %.1f ms)", p50.Median, p99.Median, runs(p99), p99.Max), p99.Median <= 100
			}),
		f.row(Row{Figure: "launch of a unit in a cgroup of its own", How: "making the cgroup, the spec and the runner to the program started (/bin/true), medians of 100 launches with and without, as root", Target: "<= 10 ms added at the median"},
			func(j *judgement) (string, bool) {
				with, without := j.stat("BenchmarkLaunch/cgroup", "median-ms"), j.stat("BenchmarkLaunch/no-cgroup", "median-ms")
				with90, without90 := j.stat("BenchmarkLaunch/cgroup", "p90-ms"), j.stat("BenchmarkLaunch/no-cgroup", "p90-ms")
				added := with.Median - without.Median
				return fmt.Sprintf("median %.1f ms with, %.1f ms without: %+.1f ms; p90 %.1f ms with, %.1f ms without (%s)",
					with.Median, without.Median, added, with90.Median, without90.Median, runs(with)), added <= 10
			}),
		f.row(Row{Figure: "snapshot and restore, 100,000 drivers", How: "time and bytes", Target: "<= 0.5 s each"},
			func(j *judgement) (string, bool) {
				snap, restore := j.stat("BenchmarkSnapshot100k", "ns/op"), j.stat("BenchmarkRestore100k", "ns/op")
				size := j.stat("BenchmarkSnapshot100k", "bytes")
				return fmt.Sprintf("snapshot %.2f s (slowest run %.2f s), restore %.2f s (slowest run %.2f s), %s; %s",
						snap.Median/1e9, snap.Max/1e9, restore.Median/1e9, restore.Max/1e9, megabytes(size.Median), runs(snap)),
					snap.Median <= 0.5e9 && restore.Median <= 0.5e9
			}),
		f.row(Row{Figure: "master memory with 100,000 drivers and 1,000 workers", How: "RSS", Target: "<= 2 KiB per driver above an empty master"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkPlacement"
				per, empty, full := j.stat(b, "rss_kib_per_driver"), j.stat(b, "rss_empty_mib"), j.stat(b, "rss_full_mib")
				heap := j.stat(b, "heap_kib_per_driver")
				return fmt.Sprintf("%.2f KiB per driver (%s, worst %.2f); RSS %.0f MiB empty, %.0f MiB full; Go heap %.2f KiB per driver",
					per.Median, runs(per), per.Max, empty.Median, full.Median, heap.Median), per.Median <= 2
			}),
		f.row(Row{Figure: "5,000 simulated workers heartbeating, nothing placed", How: "leader CPU seconds per wall second from /proc/PID/stat over 10 s; then one worker stopped until the leader shows it DEAD",
			Target: "leader < 0.5 core; loss committed within the worker timeout + 2 s"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkHeartbeats"
				cores, loss, past, timeout := j.stat(b, "leader_cores"), j.stat(b, "loss_s"), j.stat(b, "loss_past_timeout_s"), j.stat(b, "worker_timeout_s")
				return fmt.Sprintf("leader %.2f cores (%s, highest %.2f); loss %.2f s after the stop with a %.0f s worker timeout (worst %.2f s past it)",
					cores.Median, runs(cores), cores.Max, loss.Median, timeout.Median, past.Max), cores.Median < 0.5 && past.Max <= 2
			}),
		f.row(Row{Figure: "schedule slot to committed driver", How: "20 schedules of @every 1s firing for 30 s, no workers: from each slot to its driver's event on the leader's stream, sent once the fire's entry is committed",
			Target: "p50 <= 100 ms, p99 <= 1 s"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkScheduleAccuracy"
				p50, p99, worst, slots := j.stat(b, "p50_ms"), j.stat(b, "p99_ms"), j.stat(b, "max_ms"), j.stat(b, "slots")
				submit, unfired := j.stat(b, "submit_p50_ms"), j.stat(b, "unfired")
				text := fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (%s of %.0f slots, worst p99 %.1f ms, slowest slot %.1f ms); fired %.0f ms after the slot at the median",
					p50.Median, p99.Median, runs(p99), slots.Median, p99.Max, worst.Max, submit.Median)
				// A slot the leader reaches too late is counted missed,
				// not fired: a driver never committed.
				if unfired.Max > 0 {
					return text + fmt.Sprintf("; %.0f slots without a driver", unfired.Max), false
				}
				return text, p50.Median <= 100 && p99.Median <= 1000
			}),
		f.row(Row{Figure: "leader CPU for 10,000 @every 10s schedules", How: "no workers; allow, so each of the 1,000 slots a second commits a driver, which waits; leader CPU seconds per wall second from /proc/PID/stat over 30 s, once each schedule has fired",
			Target: "< 0.33 core"},
			func(j *judgement) (string, bool) {
				b := "BenchmarkScheduleLeaderCPU"
				cores, idle, entries, rss := j.stat(b, "leader_cores"), j.stat(b, "idle_cores"), j.stat(b, "entries/s"), j.stat(b, "leader_rss_mib")
				text := fmt.Sprintf("leader %.2f cores (%s, highest %.2f) at %s entries/s, %.2f before the schedules; RSS %.0f MiB",
					cores.Median, runs(cores), cores.Max, thousands(entries.Median), idle.Median, rss.Median)
				if entries.Median < 0.9*1000 {
					return text + ", short of 1,000 fires/s", false
				}
				return text, cores.Median < 0.33
			}),
	)
	return rows
}

// figure is row for a figure without a target: its Status stays empty
// unless it was not measured.
func (f *figures) figure(r Row, measure func(j *judgement) string) Row {
	r = f.row(r, func(j *judgement) (string, bool) { return measure(j), true })
	if r.Status == met {
		r.Status = ""
	}
	return r
}

// artifactRows are the times of staging a 100 MiB artifact into a unit's
// directory from each source, and the figures of the masters' upload
// store.
func artifactRows(f *figures) []Row {
	// artifact's benchmarks stage 100 MiB, in ns/op.
	staging := func(figure, how, bench string) Row {
		return f.figure(Row{Figure: figure, How: how}, func(j *judgement) string {
			s := j.stat(bench, "ns/op")
			return fmt.Sprintf("%.2f s, %s MiB/s (%s, slowest %.2f s)", s.Median/1e9, thousands(100/(s.Median/1e9)), runs(s), s.Max/1e9)
		})
	}
	return []Row{
		staging("staging 100 MiB from loopback HTTP, empty cache", "download, SHA-256, fsync and rename into the cache, copy into the unit's directory", "BenchmarkStageCold100MiB"),
		f.figure(Row{Figure: "staging a 100 MiB upload from three masters, empty cache", How: "the same through client.OpenBlob from the first master holding it"},
			func(j *judgement) string {
				s, rate := j.stat("BenchmarkStageUpload100MiB", "s/stage"), j.stat("BenchmarkStageUpload100MiB", "MiB/s")
				return fmt.Sprintf("%.2f s, %s MiB/s (%s, slowest %.2f s)", s.Median, thousands(rate.Median), runs(s), s.Max)
			}),
		staging("staging 100 MiB from the cache", "an entry of the cache copied into the unit's directory", "BenchmarkStageCacheHit100MiB"),
		f.figure(Row{Figure: "upload of 100 MiB to three masters", How: "client.Upload, acknowledged once a majority of the voters hold it"},
			func(j *judgement) string {
				s := j.stat("BenchmarkUpload100MiB", "s/upload")
				return fmt.Sprintf("%.2f s (%s, slowest %.2f s)", s.Median, runs(s), s.Max)
			}),
		f.figure(Row{Figure: "masters' disk after 1,000 uploads of 64 KiB, 900 no longer named", How: "DATA_DIR/blobs per master, before and after garbage collection (--upload-grace 1s)"},
			func(j *judgement) string {
				b := "BenchmarkUploadGC"
				before, after, gc := j.stat(b, "MiB/master_before_gc"), j.stat(b, "MiB/master_after_gc"), j.stat(b, "s_gc_after_last_kill")
				return fmt.Sprintf("%.1f MiB before, %.1f MiB after, collected %.1f s after the last kill (%s)", before.Median, after.Median, gc.Median, runs(before))
			}),
	}
}

// timingRows are the Raft timeouts' figures, one row per setting
// BenchmarkFalseElections ran.
func timingRows(f *figures) []TimingRow {
	var out []TimingRow
	for _, name := range f.subs("BenchmarkFalseElections") {
		timing := strings.TrimPrefix(name, "BenchmarkFalseElections/")
		j := &judgement{f: f}
		count, minutes := j.stat(name, "elections"), j.stat(name, "watch-min")
		r := TimingRow{Timing: timing, Elections: fmt.Sprintf("%.0f in %.1f min", count.Median, minutes.Median)}
		for _, pause := range f.subs("BenchmarkLeaderPause/" + timing) {
			share, n := j.stat(pause, "elections/trial"), j.trials(pause)
			r.Pauses = append(r.Pauses, PauseCell{Pause: strings.TrimPrefix(pause, "BenchmarkLeaderPause/"+timing+"/pause-"),
				Followed: fmt.Sprintf("%.0f of %d", math.Round(share.Median*float64(n)), n)})
		}
		r.Stats = j.stats
		if j.err != nil {
			r = TimingRow{Timing: timing, Reason: j.err.Error(), notRun: errors.Is(j.err, errNotRun)}
		}
		out = append(out, r)
	}
	return out
}

// applyRows are the FSM Apply figures, one per command type.
func applyRows(f *figures) []ApplyRow {
	var out []ApplyRow
	for _, name := range f.subs("BenchmarkApply") {
		j := &judgement{f: f}
		j.stat(name, "ns/op")
		j.stat(name, "allocs/op")
		j.stat(name, "B/op")
		r := ApplyRow{Command: strings.TrimPrefix(name, "BenchmarkApply/"), Stats: j.stats}
		if j.err != nil {
			r.Reason, r.Stats, r.notRun = j.err.Error(), nil, errors.Is(j.err, errNotRun)
		}
		out = append(out, r)
	}
	return out
}

// outputRows are the log output figures, one per way of writing.
func outputRows(f *figures) []OutputRow {
	var out []OutputRow
	for _, name := range f.subs("BenchmarkOutput50MiB") {
		j := &judgement{f: f}
		j.stat(name, "program-MB/s")
		if !strings.HasSuffix(name, "/no-runner") {
			j.stat(name, "runner-peak-RSS-MiB")
		}
		r := OutputRow{Case: strings.TrimPrefix(name, "BenchmarkOutput50MiB/"), Stats: j.stats}
		if j.err != nil {
			r.Reason, r.Stats, r.notRun = j.err.Error(), nil, errors.Is(j.err, errNotRun)
		}
		out = append(out, r)
	}
	return out
}

// merge returns the report of a --only bench, r, over the earlier report
// old: r's rows where r ran their benchmarks, old's elsewhere, with their
// histories joined (mergeRows); old's runs but those r ran again, then
// r's, each of r's naming r's date and commit; old's header.
func merge(old, r *Report) *Report {
	m := *old
	continueRows(&m, old, r)
	if len(r.Apply) > 0 && !slices.ContainsFunc(r.Apply, func(a ApplyRow) bool { return a.notRun }) {
		m.Apply = r.Apply
	}
	if len(r.Output) > 0 && !slices.ContainsFunc(r.Output, func(o OutputRow) bool { return o.notRun }) {
		m.Output = r.Output
	}
	if len(r.Timings) > 0 && !slices.ContainsFunc(r.Timings, func(t TimingRow) bool { return t.notRun }) {
		m.Timings = r.Timings
	}
	m.Runs = nil
	for _, run := range old.Runs {
		if !slices.ContainsFunc(r.Runs, func(n RunInfo) bool { return n.Command == run.Command }) {
			m.Runs = append(m.Runs, run)
		}
	}
	for _, run := range r.Runs {
		run.Date, run.Commit = r.Date, r.Commit
		m.Runs = append(m.Runs, run)
	}
	return &m
}

// stamp adds this run's figures to the history of every row it measured.
func stamp(rows []Row, r *Report) {
	for i, row := range rows {
		if row.notRun || row.Status == notMeasured {
			continue
		}
		rows[i].History = append(row.History, Measurement{Date: r.Date, Commit: r.Commit, Load: r.Machine.Load,
			Status: row.Status, Measured: row.Measured, Stats: row.Stats})
	}
}

// continueRows sets the targets and artifacts of into to r's, continuing
// the histories of old's (mergeRows), and adds old's rows that r no longer
// makes to the retired ones.
func continueRows(into, old, r *Report) {
	into.Targets = mergeRows(old, old.Targets, r.Targets)
	into.Artifacts = mergeRows(old, old.Artifacts, r.Artifacts)
	into.Retired = slices.Clone(old.Retired)
	for _, o := range slices.Concat(old.Targets, old.Artifacts) {
		if !slices.ContainsFunc(slices.Concat(r.Targets, r.Artifacts), func(row Row) bool { return row.names(o.Figure) }) {
			o.History = history(old, o)
			into.Retired = append(into.Retired, o)
		}
	}
}

// mergeRows returns rows, the rows of this run in the report's order, each
// after the history of the row of the earlier report old (of which oldRows
// are the targets or the artifacts) under the same figure or a former name
// of it. A row whose benchmarks did not run keeps old's figures under its
// name, how and target now, and, when its target has changed since, says
// so in its status.
func mergeRows(old *Report, oldRows, rows []Row) []Row {
	var out []Row
	for _, row := range rows {
		i := slices.IndexFunc(oldRows, func(o Row) bool { return row.names(o.Figure) })
		if i < 0 {
			if !row.notRun {
				out = append(out, row)
			}
			continue
		}
		prev := oldRows[i]
		if row.notRun {
			kept := prev
			kept.Figure, kept.How, kept.Target, kept.History = row.Figure, row.How, row.Target, history(old, prev)
			if prev.Target != row.Target && prev.Status != notMeasured {
				kept.Status = fmt.Sprintf("%s against the earlier target %s", prev.Status, prev.Target)
			}
			out = append(out, kept)
			continue
		}
		row.History = append(history(old, prev), row.History...)
		out = append(out, row)
	}
	return out
}

// history is row's History in report old or, in a report that predates
// histories, the one measurement the row shows, dated by the run that ran
// its first benchmark when that run names its date (its load then
// unknown), else by old's header.
func history(old *Report, row Row) []Measurement {
	if len(row.History) > 0 || row.Status == notMeasured || row.Status == "" && len(row.Stats) == 0 {
		return row.History
	}
	m := Measurement{Date: old.Date, Commit: old.Commit, Load: old.Machine.Load, Status: row.Status, Measured: row.Measured, Stats: row.Stats}
	if len(row.Stats) > 0 {
		top, _, _ := strings.Cut(row.Stats[0].Benchmark, "/")
		for _, run := range old.Runs {
			if run.Date != "" && strings.Contains(run.Command, top) {
				m.Date, m.Commit, m.Load = run.Date, run.Commit, ""
			}
		}
	}
	return []Measurement{m}
}

// markdown renders the report as docs/benchmarks.md.
func markdown(r *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Drover benchmarks")
	p("")
	p("Written by `%s`; do not edit by hand. The JSON beside it holds every run's figures.", r.Command)
	p("")
	if r.Quick {
		p("**A quick run (`--quick`): fewer trials than the targets call for, and systest's benchmarks at their")
		p("`-short` sizes. A smoke test, not figures to quote.**")
		p("")
	}
	p("| | |")
	p("| --- | --- |")
	p("| date | %s |", r.Date)
	p("| commit | %s |", r.Commit)
	p("| command | `%s` |", r.Command)
	p("| CPU | %s, %d cores |", cell(r.Machine.CPU), r.Machine.Cores)
	p("| memory | %.1f GiB |", r.Machine.MemoryGiB)
	p("| kernel | %s |", cell(r.Machine.Kernel))
	p("| Go | %s |", cell(r.Machine.Go))
	if r.Machine.Load != "" {
		p("| load average (1, 5, 15 min) | %s |", cell(r.Machine.Load))
	}
	p("")
	p("## Targets")
	p("")
	p("A figure is the median over repeated runs; \"lowest\", \"slowest\" and \"worst\" give the tail. A target is met")
	p("when the median is within it (and, for failover, the worst trial too). \"First recorded\" is the row's")
	p("earliest figure in benchmarks.json, which keeps every run's, and \"latest\" its newest: each names its")
	p("date, commit and the machine's load average (1 minute, at the start and the end of the bench), on the")
	p("machine above.")
	p("")
	p("| figure | how | target | first recorded | latest | status |")
	p("| --- | --- | --- | --- | --- | --- |")
	for _, row := range r.Targets {
		first, latest := "", row.Measured
		if h := history(r, row); len(h) > 0 {
			if len(h) > 1 {
				first = measurement(h[0])
			}
			if row.Status != notMeasured {
				latest = measurement(h[len(h)-1])
			}
		}
		p("| %s | %s | %s | %s | %s | %s |", cell(row.Figure), cell(row.How), cell(row.Target), cell(first), cell(latest), row.Status)
	}
	p("")
	if len(r.Artifacts) > 0 {
		p("## Artifacts and uploads")
		p("")
		p("Figures without a target: what fetching a program's files costs before it starts")
		p("([artifacts.md](artifacts.md), [uploads.md](uploads.md)).")
		p("")
		p("| figure | how | measured |")
		p("| --- | --- | --- |")
		for _, row := range r.Artifacts {
			p("| %s | %s | %s |", cell(row.Figure), cell(row.How), cell(row.Measured))
		}
		p("")
	}
	if len(r.Timings) > 0 {
		p("## Raft timeouts")
		p("")
		p("What shorter Raft timeouts cost (heartbeat/election/lease; \"default\" is master.DefaultConfig's).")
		p("`BenchmarkFalseElections`: the elections (Raft term changes) three masters held on their own while")
		p("taking 200 submissions/s beside one busy loop per core. `BenchmarkLeaderPause`: of the trials in which")
		p("the leader was SIGSTOPped for that long, how many an election followed.")
		p("")
		var pauses []string
		for _, t := range r.Timings {
			if len(t.Pauses) > len(pauses) {
				pauses = pauses[:0]
				for _, c := range t.Pauses {
					pauses = append(pauses, c.Pause)
				}
			}
		}
		head, sep := "| timing | elections under load |", "| --- | --- |"
		for _, pause := range pauses {
			head, sep = head+" after a "+pause+" pause |", sep+" --- |"
		}
		p("%s", head)
		p("%s", sep)
		for _, t := range r.Timings {
			if t.Reason != "" {
				p("| %s | not measured: %s |%s", t.Timing, cell(t.Reason), strings.Repeat(" |", len(pauses)))
				continue
			}
			line := "| " + t.Timing + " | " + t.Elections + " |"
			for i := range pauses {
				v := ""
				if i < len(t.Pauses) {
					v = t.Pauses[i].Followed
				}
				line += " " + v + " |"
			}
			p("%s", line)
		}
		p("")
	}
	p("## How the cluster figures are made")
	p("")
	p("- Every cluster is real: three `drover master` processes on loopback addresses, each with its own")
	p("  Raft log on disk (raft-boltdb, fsync on every commit), started by `internal/testcluster`.")
	p("- Submissions go through the Go client, 64 (or 256) goroutines sharing one client in sticky mode (the")
	p("  leader, or the master that answered last, first; every master after its hedge delay), the masters")
	p("  without their bound on one client's submissions in flight. The client gathers the submissions made")
	p("  while its earlier requests are out into batch requests (`POST /v1/drivers/batch`), each submission")
	p("  with its own token and answer; \"one request per submission\" is the same shape with that off")
	p("  (`client.Options.NoBatching`). The CLI instead sends each request to every master, which triples the")
	p("  masters' HTTP work (the fan-out figure measures that).")
	p("- Latency is open loop: each submission has a scheduled time, and latency counts from it.")
	p("- Placement uses simulated workers (`internal/simworker`): each speaks the real worker protocol over")
	p("  real HTTP from its own address (register, long-poll heartbeats, RUNNING reports until acknowledged),")
	p("  but launches nothing: no runner or program, no work dir, record, lease or logs, no adoption or strict")
	p("  fencing, no decommission. They are not memberlist members (1,000 members in one process do not fit")
	p("  in this machine); the masters run with `--worker-timeout 30s`, and heartbeats keep them alive.")
	p("  The drivers are submitted first, with no worker registered, then the fleet starts: placement is")
	p("  timed from the fleet's start (registrations included) to the last driver RUNNING, apart from the")
	p("  submissions, whose rate is the submission rows' figure.")
	p("- The fair-share rows run real workers (four of 8 cores) and drivers (`/bin/sleep`, one core each) in")
	p("  two namespaces of weight 1: the time runs from the starved namespace's first submission to 90 %% of")
	p("  its fair share, as its namespace status gives it, RUNNING in the leader's tables.")
	p("- The schedule rows run three masters without workers: a fire's driver is committed with the entry")
	p("  that accounts its slot, and then waits. A slot's delay runs to its driver's event on a stream of the")
	p("  leader, which sends it once the entry is committed and applied: an upper bound on the commit, by the")
	p("  stream's own delivery of a few milliseconds (the event delivery row), on the one clock the masters")
	p("  and the benchmark share.")
	p("  The leader's CPU is measured from ten seconds after the last schedule was created, once each has")
	p("  fired, and again if the leader changed meanwhile; \"before the schedules\" is the first leader's")
	p("  over 5 s before the first was created.")
	p("- Memory is the leader's RSS from /proc and its Go heap (go_memstats_heap_alloc_bytes), each the")
	p("  lowest of several samples, as an empty master, then with every driver RUNNING. Go's collector lets")
	p("  the heap grow to twice what is live before it collects (GOGC=100), which the RSS carries.")
	p("")
	p("## FSM Apply, per command")
	p("")
	p("`go test -bench BenchmarkApply ./fsm`: Apply of one command, decoding included (entry format 2, MessagePack), on tables of 10,000")
	p("drivers (1,000 of them waiting), 100 workers and 100 apps. Every command is new and takes effect.")
	p("Median and slowest of the runs' ns/op; allocations per command.")
	p("")
	p("| command | ns/op | slowest run | allocs/op | B/op |")
	p("| --- | ---: | ---: | ---: | ---: |")
	for _, a := range r.Apply {
		if a.Reason != "" {
			p("| %s | not measured: %s | | | |", a.Command, cell(a.Reason))
			continue
		}
		ns, allocs, bytes := a.Stats[0], a.Stats[1], a.Stats[2]
		p("| %s | %s | %s | %s | %s |", a.Command, thousands(ns.Median), thousands(ns.Max), thousands(allocs.Median), thousands(bytes.Median))
	}
	p("")
	p("## Log output")
	p("")
	p("`go test -bench BenchmarkOutput50MiB ./runner`: a program (dd, 64 KiB writes) writes 50 MiB to its")
	p("stdout, straight into a file, or under a runner with rotation off (one file larger than the output)")
	p("or on (the default 10 MiB x 5 files, so four rotations). Throughput as dd measures it, median and")
	p("slowest run; the runner's peak resident memory.")
	p("")
	p("| case | program MB/s | slowest run | runner peak RSS |")
	p("| --- | ---: | ---: | ---: |")
	for _, o := range r.Output {
		switch {
		case o.Reason != "":
			p("| %s | not measured: %s | | |", o.Case, cell(o.Reason))
		case len(o.Stats) == 1:
			p("| %s | %s | %s | no runner |", o.Case, thousands(o.Stats[0].Median), thousands(o.Stats[0].Min))
		default:
			p("| %s | %s | %s | %.1f MiB |", o.Case, thousands(o.Stats[0].Median), thousands(o.Stats[0].Min), o.Stats[1].Max)
		}
	}
	p("")
	p("## Runs")
	p("")
	dated := slices.ContainsFunc(r.Runs, func(run RunInfo) bool { return run.Date != "" })
	if dated {
		p("Runs measured after the header's date, with `--only`, name their own date and commit.")
		p("")
		p("| go test | seconds | error | date | commit |")
		p("| --- | ---: | --- | --- | --- |")
	} else {
		p("| go test | seconds | error |")
		p("| --- | ---: | --- |")
	}
	for _, run := range r.Runs {
		if dated {
			p("| `%s` | %.0f | %s | %s | %s |", cell(run.Command), run.Seconds, cell(run.Error), run.Date, run.Commit)
			continue
		}
		p("| `%s` | %.0f | %s |", cell(run.Command), run.Seconds, cell(run.Error))
	}
	return b.String()
}

// measurement is m's figures with their date, commit and load.
func measurement(m Measurement) string {
	return fmt.Sprintf("%s (%s, %s, load %s)", m.Measured, m.Date, m.Commit, shortLoad(m.Load))
}

// shortLoad is the 1-minute load averages of a Machine.Load, "START-END",
// or "unknown".
func shortLoad(load string) string {
	start, end, ok := strings.Cut(load, " at the start, ")
	if s, e := strings.Fields(start), strings.Fields(end); ok && len(s) == 3 && len(e) > 0 {
		return s[0] + "-" + e[0]
	}
	return "unknown"
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func rate(v float64) string { return thousands(v) + "/s" }

func megabytes(v float64) string { return fmt.Sprintf("%.1f MB", v/1e6) }

// thousands formats v rounded to an integer, with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v <= -0.5 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
