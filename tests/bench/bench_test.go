package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// stream builds `go test -json` output. Each step is an action and a
// benchmark name ("run fsm"), or "out NAME" and the output text, which may
// be a partial line, as test2json splits a result line when the benchmark
// name and its figures are printed apart.
type stream []string

func (s stream) event(action, test string) stream {
	b, _ := json.Marshal(map[string]string{"Action": action, "Test": test})
	return append(s, string(b))
}

func (s stream) out(test, text string) stream {
	b, _ := json.Marshal(map[string]string{"Action": "output", "Test": test, "Output": text})
	return append(s, string(b))
}

// bench is a benchmark that ran and printed lines.
func (s stream) bench(test string, lines ...string) stream {
	s = s.event("run", test).out(test, "=== RUN   "+test+"\n").out(test, test+"\n")
	for _, l := range lines {
		s = s.out(test, l)
	}
	return s
}

func (s stream) String() string { return strings.Join(s, "\n") + "\n" }

func figuresOf(t *testing.T, runs map[string]stream, errs map[string]string) *figures {
	t.Helper()
	f := newFigures()
	for _, r := range plan(false) {
		s, ok := runs[r.benches[0]]
		if !ok {
			t.Fatalf("no canned output for %s", r.benches[0])
		}
		f.add(&ran{spec: r, info: RunInfo{Command: "go test", Error: errs[r.benches[0]]}, outcome: parseJSON(strings.NewReader(s.String()))})
	}
	return f
}

