package main

import (
	"bufio"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Result is one benchmark result line: the iterations and every metric
// by unit, custom units (b.ReportMetric) included.
type Result struct {
	N       int64
	Metrics map[string]float64
}

// A testLog is what one go test run printed for one benchmark while it was
// the one running, over all its -count repetitions.
type testLog struct {
	text    strings.Builder // output, partial lines joined
	failed  int             // repetitions that failed
	skipped bool
}

// An outcome is what one `go test -json` run reported.
type outcome struct {
	tests   map[string]*testLog // by benchmark name, as in the JSON Test field
	order   []string            // benchmark names in the order they started
	results map[string][]Result // by benchmark name, one per repetition
	// other is output not attributed to a benchmark: build errors, panics,
	// the package's PASS or FAIL.
	other []string
}

// event is the part of a test2json event the runner reads.
type event struct {
	Action string
	Test   string
	Output string
}

// parseJSON reads the output of `go test -json -bench ...`. Lines that are
// not JSON (go command errors) count as unattributed output.
func parseJSON(r io.Reader) *outcome {
	o := &outcome{tests: map[string]*testLog{}}
	// Result lines are read from all output in order: test2json attributes
	// a benchmark's result to it only on its first repetition.
	var all strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			o.other = append(o.other, sc.Text())
			all.WriteString(sc.Text() + "\n")
			continue
		}
		all.WriteString(e.Output)
		if e.Test == "" {
			if e.Output != "" {
				o.other = append(o.other, strings.TrimRight(e.Output, "\n"))
			}
			continue
		}
		t := o.tests[e.Test]
		if t == nil {
			t = &testLog{}
			o.tests[e.Test] = t
			o.order = append(o.order, e.Test)
		}
		switch e.Action {
		case "output":
			t.text.WriteString(e.Output)
		case "fail":
			t.failed++
		case "skip":
			t.skipped = true
		}
	}
	o.results = parseResults(o.order, strings.Split(all.String(), "\n"))
	return o
}

func lines(t *testLog) []string { return strings.Split(t.text.String(), "\n") }

// procsSuffix is the -GOMAXPROCS suffix go test adds to a benchmark's name
// on its result line.
var procsSuffix = regexp.MustCompile(`^-\d+`)

// parseResults finds the result lines of the named benchmarks in output. A
// result line starts with the name (plus the procs suffix); output the
// benchmark's own processes print may split it, leaving the name on one
// line (alone or followed by that output) and the figures at the start of
// a later one.
func parseResults(names []string, output []string) map[string][]Result {
	names = slices.Clone(names)
	// Longest first, so that Benchmark/a-1 is not taken for Benchmark/a.
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	out := map[string][]Result{}
	pending := ""
	for _, line := range output {
		name, rest, ok := resultName(line, names)
		if !ok {
			if r, ok := parseMetrics(line); ok && pending != "" {
				out[pending] = append(out[pending], r)
				pending = ""
			}
			continue
		}
		pending = ""
		if r, ok := parseMetrics(rest); ok {
			out[name] = append(out[name], r)
		} else {
			pending = name // what follows the name is another process's output
		}
	}
	return out
}

// resultName returns the benchmark a line starts with and the rest of the
// line after the name and its procs suffix.
func resultName(line string, names []string) (name, rest string, ok bool) {
	for _, name := range names {
		if rest, ok := strings.CutPrefix(line, name); ok {
			rest = procsSuffix.ReplaceAllString(rest, "")
			if rest == "" || rest[0] == ' ' || rest[0] == '\t' {
				return name, rest, true
			}
		}
	}
	return "", "", false
}

// parseMetrics parses the figures of a result line: the iterations, then
// value and unit pairs.
func parseMetrics(s string) (Result, bool) {
	f := strings.Fields(s)
	if len(f) < 3 || len(f)%2 == 0 {
		return Result{}, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Result{}, false
	}
	r := Result{N: n, Metrics: map[string]float64{}}
	for i := 1; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		r.Metrics[f[i+1]] = v
	}
	return r, true
}

// logLine matches the first line of a t.Log message: "    file.go:12: text".
var logLine = regexp.MustCompile(`^ {4}\S+\.go:\d+: `)

// lastLog returns the benchmark's last log message, its continuation lines
// joined: for a failed or skipped benchmark, why.
func lastLog(t *testLog) string {
	var msg []string
	inMsg := false
	for _, l := range lines(t) {
		switch {
		case logLine.MatchString(l):
			msg, inMsg = []string{strings.TrimSpace(l)}, true
		case inMsg && strings.HasPrefix(l, "        "):
			msg = append(msg, strings.TrimSpace(l))
		default:
			inMsg = false
		}
	}
	return strings.Join(msg, " ")
}

// compileError matches a compiler's error line.
var compileError = regexp.MustCompile(`^\S+\.go:\d+:\d+: `)

// firstProblem returns the line of unattributed output that best explains
// a failed run: a panic, a compiler error, or else the first line that is
// not part of go test's usual output (a go command error).
func firstProblem(out []string) string {
	for _, l := range out {
		if strings.HasPrefix(l, "panic: ") {
			return l
		}
	}
	for _, l := range out {
		if compileError.MatchString(l) {
			return l
		}
	}
	usual := []string{"#", "FAIL", "PASS", "ok ", "exit status", "goos:", "goarch:", "pkg:", "cpu:", "Benchmark", "---", "===", "    "}
	for _, l := range out {
		if _, isResult := parseMetrics(l); isResult || strings.TrimSpace(l) == "" ||
			slices.ContainsFunc(usual, func(p string) bool { return strings.HasPrefix(l, p) }) {
			continue
		}
		return strings.TrimSpace(l)
	}
	return ""
}
