// Package report turns a run's history into the files a person reads after
// a chaos run: timeline.html (every operation as a bar, per client
// process, under the fault windows), plot.svg (latency and throughput over
// time, under the same windows) and the Stats summary behind results.json
// and the run's one-line verdict.
//
// All three take the raw event list (history.Op) rather than a checker's
// view of it, so they can be produced for a crashed or truncated run too:
// an invoke without completion and a fault that never stopped are drawn,
// not dropped.
package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/drover-project/drover/jepsen/history"
)

// span is one client operation, from its invoke to its completion.
type span struct {
	invoke *history.Op
	done   *history.Op // nil: the run ended before the op completed
	start  int64       // invoke time, Unix ns
	end    int64       // completion time, or the history's end if pending
}

// outcome is the completion type, or "" for an op that never completed.
func (s span) outcome() history.Type {
	if s.done == nil {
		return ""
	}
	return s.done.Type
}

// latency is the op's duration in nanoseconds (up to the history's end for
// a pending op).
func (s span) latency() int64 { return s.end - s.start }

// answer is the most informative event of the op: the completion carries
// what the server said (a submit's Driver, a read's State), and is a copy
// of the invoke's inputs otherwise.
func (s span) answer() *history.Op {
	if s.done != nil {
		return s.done
	}
	return s.invoke
}

// bounds returns the times of the first and last events. Events are
// appended in time order, but the min/max scan costs nothing and keeps a
// hand-edited or merged history from producing negative offsets.
func bounds(ops []history.Op) (first, last int64) {
	for i, op := range ops {
		if i == 0 || op.Time < first {
			first = op.Time
		}
		if i == 0 || op.Time > last {
			last = op.Time
		}
	}
	return first, last
}

// spans pairs the client ops; last closes the ones that never completed.
func spans(ops []history.Op, last int64) []span {
	pairs := history.Pairs(ops)
	out := make([]span, 0, len(pairs))
	for _, p := range pairs {
		s := span{invoke: p[0], done: p[1], start: p[0].Time, end: last}
		if p[1] != nil {
			s.end = p[1].Time
		}
		out = append(out, s)
	}
	return out
}

// fault is a nemesis window prepared for drawing.
type fault struct {
	history.Window
	stopped bool // false: the run ended with the fault still active
	level   int  // label row, so overlapping windows' labels do not collide
	color   int  // index into the fault palette, one per fault name
}

// label names the fault and what it hit, e.g. "kill-leader n1".
func (f fault) label() string {
	s := f.Fault
	if s == "" {
		s = "fault"
	}
	if len(f.Targets) > 0 {
		s += " " + strings.Join(f.Targets, ",")
	}
	if !f.stopped {
		s += " (not stopped)"
	}
	return s
}

// faults returns the fault windows of ops (unclosed ones end at last),
// with label rows assigned greedily: each window takes the lowest row whose
// previous window has ended, which is optimal for intervals.
func faults(ops []history.Op, last int64) []fault {
	stopped := map[int]bool{}
	for _, op := range ops {
		if op.Process == history.NemesisProcess && op.F == history.FStop {
			stopped[op.Window] = true
		}
	}
	ws := history.Windows(ops, last)
	out := make([]fault, len(ws))
	colors := map[string]int{}
	var rowEnd []int64 // per label row, the stop of its latest window
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ws[order[a]].Start < ws[order[b]].Start })
	for _, i := range order {
		w := ws[i]
		c, ok := colors[w.Fault]
		if !ok {
			c = len(colors)
			colors[w.Fault] = c
		}
		level := len(rowEnd)
		for r, end := range rowEnd {
			if end <= w.Start {
				level = r
				break
			}
		}
		if level == len(rowEnd) {
			rowEnd = append(rowEnd, 0)
		}
		rowEnd[level] = w.Stop
		out[i] = fault{Window: w, stopped: stopped[w.ID], level: level, color: c}
	}
	return out
}

// levels is the number of label rows faults need.
func levels(fs []fault) int {
	n := 0
	for _, f := range fs {
		n = max(n, f.level+1)
	}
	return n
}

// faultPalette colours fault windows by fault name; light enough to shade
// the operations drawn on top of them.
var faultPalette = [][3]uint8{
	{31, 119, 180},  // blue
	{148, 103, 189}, // purple
	{140, 86, 75},   // brown
	{227, 119, 194}, // pink
	{23, 190, 207},  // cyan
	{188, 189, 34},  // olive
	{127, 127, 127}, // grey
	{255, 187, 120}, // light orange
}

func paletteColor(i int) [3]uint8 { return faultPalette[i%len(faultPalette)] }

// seconds converts a nanosecond duration to seconds.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// millis converts a nanosecond duration to milliseconds.
func millis(ns int64) float64 { return float64(ns) / 1e6 }

// fOrder sorts operation functions with the suite's own first (submit,
// read, kill), then any others alphabetically, so legends and tables are
// stable from run to run.
func fOrder(fs []string) {
	rank := func(f string) int {
		switch f {
		case history.FSubmit:
			return 0
		case history.FRead:
			return 1
		case history.FKill:
			return 2
		}
		return 3
	}
	sort.Slice(fs, func(i, j int) bool {
		ri, rj := rank(fs[i]), rank(fs[j])
		if ri != rj {
			return ri < rj
		}
		return fs[i] < fs[j]
	})
}

// fmtMillis formats a latency compactly for titles and tables.
func fmtMillis(ns int64) string {
	ms := millis(ns)
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.2fs", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.2fms", ms)
	}
}