func canned() (map[string]stream, map[string]string) {
	var apply, snap, thr, lat, place, leader, worker stream
	// With -count, test2json attributes a benchmark's output to it on its
	// first repetition only, and may split result lines.
	apply = apply.event("run", "BenchmarkApply").out("BenchmarkApply", "BenchmarkApply\n")
	for rep := range 3 {
		for i, cmd := range []string{"SubmitDriver", "WorkerLost"} {
			name := "BenchmarkApply/" + cmd
			line := name + "-2         \t     100\t    " + []string{"10533", "1498094"}[i] + " ns/op\t    2701 B/op\t      37 allocs/op\n"
			if rep == 0 {
				apply = apply.bench(name, line)
			} else {
				apply = apply.out("", line[:len(name)+11]).out("", line[len(name)+11:])
			}
		}
	}
	snap = snap.bench("BenchmarkSnapshot100k").bench("BenchmarkRestore100k")
	for _, ns := range []string{"321486785", "300000000", "990000000"} {
		snap = snap.out("", "BenchmarkSnapshot100k-2 \t       1\t "+ns+" ns/op\t  67437229 bytes\n")
		snap = snap.out("", "BenchmarkRestore100k-2 \t       1\t1178728693 ns/op\t  67437229 bytes\n")
	}
	// A run that failed once out of three, and whose result lines a
	// master's log splits.
	const sticky64 = "BenchmarkSubmitThroughput/sticky-64"
	for i, v := range []string{"12000", "9000"} {
		thr = thr.bench(sticky64, sticky64+"-2 \t", "master m1: leader elected\n",
			"       1\t         0 ns/op\t      "+v+" submits/s\n")
		if i == 0 {
			thr = thr.bench(sticky64, "    throughput_bench_test.go:40: submit: connection refused\n",
				"        (after 3 tries)\n", "--- FAIL: "+sticky64+"\n").event("fail", sticky64)
		}
	}
	thr = thr.bench("BenchmarkSubmitThroughput/sticky-256", "BenchmarkSubmitThroughput/sticky-256-2 \t       1\t         0 ns/op\t      16000 submits/s\n").
		bench("BenchmarkSubmitThroughput/fanout-64", "BenchmarkSubmitThroughput/fanout-64-2 \t       1\t         0 ns/op\t      4000 submits/s\n").
		bench("BenchmarkSubmitThroughput/unbatched-fanout-64", "BenchmarkSubmitThroughput/unbatched-fanout-64-2 \t       1\t         0 ns/op\t      2000 submits/s\n")
	// BenchmarkSubmitLatencyAt2000 is not in the package: nothing runs.
	lat = lat.out("", "PASS\n")
	place = place.bench("BenchmarkPlacement", "    throughput_bench_test.go:99: placed 100 of 100000\n",
		"    throughput_bench_test.go:120: placement stalled: 99900 drivers waiting\n",
		"--- FAIL: BenchmarkPlacement\n").event("fail", "BenchmarkPlacement")
	spread := stream{}.bench("BenchmarkPlacementNamespaces", "BenchmarkPlacementNamespaces-2 \t       1\t         0 ns/op\t      7000 placements/s\t         0.1200 leader_cpu_ms/placement\n")
	converge := stream{}.event("run", "BenchmarkFairShareConvergence").
		bench("BenchmarkFairShareConvergence/no-preemption", "BenchmarkFairShareConvergence/no-preemption-2 \t       1\t         0 ns/op\t         0.1500 past_freed_s\t         8.000 run_s\t         4.200 to_90pct_s\n").
		bench("BenchmarkFairShareConvergence/preemption", "BenchmarkFairShareConvergence/preemption-2 \t       1\t         0 ns/op\t         2.000 grace_s\t         0.2000 interval_s\t         1.100 past_grace_s\t         3.100 to_90pct_s\n")
	leader = leader.bench("BenchmarkLeaderKillToAcceptedSubmit", "    failover_bench_test.go:25: leader SIGKILL to accepted submission over 20 trials: ...\n",
		"BenchmarkLeaderKillToAcceptedSubmit-2  \t", "2026/11/29 17:00:00 worker w1: lost master\n", "      20\t         0.8120 p50-s\t         1.100 worst-s\n")
	var hb stream
	for _, v := range []string{"0.2000 leader_cores\t        10.30 loss_s\t         0.3000", "0.3000 leader_cores\t        10.60 loss_s\t         0.6000"} {
		hb = hb.bench("BenchmarkHeartbeats", "BenchmarkHeartbeats-2 \t       1\t         0 ns/op\t         "+v+" loss_past_timeout_s\t        10.00 worker_timeout_s\n")
	}
	worker = worker.bench("BenchmarkWorkerKillToRelaunchRunning/local", "    failover_bench_test.go:110: needs root\n",
		"--- SKIP: BenchmarkWorkerKillToRelaunchRunning/local\n").event("skip", "BenchmarkWorkerKillToRelaunchRunning/local")
	both := stream{}.bench("BenchmarkLeaderAndWorkerKillToRelaunch", "BenchmarkLeaderAndWorkerKillToRelaunch-2 \t      20\t         2.700 p50-s\t         5.200 worst-s\n")
	cli := stream{}.bench("BenchmarkLeaderKillToCLISubmit", "BenchmarkLeaderKillToCLISubmit-2 \t      10\t         0.0600 p50-s\t         0.1500 worst-s\n")
	elections := stream{}.event("run", "BenchmarkFalseElections").
		bench("BenchmarkFalseElections/default", "BenchmarkFalseElections/default-2 \t       1\t         0 elections\t         0 elections/min\t 2.000 watch-min\n").
		bench("BenchmarkFalseElections/raft-300ms", "    elections_bench_test.go:185: raft-300ms: 3 elections in 2.0 min\n",
			"BenchmarkFalseElections/raft-300ms-2 \t       1\t         3.000 elections\t         1.500 elections/min\t 2.000 watch-min\n")
	pauses := stream{}.event("run", "BenchmarkLeaderPause")
	for _, c := range []struct{ timing, pause, share string }{
		{"default", "200ms", "0"}, {"default", "800ms", "1.000"}, {"raft-300ms", "200ms", "0.4000"}, {"raft-300ms", "800ms", "1.000"},
	} {
		name := "BenchmarkLeaderPause/" + c.timing + "/pause-" + c.pause
		pauses = pauses.bench(name, name+"-2 \t       5\t         "+c.share+" elections/trial\n")
	}
	accuracy, leaderCPU := scheduleRuns([][2]string{{"12", "40"}, {"14", "60"}}, "0", "996.2", "0.1375")
	events := stream{}.bench("BenchmarkEventDelivery", "BenchmarkEventDelivery-2 \t       1\t         3.5 p50-ms\t        68.9 p99-ms\n")
	var stage stream
	for _, ns := range []string{"400000000", "500000000", "800000000"} {
		stage = stage.bench("BenchmarkStageCold100MiB", "BenchmarkStageCold100MiB-2 \t       3\t "+ns+" ns/op\t 262.14 MB/s\n").
			bench("BenchmarkStageCacheHit100MiB", "BenchmarkStageCacheHit100MiB-2 \t       3\t  42000000 ns/op\t2496.61 MB/s\n")
	}
	uploads := stream{}.bench("BenchmarkStageUpload100MiB", "BenchmarkStageUpload100MiB-2 \t       1\t 270000000 ns/op\t       370.4 MiB/s\t         0.2700 s/stage\n").
		bench("BenchmarkUpload100MiB", "    uploads_bench_test.go:101: master m2: pushed\n", "--- FAIL: BenchmarkUpload100MiB\n").event("fail", "BenchmarkUpload100MiB")
	gc := stream{}.bench("BenchmarkUploadGC", "BenchmarkUploadGC-2 \t       1\t         0 ns/op\t 61.20 MiB/master_before_gc\t 6.400 MiB/master_after_gc\t 1.700 s_gc_after_last_kill\t 9.000 ms/upload+submit\n")
	launch := stream{}.event("run", "BenchmarkLaunch").out("BenchmarkLaunch", "BenchmarkLaunch\n").
		bench("BenchmarkLaunch/no-cgroup", "BenchmarkLaunch/no-cgroup-2 \t     100\t         12.5 median-ms\t        15.0 p90-ms\n").
		bench("BenchmarkLaunch/cgroup", "BenchmarkLaunch/cgroup-2 \t     100\t         14.0 median-ms\t        18.5 p90-ms\n")
	return map[string]stream{
			"BenchmarkApply": apply, "BenchmarkSnapshot100k": snap, "BenchmarkSubmitThroughput": thr,
			"BenchmarkSubmitLatencyAt2000": lat, "BenchmarkPlacement": place, "BenchmarkHeartbeats": hb,
			"BenchmarkPlacementNamespaces": spread, "BenchmarkFairShareConvergence": converge,
			"BenchmarkLeaderKillToAcceptedSubmit": leader, "BenchmarkWorkerKillToRelaunchRunning": worker,
			"BenchmarkLeaderAndWorkerKillToRelaunch": both, "BenchmarkLeaderKillToCLISubmit": cli,
			"BenchmarkEventDelivery": events, "BenchmarkOutput50MiB": output(),
			"BenchmarkStageCold100MiB": stage, "BenchmarkStageUpload100MiB": uploads, "BenchmarkUploadGC": gc,
			"BenchmarkLaunch": launch, "BenchmarkFalseElections": elections, "BenchmarkLeaderPause": pauses,
			"BenchmarkScheduleAccuracy": accuracy, "BenchmarkScheduleLeaderCPU": leaderCPU,
		}, map[string]string{
			"BenchmarkSubmitThroughput": "exit status 1", "BenchmarkPlacement": "exit status 1",
		}
}

