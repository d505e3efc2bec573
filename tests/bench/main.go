// Command bench measures Drover against its performance targets and writes
// docs/benchmarks.md and docs/benchmarks.json:
//
//	go run ./tests/bench [--quick] [--out docs]
//	go run ./tests/bench --render    # benchmarks.md again from benchmarks.json
//
//	go run ./tests/bench --only BenchmarkOutput50MiB   # those runs alone, merged into the report
//
// It runs the Go benchmarks of ./fsm, ./worker/runner, ./worker/artifact and ./tests/systest, one `go test -json
// -bench` subprocess per group, each repeated (-count) or made of many
// trials (-benchtime Nx), and judges each figure on its median and tail. A
// benchmark that is missing, fails or is skipped leaves its row "not
// measured" with the reason; only an unwritable report makes bench fail.
// Run it from the module root.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// run is one go test invocation: benchmarks of one package matched
// exactly, with their -benchtime and -count.
type run struct {
	pkg       string
	benches   []string
	benchtime string
	count     int
	short     bool          // -short: systest's small sizes
	limit     time.Duration // killed after this long
}

// plan returns the runs, with the targets' trial counts and sizes or, quick,
// fewer trials and systest's -short sizes.
func plan(quick bool) []run {
	pick := func(full, smoke string) string {
		if quick {
			return smoke
		}
		return full
	}
	n := func(full, smoke int) int {
		if quick {
			return smoke
		}
		return full
	}
	// The process-level benchmarks of systest do a whole measurement
	// per iteration: the throughput ones once (1x) per run, repeated with
	// -count; the failover ones one trial per iteration, 20 in one run.
	cluster := func(bench, benchtime string, count int, limit time.Duration) run {
		return run{pkg: "./tests/systest", benches: []string{bench}, benchtime: benchtime, count: count, short: quick, limit: limit}
	}
	return []run{
		// A fixed count, not a time: each command is prepared untimed on
		// fresh tables, which a 1s benchtime would multiply many times.
		{pkg: "./fsm", benches: []string{"BenchmarkApply"}, benchtime: pick("1000x", "100x"), count: n(5, 3), limit: 20 * time.Minute},
		{pkg: "./fsm", benches: []string{"BenchmarkSnapshot100k", "BenchmarkRestore100k"}, benchtime: pick("3x", "1x"), count: n(3, 2), limit: 20 * time.Minute},
		cluster("BenchmarkSubmitThroughput", "1x", n(3, 1), 30*time.Minute),
		cluster("BenchmarkSubmitLatencyAt2000", "1x", n(3, 1), 30*time.Minute),
		cluster("BenchmarkPlacement", "1x", n(2, 1), 60*time.Minute),
		cluster("BenchmarkPlacementNamespaces", "1x", n(2, 1), 60*time.Minute),
		cluster("BenchmarkFairShareConvergence", "1x", n(3, 1), 20*time.Minute),
		cluster("BenchmarkHeartbeats", "1x", n(3, 1), 30*time.Minute),
		cluster("BenchmarkLeaderKillToAcceptedSubmit", pick("20x", "3x"), 1, 45*time.Minute),
		cluster("BenchmarkWorkerKillToRelaunchRunning", pick("20x", "3x"), 1, 45*time.Minute),
		cluster("BenchmarkLeaderAndWorkerKillToRelaunch", pick("20x", "3x"), 1, 45*time.Minute),
		cluster("BenchmarkLeaderKillToCLISubmit", pick("10x", "3x"), 1, 30*time.Minute),
		// What the Raft timeouts cost: one watch under load per timing,
		// and trials of leader pauses per timing and pause length.
		cluster("BenchmarkFalseElections", "1x", 1, 45*time.Minute),
		cluster("BenchmarkLeaderPause", pick("5x", "1x"), 1, 30*time.Minute),
		cluster("BenchmarkEventDelivery", "1x", n(3, 1), 30*time.Minute),
		// Each iteration is a fresh cluster firing for 30 s.
		cluster("BenchmarkScheduleAccuracy", "1x", n(3, 1), 20*time.Minute),
		cluster("BenchmarkScheduleLeaderCPU", "1x", n(3, 1), 30*time.Minute),
		// Each iteration writes 50 MiB three ways; -count gives the spread.
		{pkg: "./worker/runner", benches: []string{"BenchmarkOutput50MiB"}, benchtime: "3x", count: n(10, 1), limit: 20 * time.Minute},
		// The staging and upload figures have no target; they are
		// reported beside the targets.
		{pkg: "./worker/artifact", benches: []string{"BenchmarkStageCold100MiB", "BenchmarkStageCacheHit100MiB"}, benchtime: pick("3x", "1x"), count: n(3, 1), limit: 20 * time.Minute},
		{pkg: "./tests/systest", benches: []string{"BenchmarkStageUpload100MiB", "BenchmarkUpload100MiB"}, benchtime: "1x", count: n(3, 1), short: quick, limit: 20 * time.Minute},
		cluster("BenchmarkUploadGC", "1x", 1, 30*time.Minute),
		// Each iteration is one launch; the medians are over the 100.
		{pkg: "./worker/runner", benches: []string{"BenchmarkLaunch"}, benchtime: pick("100x", "20x"), count: n(3, 1), limit: 10 * time.Minute},
	}
}

// args are the go test arguments of r.
func (r run) args() []string {
	args := []string{"test", "-json", "-run", "^$", "-bench", "^(" + strings.Join(r.benches, "|") + ")$",
		"-benchtime", r.benchtime, "-count", strconv.Itoa(r.count)}
	if r.short {
		args = append(args, "-short")
	}
	return append(args, r.pkg)
}

