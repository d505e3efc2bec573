package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/drover-project/drover/jepsen/history"
)

// Counts tallies client operations by outcome.
type Counts struct {
	Invoked int `json:"invoked"`
	OK      int `json:"ok"`
	Fail    int `json:"fail"`
	Info    int `json:"info"`
	// Pending ops were invoked but never completed (the run ended first).
	Pending int `json:"pending"`
}

func (c *Counts) add(t history.Type) {
	c.Invoked++
	switch t {
	case history.OK:
		c.OK++
	case history.Fail:
		c.Fail++
	case history.Info:
		c.Info++
	default:
		c.Pending++
	}
}

// Latency summarises the latencies of successful ops, in milliseconds.
// Percentiles use the nearest-rank method (the smallest latency with at
// least p% of the values at or below it), so every figure is a latency
// that really happened. All zero when N is zero.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// FStats is the summary of one operation function (submit, read, kill).
type FStats struct {
	Counts
	// Latency covers ok ops only: failed and indeterminate ops often end
	// at a timeout, which would measure the client, not the cluster.
	Latency Latency `json:"latency"`
}

// Stats summarises a history, for results.json and the run's printed line.
type Stats struct {
	// DurationS is the time from the first to the last event, in seconds.
	DurationS float64 `json:"duration_s"`
	// Processes is the number of distinct client processes.
	Processes int `json:"processes"`
	// Faults is the number of fault windows the nemesis opened.
	Faults int `json:"faults"`
	// Total counts all client ops; ByF splits them by function.
	Total Counts            `json:"total"`
	ByF   map[string]FStats `json:"by_f"`
	// OKPerS is the ok ops per second over the whole duration.
	OKPerS float64 `json:"ok_per_s"`
}

// Summarize counts the client ops of a history by function and outcome and
// summarises the latencies of the ok ones.
func Summarize(ops []history.Op) Stats {
	first, last := bounds(ops)
	st := Stats{DurationS: seconds(last - first), ByF: map[string]FStats{}}
	lat := map[string][]int64{}
	procs := map[int]bool{}
	for _, s := range spans(ops, last) {
		f := s.invoke.F
		fs := st.ByF[f]
		fs.add(s.outcome())
		st.ByF[f] = fs
		st.Total.add(s.outcome())
		procs[s.invoke.Process] = true
		if s.outcome() == history.OK {
			lat[f] = append(lat[f], s.latency())
		}
	}
	for f, ls := range lat {
		fs := st.ByF[f]
		fs.Latency = summarizeLatency(ls)
		st.ByF[f] = fs
	}
	st.Processes = len(procs)
	for _, op := range ops {
		if op.Process == history.NemesisProcess && op.F == history.FStart {
			st.Faults++
		}
	}
	if st.DurationS > 0 {
		st.OKPerS = float64(st.Total.OK) / st.DurationS
	}
	return st
}

// summarizeLatency sorts ls in place and takes its nearest-rank
// percentiles.
func summarizeLatency(ls []int64) Latency {
	if len(ls) == 0 {
		return Latency{}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(ls)))) - 1
		return millis(ls[max(i, 0)])
	}
	return Latency{N: len(ls), P50: rank(50), P95: rank(95), P99: rank(99), Max: millis(ls[len(ls)-1])}
}

// String is the one-line summary printed at the end of a run, e.g.
// "12.0s, 4 procs, 3 faults: 120 ops (ok 100, fail 5, info 10, pending 5),
// 8.3 ok/s; read p50/p95/p99/max 2.1/9.0/15/15ms; ...".
func (s Stats) String() string {
	var b strings.Builder
	t := s.Total
	fmt.Fprintf(&b, "%.1fs, %d procs, %d faults: %d ops (ok %d, fail %d, info %d, pending %d), %.1f ok/s",
		s.DurationS, s.Processes, s.Faults, t.Invoked, t.OK, t.Fail, t.Info, t.Pending, s.OKPerS)
	fs := make([]string, 0, len(s.ByF))
	for f := range s.ByF {
		fs = append(fs, f)
	}
	fOrder(fs)
	for _, f := range fs {
		l := s.ByF[f].Latency
		if l.N == 0 {
			fmt.Fprintf(&b, "; %s no ok ops", f)
			continue
		}
		fmt.Fprintf(&b, "; %s p50/p95/p99/max %.3g/%.3g/%.3g/%.3gms", f, l.P50, l.P95, l.P99, l.Max)
	}
	return b.String()
}