// scheduleRuns are the canned outputs of BenchmarkScheduleAccuracy, a run
// per {p50_ms, p99_ms} of runs (the slowest slot 45 ms in the first,
// 300 ms after), each with unfired slots, and of
// BenchmarkScheduleLeaderCPU, one run of entries/s and leader_cores.
func scheduleRuns(runs [][2]string, unfired, entries, cores string) (accuracy, leaderCPU stream) {
	for i, r := range runs {
		worst := []string{"45", "300"}[min(i, 1)]
		accuracy = accuracy.bench("BenchmarkScheduleAccuracy", "BenchmarkScheduleAccuracy-2 \t       1\t        "+worst+" max_ms\t        "+r[0]+" p50_ms\t        "+r[1]+
			" p99_ms\t       600.0 slots\t         "+strconv.Itoa(1+2*i)+" submit_p50_ms\t         4.000 submit_p99_ms\t         "+unfired+" unfired\n")
	}
	leaderCPU = stream{}.bench("BenchmarkScheduleLeaderCPU", "    schedules_bench_test.go:155: 10000 schedules created in 14.786s\n",
		"BenchmarkScheduleLeaderCPU-2 \t       1\t         0 ns/op\t       "+entries+" entries/s\t         0.02589 idle_cores\t         "+cores+" leader_cores\t       182.2 leader_rss_mib\n")
	return accuracy, leaderCPU
}

// output is BenchmarkOutput50MiB's canned output, two runs.
func output() stream {
	s := stream{}.event("run", "BenchmarkOutput50MiB").out("BenchmarkOutput50MiB", "BenchmarkOutput50MiB\n")
	for rep, mbs := range []string{"1500", "1300"} {
		lines := map[string]string{
			"no-runner":    "BenchmarkOutput50MiB/no-runner-2 \t       3\t  40000000 ns/op\t1310.72 MB/s\t      " + mbs + " program-MB/s\n",
			"rotation-off": "BenchmarkOutput50MiB/rotation-off-2 \t       3\t  90000000 ns/op\t 582.54 MB/s\t      1200 program-MB/s\t         9.500 runner-peak-RSS-MiB\n",
			"rotation-on":  "BenchmarkOutput50MiB/rotation-on-2 \t       3\t  95000000 ns/op\t 551.88 MB/s\t      1100 program-MB/s\t         9.800 runner-peak-RSS-MiB\n",
		}
		for _, c := range []string{"no-runner", "rotation-off", "rotation-on"} {
			if rep == 0 {
				s = s.bench("BenchmarkOutput50MiB/"+c, lines[c])
			} else {
				s = s.out("", lines[c])
			}
		}
	}
	return s
}