func main() {
	quick := flag.Bool("quick", false, "fewer trials: a smoke run, not figures to quote")
	out := flag.String("out", "docs", "the `directory` to write benchmarks.md and benchmarks.json into")
	render := flag.Bool("render", false, "measure nothing: write benchmarks.md again from the benchmarks.json in --out")
	only := flag.String("only", "", "run only the runs of the benchmarks this `regexp` matches, and merge their figures into the benchmarks.json in --out")
	flag.Parse()
	var err error
	if *render {
		err = rerender(*out)
	} else {
		err = bench(*quick, *out, *only)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(quick bool, outDir, only string) error {
	mdPath, jsonPath := filepath.Join(outDir, "benchmarks.md"), filepath.Join(outDir, "benchmarks.json")
	runs := plan(quick)
	// old is the report a --only bench merges into, history the one a
	// whole bench takes the rows' earlier figures from.
	var old, history *Report
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("--only: %w", err)
		}
		runs = slices.DeleteFunc(runs, func(r run) bool { return !slices.ContainsFunc(r.benches, re.MatchString) })
		if len(runs) == 0 {
			return fmt.Errorf("--only %q matches no benchmark", only)
		}
		if old, err = readReport(jsonPath); err != nil {
			return err
		}
		if old.Quick != quick {
			return fmt.Errorf("--only merges into a report of the same kind: %s is quick=%v", jsonPath, old.Quick)
		}
	} else if prev, err := readReport(jsonPath); err == nil && prev.Quick == quick {
		// A whole new report still continues the rows' histories.
		history = prev
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	rep := &Report{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Commit:  commit(mdPath, jsonPath),
		Command: command(),
		Quick:   quick,
		Machine: machine(),
	}
	f := newFigures()
	// Other processes' load skews every figure; the report says how busy
	// the machine was.
	load := loadAverage()
	for _, r := range runs {
		f.add(execute(r))
	}
	rep.Machine.Load = load + " at the start, " + loadAverage() + " at the end"
	rep.Targets, rep.Artifacts, rep.Apply, rep.Output = targetRows(f), artifactRows(f), applyRows(f), outputRows(f)
	rep.Timings = timingRows(f)
	stamp(rep.Targets, rep)
	stamp(rep.Artifacts, rep)
	for _, r := range f.runs {
		rep.Runs = append(rep.Runs, r.info)
	}
	switch {
	case old != nil:
		rep = merge(old, rep)
	case history != nil:
		continueRows(rep, history, rep)
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, js.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(mdPath, []byte(markdown(rep)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s and %s\n", mdPath, jsonPath)
	return nil
}

// readReport reads a benchmarks.json.
func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// rerender writes benchmarks.md again from benchmarks.json in outDir, so a
// change to the report's text needs no new measurements.
func rerender(outDir string) error {
	rep, err := readReport(filepath.Join(outDir, "benchmarks.json"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, "benchmarks.md"), []byte(markdown(rep)), 0o644)
}

// goCmd is the go command the runs use: $GO, or go on the PATH.
func goCmd() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// execute runs r, killing its process group if it outlives r.limit.
func execute(r run) *ran {
	res := &ran{spec: r, info: RunInfo{Command: "go " + strings.Join(quoted(r.args()), " ")}}
	fmt.Fprintf(os.Stderr, "bench: %s\n", res.info.Command)
	ctx, cancel := context.WithTimeout(context.Background(), r.limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd(), r.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res.info.Seconds = time.Since(start).Seconds()
	res.outcome = parseJSON(&stdout)
	res.outcome.other = append(res.outcome.other, strings.Split(stderr.String(), "\n")...)
	switch {
	case ctx.Err() != nil:
		res.info.Error = fmt.Sprintf("killed after %s", r.limit)
	case err != nil:
		res.info.Error = err.Error()
	}
	if p := firstProblem(res.outcome.other); err != nil && p != "" {
		res.info.Error += ": " + p
	}
	fmt.Fprintf(os.Stderr, "bench: took %.0fs %s\n", res.info.Seconds, res.info.Error)
	return res
}

// quoted shell-quotes the arguments that need it.
func quoted(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " ^$|()*?'\"\\") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return out
}

// command is how bench was started, as a user would type it.
func command() string {
	if os.Getenv("MAKELEVEL") != "" && len(os.Args) == 1 {
		return "make bench"
	}
	return strings.Join(append([]string{"go", "run", "./tests/bench"}, quoted(os.Args[1:])...), " ")
}

// commit is the short hash of HEAD, with " (dirty)" when the tree has
// changes other than the report files themselves.
func commit(reports ...string) string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	args := []string{"status", "--porcelain", "--", "."}
	for _, r := range reports {
		args = append(args, ":(exclude)"+r)
	}
	status, err := exec.Command("git", args...).Output()
	c := strings.TrimSpace(string(head))
	if err != nil || len(bytes.TrimSpace(status)) > 0 {
		c += " (dirty)"
	}
	return c
}

// machine describes this machine from /proc and the go command.
func machine() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), Kernel: "unknown", Go: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = procField(string(b), "model name", m.CPU)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(procField(string(b), "MemTotal", "0"), " kB"), 64)
		m.MemoryGiB = kb / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := exec.Command(goCmd(), "version").Output(); err == nil {
		m.Go = strings.TrimPrefix(strings.TrimSpace(string(b)), "go version ")
	}
	return m
}

// loadAverage is the 1-, 5- and 15-minute load averages of /proc/loadavg,
// or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// procField returns the value of the first "key: value" line of a /proc
// file, or def.
func procField(text, key, def string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return def
}