func TestParseResults(t *testing.T) {
	output := []string{
		"=== RUN   BenchmarkSubs/a-1",
		"BenchmarkSubs/a-1",
		"    x_test.go:4: log 1",
		"BenchmarkSubs/a-1-2         \tnoise line",
		"       2\t     22283 ns/op\t      1234 placements/s",
		"BenchmarkSubs/a-2 \t 3\t 5 ns/op",
		"BenchmarkSubs/a-1 \t 7\t 1.5 p50-s\t 2 worst-s",
		"BenchmarkSubs/a-10-2 \t 3\t 5 ns/op",
		"99 stray 3 lines",
	}
	got := parseResults([]string{"BenchmarkSubs", "BenchmarkSubs/a", "BenchmarkSubs/a-1"}, output)
	want := map[string][]Result{
		"BenchmarkSubs/a-1": {
			{N: 2, Metrics: map[string]float64{"ns/op": 22283, "placements/s": 1234}},
			{N: 7, Metrics: map[string]float64{"p50-s": 1.5, "worst-s": 2}},
		},
		"BenchmarkSubs/a": {{N: 3, Metrics: map[string]float64{"ns/op": 5}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestRows(t *testing.T) {
	runs, errs := canned()
	f := figuresOf(t, runs, errs)
	want := []struct{ figure, status, measured string }{
		{"acknowledged submissions/s", met, "10,500/s (median of 2 runs, lowest 9,000/s); 1 of 3 runs of BenchmarkSubmitThroughput/sticky-64 failed: throughput_bench_test.go:40: submit: connection refused (after 3 tries)"},
		{"acknowledged submissions/s at 256 in flight", met, "16,000/s (1 run, lowest 16,000/s)"},
		{"acknowledged submissions/s through the CLI's fan-out", notMet, "4,000/s (1 run, lowest 4,000/s); one request per submission: 2,000/s"},
		{"submit latency", notMeasured, "BenchmarkSubmitLatencyAt2000 is not in ./tests/systest"},
		{"placements/s", notMeasured, "BenchmarkPlacement failed: throughput_bench_test.go:120: placement stalled: 99900 drivers waiting"},
		{"placements/s across 1,000 namespaces", met, "7,000/s (1 run, lowest 7,000/s), leader CPU 0.120 ms per placement"},
		{"starved namespace to 90 % of its fair share, with preemption", met, "3.10 s with a 2 s grace: 1.10 s past it (1 run, worst 1.10 s past)"},
		{"starved namespace to 90 % of its fair share, without preemption", "", "4.20 s (1 run, slowest 4.20 s), 0.15 s after as many of the other's drivers had ended"},
		{"leader SIGKILL to next accepted write, default Raft timeouts", met, "p50 0.81 s, worst 1.10 s over 20 trials"},
		{"worker SIGKILL to relaunched driver RUNNING (local)", notMeasured, "BenchmarkWorkerKillToRelaunchRunning/local skipped: failover_bench_test.go:110: needs root"},
		{"worker SIGKILL to relaunched driver RUNNING (lan)", notMeasured, "BenchmarkWorkerKillToRelaunchRunning is not in ./tests/systest"},
		{"leader and worker SIGKILL together to relaunched driver RUNNING", notMet, "p50 2.70 s, worst 5.20 s over 20 trials"},
		{"next leader ready to a CLI submit acknowledged", met, "p50 0.06 s, worst 0.15 s over 10 trials"},
		{"leader SIGSTOP for 200 ms, default Raft timeouts", met, "an election after 0 of 5 pauses"},
		{"event delivery latency", met, "p50 3.5 ms, p99 68.9 ms (1 run, worst p99 68.9 ms)"},
		{"launch of a unit in a cgroup", met, "median 14.0 ms with, 12.5 ms without: +1.5 ms; p90 18.5 ms with, 15.0 ms without (1 run)"},
		{"snapshot and restore", notMet, "snapshot 0.32 s (slowest run 0.99 s), restore 1.18 s (slowest run 1.18 s), 67.4 MB; median of 3 runs"},
		{"master memory", notMeasured, "BenchmarkPlacement failed: throughput_bench_test.go:120: placement stalled: 99900 drivers waiting"},
		{"5,000 simulated workers heartbeating", met, "leader 0.25 cores (median of 2 runs, highest 0.30); loss 10.45 s after the stop with a 10 s worker timeout (worst 0.60 s past it)"},
		{"schedule slot to committed driver", met, "p50 13.0 ms, p99 50.0 ms (median of 2 runs of 600 slots, worst p99 60.0 ms, slowest slot 300.0 ms); fired 2 ms after the slot at the median"},
		{"leader CPU for 10,000 @every 10s schedules", met, "leader 0.14 cores (1 run, highest 0.14) at 996 entries/s, 0.03 before the schedules; RSS 182 MiB"},
	}
	rows := targetRows(f)
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if !strings.HasPrefix(r.Figure, w.figure) || r.Status != w.status || r.Measured != w.measured {
			t.Errorf("row %d:\n got %q %q %q\nwant %q %q %q", i, r.Figure, r.Status, r.Measured, w.figure, w.status, w.measured)
		}
	}
	if s := rows[0].Stats[0]; !reflect.DeepEqual(s.Runs, []float64{12000, 9000}) || s.Median != 10500 {
		t.Errorf("throughput stat %+v", s)
	}

	arts := artifactRows(f)
	wantArts := []struct{ figure, status, measured string }{
		{"staging 100 MiB from loopback HTTP", "", "0.50 s, 200 MiB/s (median of 3 runs, slowest 0.80 s)"},
		{"staging a 100 MiB upload", "", "0.27 s, 370 MiB/s (1 run, slowest 0.27 s)"},
		{"staging 100 MiB from the cache", "", "0.04 s, 2,381 MiB/s (median of 3 runs, slowest 0.04 s)"},
		{"upload of 100 MiB", notMeasured, "BenchmarkUpload100MiB failed: uploads_bench_test.go:101: master m2: pushed"},
		{"masters' disk after 1,000 uploads", "", "61.2 MiB before, 6.4 MiB after, collected 1.7 s after the last kill (1 run)"},
	}
	if len(arts) != len(wantArts) {
		t.Fatalf("%d artifact rows, want %d: %+v", len(arts), len(wantArts), arts)
	}
	for i, w := range wantArts {
		r := arts[i]
		if !strings.HasPrefix(r.Figure, w.figure) || r.Status != w.status || r.Measured != w.measured {
			t.Errorf("artifact row %d:\n got %q %q %q\nwant %q %q %q", i, r.Figure, r.Status, r.Measured, w.figure, w.status, w.measured)
		}
	}

	timings := timingRows(f)
	wantTimings := []TimingRow{
		{Timing: "default", Elections: "0 in 2.0 min", Pauses: []PauseCell{{"200ms", "0 of 5"}, {"800ms", "5 of 5"}}},
		{Timing: "raft-300ms", Elections: "3 in 2.0 min", Pauses: []PauseCell{{"200ms", "2 of 5"}, {"800ms", "5 of 5"}}},
	}
	for i := range timings {
		timings[i].Stats = nil
	}
	if !reflect.DeepEqual(timings, wantTimings) {
		t.Errorf("timing rows %+v, want %+v", timings, wantTimings)
	}

	apply := applyRows(f)
	if len(apply) != 2 || apply[1].Command != "WorkerLost" || apply[1].Stats[0].Median != 1498094 || len(apply[1].Stats[0].Runs) != 3 {
		t.Fatalf("apply rows %+v", apply)
	}
	out := outputRows(f)
	if len(out) != 3 || out[0].Case != "no-runner" || len(out[0].Stats) != 1 || out[0].Stats[0].Median != 1400 ||
		out[2].Case != "rotation-on" || len(out[2].Stats) != 2 || out[2].Stats[1].Max != 9.8 {
		t.Fatalf("output rows %+v", out)
	}
	md := markdown(&Report{Date: "2026-11-29 17:00 UTC", Commit: "da5a3ee (dirty)", Command: "go run ./bench --quick", Quick: true,
		Machine: Machine{CPU: "AMD EPYC", Cores: 2, MemoryGiB: 23.4, Kernel: "Linux 6.1", Go: "go1.26.8 linux/amd64", Load: "3.10 2.50 1.20 at the start, 4.00 3.00 2.00 at the end"},
		Targets: rows, Artifacts: arts, Apply: apply, Output: out, Timings: timingRows(f), Runs: []RunInfo{{Command: "go test -bench '^(BenchmarkPlacement)$' ./systest", Seconds: 3, Error: "exit status 1"}}})
	for _, line := range []string{
		"| commit | da5a3ee (dirty) |",
		"| CPU | AMD EPYC, 2 cores |",
		"| load average (1, 5, 15 min) | 3.10 2.50 1.20 at the start, 4.00 3.00 2.00 at the end |",
		"| placements/s: SUBMITTED to RUNNING acknowledged by workers | 100,000 drivers waiting, 1,000 simulated workers started | >= 5,000/s (Nomad's C1M placed about 3,750/s) |  | BenchmarkPlacement failed: throughput_bench_test.go:120: placement stalled: 99900 drivers waiting | not measured |",
		"| WorkerLost | 1,498,094 | 1,498,094 | 37 | 2,701 |",
		"| no-runner | 1,400 | 1,300 | no runner |",
		"| timing | elections under load | after a 200ms pause | after a 800ms pause |",
		"| raft-300ms | 3 in 2.0 min | 2 of 5 | 5 of 5 |",
		"| rotation-on | 1,100 | 1,100 | 9.8 MiB |",
		"| staging 100 MiB from the cache | an entry of the cache copied into the unit's directory | 0.04 s, 2,381 MiB/s (median of 3 runs, slowest 0.04 s) |",
		"| `go test -bench '^(BenchmarkPlacement)$' ./systest` | 3 | exit status 1 |",
		"**A quick run",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// TestPlacementNamespacesRow: the placement row across namespaces gives
// the leader's CPU per placement without namespaces beside its own when
// BenchmarkPlacement measured it.
func TestPlacementNamespacesRow(t *testing.T) {
	runs, errs := canned()
	runs["BenchmarkPlacement"] = stream{}.bench("BenchmarkPlacement", "BenchmarkPlacement-2 \t       1\t         0 ns/op\t      9000 placements/s\t         0.0800 leader_cpu_ms/placement\n")
	delete(errs, "BenchmarkPlacement")
	rows := targetRows(figuresOf(t, runs, errs))
	i := slices.IndexFunc(rows, func(r Row) bool { return strings.HasPrefix(r.Figure, "placements/s across") })
	if i < 0 {
		t.Fatal("no row of placements across namespaces")
	}
	if want := "7,000/s (1 run, lowest 7,000/s), leader CPU 0.120 ms per placement (0.080 ms without namespaces)"; rows[i].Measured != want {
		t.Fatalf("placements across namespaces: %q, want %q", rows[i].Measured, want)
	}
}

// TestScheduleRows: the schedule rows fail their targets on a median
// past 100 ms or a p99 past 1 s, on any slot left without a driver, on
// 0.33 core or more, and on a run that fired short of 1,000 slots a
// second (a -short size, or a leader that could not keep up).
func TestScheduleRows(t *testing.T) {
	for _, c := range []struct {
		name                  string
		runs                  [][2]string
		unfired, entries, cpu string
		figure, status, text  string
	}{
		{"at the bounds", [][2]string{{"100", "1000"}}, "0", "900", "0.3299", "schedule slot", met, "p50 100.0 ms, p99 1000.0 ms (1 run of 600 slots"},
		{"median past", [][2]string{{"100.1", "200"}}, "0", "996", "0.1", "schedule slot", notMet, "p50 100.1 ms"},
		{"p99 past", [][2]string{{"20", "1000.1"}}, "0", "996", "0.1", "schedule slot", notMet, "p99 1000.1 ms"},
		{"a slot unfired", [][2]string{{"20", "40"}}, "3", "996", "0.1", "schedule slot", notMet, "; 3 slots without a driver"},
		{"cpu at the bound", [][2]string{{"20", "40"}}, "0", "996", "0.33", "leader CPU", notMet, "leader 0.33 cores"},
		{"cpu below", [][2]string{{"20", "40"}}, "0", "900", "0.3299", "leader CPU", met, "at 900 entries/s"},
		{"short of the rate", [][2]string{{"20", "40"}}, "0", "99.5", "0.04", "leader CPU", notMet, "at 100 entries/s, 0.03 before the schedules; RSS 182 MiB, short of 1,000 fires/s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs, errs := canned()
			runs["BenchmarkScheduleAccuracy"], runs["BenchmarkScheduleLeaderCPU"] = scheduleRuns(c.runs, c.unfired, c.entries, c.cpu)
			rows := targetRows(figuresOf(t, runs, errs))
			i := slices.IndexFunc(rows, func(r Row) bool { return strings.HasPrefix(r.Figure, c.figure) })
			if i < 0 {
				t.Fatalf("no row %q", c.figure)
			}
			if r := rows[i]; r.Status != c.status || !strings.Contains(r.Measured, c.text) {
				t.Fatalf("%s: %s %q, want %s and %q", r.Figure, r.Status, r.Measured, c.status, c.text)
			}
		})
	}
}

// TestMerge: a bench of the log output alone (--only) replaces the log
// output figures of an earlier report, and its run, naming its own date
// and commit; every other row and run stays as it was.
func TestMerge(t *testing.T) {
	runs, errs := canned()
	full := figuresOf(t, runs, errs)
	old := &Report{Date: "2026-11-29 17:00 UTC", Commit: "da5a3ee", Targets: targetRows(full), Apply: applyRows(full),
		Output: []OutputRow{{Case: "rotation-on", Reason: "an old reason"}},
		Runs:   []RunInfo{{Command: "go test ./fsm", Seconds: 9}, {Command: "go test ./runner", Seconds: 1, Error: "old"}}}
	only := newFigures()
	for _, r := range plan(false) {
		if slices.Contains(r.benches, "BenchmarkOutput50MiB") {
			only.add(&ran{spec: r, info: RunInfo{Command: "go test ./runner", Seconds: 30}, outcome: parseJSON(strings.NewReader(output().String()))})
		}
	}
	rep := &Report{Date: "2026-12-02 10:00 UTC", Commit: "abc1234", Targets: targetRows(only), Apply: applyRows(only), Output: outputRows(only),
		Runs: []RunInfo{{Command: "go test ./runner", Seconds: 30}}}
	m := merge(old, rep)
	if m.Date != old.Date || m.Commit != old.Commit || !reflect.DeepEqual(m.Apply, old.Apply) || len(m.Targets) != len(old.Targets) {
		t.Fatalf("merged header, targets or FSM rows changed: %+v", m)
	}
	// The rows kept gain the one measurement they show, dated by the
	// header of the report that holds them.
	for i, r := range m.Targets {
		o := old.Targets[i]
		if r.Figure != o.Figure || r.Status != o.Status || r.Measured != o.Measured || !reflect.DeepEqual(r.Stats, o.Stats) {
			t.Errorf("merged row %d = %+v, want %+v", i, r, o)
		}
		want := []Measurement{{Date: old.Date, Commit: old.Commit, Status: o.Status, Measured: o.Measured, Stats: o.Stats}}
		if o.Status == notMeasured {
			want = nil
		}
		if !reflect.DeepEqual(r.History, want) {
			t.Errorf("merged row %d's history %+v, want %+v", i, r.History, want)
		}
	}
	if !reflect.DeepEqual(m.Output, rep.Output) {
		t.Fatalf("merged output rows %+v, want %+v", m.Output, rep.Output)
	}
	want := []RunInfo{{Command: "go test ./fsm", Seconds: 9}, {Command: "go test ./runner", Seconds: 30, Date: rep.Date, Commit: rep.Commit}}
	if !reflect.DeepEqual(m.Runs, want) {
		t.Fatalf("merged runs %+v, want %+v", m.Runs, want)
	}
	md := markdown(m)
	for _, line := range []string{"| `go test ./fsm` | 9 |  |  |  |", "| `go test ./runner` | 30 |  | 2026-12-02 10:00 UTC | abc1234 |", "| rotation-off | 1,200 |"} {
		if !strings.Contains(md, line) {
			t.Errorf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// TestMergeArtifacts: a --only bench of artifact's staging benchmarks
// replaces the rows they make and keeps the earlier report's others, and
// adds its rows to a report that had none.
func TestMergeArtifacts(t *testing.T) {
	runs, errs := canned()
	full := artifactRows(figuresOf(t, runs, errs))
	var stage stream
	for range 3 {
		stage = stage.bench("BenchmarkStageCold100MiB", "BenchmarkStageCold100MiB-2 \t       3\t 250000000 ns/op\n").
			bench("BenchmarkStageCacheHit100MiB", "BenchmarkStageCacheHit100MiB-2 \t       3\t  50000000 ns/op\n")
	}
	only := newFigures()
	for _, r := range plan(false) {
		if slices.Contains(r.benches, "BenchmarkStageCold100MiB") {
			only.add(&ran{spec: r, info: RunInfo{Command: "go test ./artifact"}, outcome: parseJSON(strings.NewReader(stage.String()))})
		}
	}
	rep := &Report{Artifacts: artifactRows(only)}
	m := merge(&Report{Artifacts: full}, rep)
	if len(m.Artifacts) != len(full) {
		t.Fatalf("%d merged rows, want %d: %+v", len(m.Artifacts), len(full), m.Artifacts)
	}
	for i, r := range m.Artifacts {
		want := full[i]
		if i == 0 || i == 2 {
			want = rep.Artifacts[i]
		}
		if r.Figure != want.Figure || r.Status != want.Status || r.Measured != want.Measured || !reflect.DeepEqual(r.Stats, want.Stats) {
			t.Errorf("merged row %d = %+v, want %+v", i, r, want)
		}
		// The earlier figure stays, as the first of the row's history.
		if full[i].Status != notMeasured && (len(r.History) == 0 || r.History[0].Measured != full[i].Measured) {
			t.Errorf("merged row %d's history %+v does not start with %q", i, r.History, full[i].Measured)
		}
	}
	if m.Artifacts[0].Measured != "0.25 s, 400 MiB/s (median of 3 runs, slowest 0.25 s)" {
		t.Errorf("merged HTTP staging row %q", m.Artifacts[0].Measured)
	}
	if m := merge(&Report{}, rep); len(m.Artifacts) != 2 || m.Artifacts[1].Figure != rep.Artifacts[2].Figure {
		t.Errorf("merged into a report without artifact rows: %+v", m.Artifacts)
	}
}

// TestHistory: a bench over an earlier report continues each row's
// history, under a former name too, and the table shows the first figure
// beside the latest; a row a --only bench did not run keeps its figures,
// and says so when its target has changed since; a row no longer made is
// retired with its figure.
func TestHistory(t *testing.T) {
	load := "6.10 4.91 2.25 at the start, 7.62 5.45 2.65 at the end"
	old := &Report{Date: "2026-11-29 17:48 UTC", Commit: "4099a6d", Machine: Machine{Load: "1.00 1.00 1.00 at the start, 2.00 1.00 1.00 at the end"},
		Targets: []Row{
			{Figure: "leader SIGKILL to next accepted write (raft-1s-default)", Target: "p50 <= 1.5 s, worst <= 3 s", Status: notMet,
				Measured: "p50 1.75 s, worst 2.11 s over 20 trials", Stats: []Stat{{Benchmark: "BenchmarkLeaderKillToAcceptedSubmit/raft-1s-default", Unit: "p50-s"}}},
			{Figure: "leader SIGKILL to next accepted write (raft-500ms)", Status: met, Measured: "p50 0.90 s"},
			{Figure: "snapshot and restore, 100,000 drivers", Target: "<= 1 s each", Status: met, Measured: "snapshot 0.28 s, restore 0.90 s",
				Stats: []Stat{{Benchmark: "BenchmarkSnapshot100k", Unit: "ns/op"}}},
		},
		Runs: []RunInfo{{Command: "go test -bench '^(BenchmarkSnapshot100k|BenchmarkRestore100k)$' ./fsm", Date: "2026-12-01 10:00 UTC", Commit: "aaaaaaa"}}}
	runs, _ := canned()
	f := newFigures()
	for _, r := range plan(false) {
		if slices.Contains(r.benches, "BenchmarkLeaderKillToAcceptedSubmit") {
			f.add(&ran{spec: r, info: RunInfo{Command: "go test ./systest"}, outcome: parseJSON(strings.NewReader(runs["BenchmarkLeaderKillToAcceptedSubmit"].String()))})
		}
	}
	rep := &Report{Date: "2026-12-02 06:30 UTC", Commit: "bbbbbbb", Machine: Machine{Load: load}, Targets: targetRows(f)}
	stamp(rep.Targets, rep)
	m := merge(old, rep)
	if len(m.Targets) != 2 {
		t.Fatalf("merged rows %+v, want the leader's and the snapshot's", m.Targets)
	}
	if len(m.Retired) != 1 || m.Retired[0].Figure != old.Targets[1].Figure || len(m.Retired[0].History) != 1 {
		t.Errorf("retired rows %+v, want the raft-500ms row with its figure", m.Retired)
	}
	leader, snap := m.Targets[0], m.Targets[1]
	wantLeader := []Measurement{
		{Date: old.Date, Commit: old.Commit, Load: old.Machine.Load, Status: notMet, Measured: "p50 1.75 s, worst 2.11 s over 20 trials", Stats: old.Targets[0].Stats},
		{Date: rep.Date, Commit: rep.Commit, Load: load, Status: met, Measured: "p50 0.81 s, worst 1.10 s over 20 trials", Stats: leader.Stats},
	}
	if leader.Figure != "leader SIGKILL to next accepted write, default Raft timeouts" || !reflect.DeepEqual(leader.History, wantLeader) {
		t.Errorf("leader row %+v, want history %+v", leader, wantLeader)
	}
	if snap.Target != "<= 0.5 s each" || snap.Status != "met against the earlier target <= 1 s each" || snap.Measured != old.Targets[2].Measured ||
		len(snap.History) != 1 || snap.History[0].Date != "2026-12-01 10:00 UTC" || snap.History[0].Commit != "aaaaaaa" {
		t.Errorf("snapshot row %+v", snap)
	}
	md := markdown(m)
	for _, line := range []string{
		"| leader SIGKILL to next accepted write, default Raft timeouts | 20 trials | p50 <= 1 s, worst <= 1.5 s (Spark with ZooKeeper: 1-2 minutes) | " +
			"p50 1.75 s, worst 2.11 s over 20 trials (2026-11-29 17:48 UTC, 4099a6d, load 1.00-2.00) | " +
			"p50 0.81 s, worst 1.10 s over 20 trials (2026-12-02 06:30 UTC, bbbbbbb, load 6.10-7.62) | met |",
		"| snapshot and restore, 100,000 drivers | time and bytes | <= 0.5 s each |  | snapshot 0.28 s, restore 0.90 s (2026-12-01 10:00 UTC, aaaaaaa, load unknown) | met against the earlier target <= 1 s each |",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// TestBuildFailure: a run that does not build leaves its rows not measured,
// with the compiler's first error.
func TestBuildFailure(t *testing.T) {
	runs, errs := canned()
	runs["BenchmarkApply"] = stream{
		`{"ImportPath":"x/fsm [x/fsm.test]","Action":"build-output","Output":"# x/fsm [x/fsm.test]\n"}`,
		`{"ImportPath":"x/fsm [x/fsm.test]","Action":"build-output","Output":"fsm/bench_test.go:3:33: undefined: thing\n"}`,
		`{"Action":"output","Package":"x/fsm","Output":"FAIL\tx/fsm [build failed]\n"}`,
	}
	errs["BenchmarkApply"] = "exit status 1: " + firstProblem(parseJSON(strings.NewReader(runs["BenchmarkApply"].String())).other)
	apply := applyRows(figuresOf(t, runs, errs))
	want := []ApplyRow{{Command: "BenchmarkApply", Reason: "go test: exit status 1: fsm/bench_test.go:3:33: undefined: thing"}}
	if !reflect.DeepEqual(apply, want) {
		t.Errorf("got %+v, want %+v", apply, want)
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.6: "1,234,568", -4200: "-4,200"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFirstProblem(t *testing.T) {
	for _, c := range []struct {
		out  []string
		want string
	}{
		{[]string{"# ./nonexist", "stat /x/nonexist: directory not found", "FAIL\t./nonexist [setup failed]"}, "stat /x/nonexist: directory not found"},
		{[]string{"goos: linux", "BenchmarkApply/X-2 \t", "      20\t 3582 ns/op", "panic: test timed out after 1m0s", "FAIL"}, "panic: test timed out after 1m0s"},
		{[]string{"PASS", "ok  \tx/fsm\t1.3s"}, ""},
	} {
		if got := firstProblem(c.out); got != c.want {
			t.Errorf("firstProblem(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}
