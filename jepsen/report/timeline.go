package report

import (
	"bufio"
	"fmt"
	"html/template"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-project/drover/jepsen/history"
)

// Timeline layout, in CSS pixels.
const (
	tlPxPerS     = 50    // horizontal scale of a normal run
	tlMinWidth   = 1000  // short runs are stretched to this width...
	tlMaxWidth   = 40000 // ...and long ones squeezed to this one
	tlLaneH      = 16    // height of one process lane and one fault label row
	tlMinBar     = 2     // so that sub-pixel ops still show and can be hovered
	tlTickMinGap = 90    // minimum distance between time-axis labels
)

// Timeline writes timeline.html to path: a self-contained page (inline
// CSS, no scripts, no external assets) with one lane per client process
// and every operation as a bar from its invoke to its completion, coloured
// by outcome (ok green, fail red, info orange, never completed grey; hover
// for details), under the fault windows shaded across all lanes and
// labelled above them, followed by a table of the faults and the summary
// statistics.
//
// Bars are absolutely positioned elements with short class names, which
// keeps a 20,000-op history to a few megabytes that browsers lay out
// quickly; the chart scrolls horizontally with a fixed scale rather than
// squeezing a long run into the window.
func Timeline(path string, ops []history.Op) error {
	page := buildTimeline(ops)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = timelineTmpl.Execute(w, page)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("timeline %s: %w", path, err)
	}
	return nil
}

// The view model of timeline.html. Style strings are built here from
// numbers only, hence safe to mark as template.CSS; all text from the
// history goes through the template's escaping.
type (
	tlPage struct {
		Summary    string
		Width      int
		BandStyle  template.CSS
		LanesStyle template.CSS
		NamesPad   template.CSS
		Ticks      []tlTick
		Faults     []tlFault
		Lanes      []tlLane
		FaultRows  []tlFaultRow
		StatRows   []tlStatRow
	}
	tlTick struct {
		Style template.CSS
		Label string
	}
	tlFault struct {
		Shade, Band  template.CSS
		Label, Title string
	}
	tlLane struct {
		Name string
		Ops  []tlOp
	}
	tlOp struct {
		Class string
		Style template.CSS
		Title string
	}
	tlFaultRow struct {
		ID                                int
		Fault, Targets, Start, Stop, Span string
	}
	tlStatRow struct {
		F                                string
		Invoked, OK, Fail, Info, Pending int
		P50, P95, P99, Max               string
	}
)

func buildTimeline(ops []history.Op) tlPage {
	first, last := bounds(ops)
	dur := seconds(last - first)
	width := int(math.Round(min(max(dur*tlPxPerS, tlMinWidth), tlMaxWidth)))
	scale := float64(width) / max(dur, 1e-9) // px per second
	if dur <= 0 {
		scale = tlPxPerS
	}
	x := func(t int64) float64 { return seconds(t-first) * scale }

	st := Summarize(ops)
	page := tlPage{Summary: st.String(), Width: width}

	// Lanes: one per client process, in process order.
	byProc := map[int][]span{}
	for _, s := range spans(ops, last) {
		byProc[s.invoke.Process] = append(byProc[s.invoke.Process], s)
	}
	procs := make([]int, 0, len(byProc))
	for p := range byProc {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	for _, p := range procs {
		lane := tlLane{Name: "p" + strconv.Itoa(p)}
		for _, s := range byProc[p] {
			l, r := x(s.start), x(s.end)
			lane.Ops = append(lane.Ops, tlOp{
				Class: outcomeClass(s.outcome()),
				Style: template.CSS("left:" + px(l) + ";width:" + px(max(r-l, tlMinBar))),
				Title: opTitle(s, first),
			})
		}
		page.Lanes = append(page.Lanes, lane)
	}

	// Fault windows: shading over the lanes, labels in rows above them.
	fs := faults(ops, last)
	for _, f := range fs {
		l, r := x(f.Start), x(f.Stop)
		w := max(r-l, tlMinBar)
		c := paletteColor(f.color)
		pos := "left:" + px(l) + ";width:" + px(w)
		open := ""
		if !f.stopped {
			open = ";border-right:2px dashed " + rgba(c, 1)
		}
		page.Faults = append(page.Faults, tlFault{
			Shade: template.CSS(pos + ";background:" + rgba(c, 0.16) + open),
			Band:  template.CSS(pos + ";top:" + strconv.Itoa(f.level*tlLaneH) + "px;background:" + rgba(c, 0.45) + open),
			Label: f.label(),
			Title: fmt.Sprintf("%s\nwindow %d, %s", f.label(), f.ID, faultSpan(f, first)),
		})
		page.FaultRows = append(page.FaultRows, faultRow(f, first))
	}
	bandH := levels(fs) * tlLaneH
	page.BandStyle = template.CSS("height:" + strconv.Itoa(bandH) + "px")
	page.NamesPad = template.CSS("height:" + strconv.Itoa(bandH+20) + "px")

	// Time axis: labels at a round step, with matching grid lines drawn
	// by a repeating background instead of one element per line.
	step := tickStep(scale)
	// Enough decimals for the step (0.05 needs two), and no float noise
	// from accumulating it.
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	for i := 0; float64(i)*step*scale <= float64(width)-tlTickMinGap/2; i++ {
		t := float64(i) * step
		page.Ticks = append(page.Ticks, tlTick{
			Style: template.CSS("left:" + px(t*scale)),
			Label: strconv.FormatFloat(t, 'f', decimals, 64) + "s",
		})
	}
	page.LanesStyle = template.CSS(fmt.Sprintf(
		"height:%dpx;background-image:repeating-linear-gradient(to right,#e4e4e4 0 1px,transparent 1px %s)",
		len(page.Lanes)*tlLaneH, px(step*scale)))

	names := make([]string, 0, len(st.ByF))
	for f := range st.ByF {
		names = append(names, f)
	}
	fOrder(names)
	for _, f := range names {
		s := st.ByF[f]
		row := tlStatRow{F: f, Invoked: s.Invoked, OK: s.OK, Fail: s.Fail, Info: s.Info, Pending: s.Pending}
		if s.Latency.N > 0 {
			row.P50, row.P95, row.P99, row.Max = ms(s.Latency.P50), ms(s.Latency.P95), ms(s.Latency.P99), ms(s.Latency.Max)
		}
		page.StatRows = append(page.StatRows, row)
	}
	return page
}

// outcomeClass is the CSS class of an op's bar.
func outcomeClass(t history.Type) string {
	switch t {
	case history.OK, history.Fail, history.Info:
		return string(t)
	}
	return "pend"
}

// opTitle is the hover text of an op's bar: what it was, what came back,
// and how long it took.
func opTitle(s span, first int64) string {
	a := s.answer()
	var b strings.Builder
	fmt.Fprintf(&b, "%s by p%d (event %d)", s.invoke.F, s.invoke.Process, s.invoke.Index)
	if a.Driver != "" {
		b.WriteString("\ndriver " + a.Driver)
	}
	if a.Token != "" {
		b.WriteString("\ntoken " + a.Token)
	}
	if a.Supervise {
		b.WriteString(" (supervised)")
	}
	if a.State != "" || a.Attempt != 0 {
		fmt.Fprintf(&b, "\nstate %s, attempt %d", a.State, a.Attempt)
	}
	if s.done != nil && s.done.Error != "" {
		b.WriteString("\nerror " + s.done.Error)
	}
	at := strconv.FormatFloat(seconds(s.start-first), 'f', 3, 64)
	if s.done == nil {
		fmt.Fprintf(&b, "\nnever completed (invoked at %ss, open %s at the end)", at, fmtMillis(s.latency()))
	} else {
		fmt.Fprintf(&b, "\n%s after %s (invoked at %ss)", s.done.Type, fmtMillis(s.latency()), at)
	}
	return b.String()
}

func faultSpan(f fault, first int64) string {
	s := fmt.Sprintf("%.3fs to ", seconds(f.Start-first))
	if !f.stopped {
		return s + "end of run (never stopped)"
	}
	return s + fmt.Sprintf("%.3fs (%s)", seconds(f.Stop-first), fmtMillis(f.Stop-f.Start))
}

func faultRow(f fault, first int64) tlFaultRow {
	r := tlFaultRow{
		ID:      f.ID,
		Fault:   f.Fault,
		Targets: strings.Join(f.Targets, ", "),
		Start:   fmt.Sprintf("%.3fs", seconds(f.Start-first)),
		Stop:    "never stopped",
		Span:    fmtMillis(f.Stop-f.Start) + "+",
	}
	if f.stopped {
		r.Stop = fmt.Sprintf("%.3fs", seconds(f.Stop-first))
		r.Span = fmtMillis(f.Stop - f.Start)
	}
	return r
}

// tickStep is the smallest round number of seconds at least tlTickMinGap
// pixels wide at scale px/s.
func tickStep(scale float64) float64 {
	for _, s := range []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600} {
		if s*scale >= tlTickMinGap {
			return s
		}
	}
	return 7200
}

// px formats a pixel length with one decimal: finer is invisible, and
// every byte counts 20,000 times.
func px(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "px" }

func ms(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) + "ms" }

func rgba(c [3]uint8, a float64) string {
	return fmt.Sprintf("rgba(%d,%d,%d,%.2f)", c[0], c[1], c[2], a)
}

var timelineTmpl = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Drover chaos run: timeline</title>
<style>
body{font:13px/1.35 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px}
h2{font-size:15px;margin:20px 0 6px}
.summary{margin:0 0 8px;color:#444}
.legend span{display:inline-block;margin-right:14px}
.legend b{display:inline-block;width:22px;height:10px;margin-right:4px;vertical-align:middle}
.tl{display:flex;border:1px solid #ccc}
.names{flex:none;width:56px;border-right:1px solid #ccc;background:#fafafa}
.names div{height:16px;line-height:16px;padding-left:6px;font:11px monospace}
.scroll{flex:1;overflow-x:auto}
.chart{position:relative}
.axis{position:relative;height:20px;box-sizing:border-box;border-bottom:1px solid #ccc}
.axis span{position:absolute;top:0;height:20px;border-left:1px solid #999;padding-left:3px;font-size:11px;color:#555;white-space:nowrap}
.band{position:relative}
.band div{position:absolute;height:15px;line-height:15px;font-size:11px;padding:0 3px;box-sizing:border-box;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.lanes{position:relative}
.shade{position:absolute;top:0;bottom:0;box-sizing:border-box}
.lane{position:relative;height:16px}
.lane:nth-child(even){background:rgba(0,0,0,.025)}
.lane i{position:absolute;top:3px;height:10px;border-radius:2px}
.lane i:hover{outline:2px solid #000;z-index:2}
.ok{background:#2ca02c}.fail{background:#d62728}.info{background:#ff7f0e}.pend{background:#9e9e9e}
table{border-collapse:collapse}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
td:first-child,th:first-child,td.l{text-align:left}
</style>
</head>
<body>
<h1>Drover chaos run: timeline</h1>
<p class="summary">{{.Summary}}</p>
<p class="legend"><span><b class="ok"></b>ok</span><span><b class="fail"></b>fail</span><span><b class="info"></b>info (indeterminate)</span><span><b class="pend"></b>never completed</span><span><b style="background:rgba(31,119,180,.3)"></b>fault window (dashed edge: never stopped)</span><span>x axis: seconds since the first event; hover a bar for details</span></p>
<div class="tl">
<div class="names"><div style="{{.NamesPad}}"></div>{{range .Lanes}}<div>{{.Name}}</div>{{end}}</div>
<div class="scroll"><div class="chart" style="width:{{.Width}}px">
<div class="axis">{{range .Ticks}}<span style="{{.Style}}">{{.Label}}</span>{{end}}</div>
<div class="band" style="{{.BandStyle}}">{{range .Faults}}<div style="{{.Band}}" title="{{.Title}}">{{.Label}}</div>{{end}}</div>
<div class="lanes" style="{{.LanesStyle}}">
{{range .Faults}}<div class="shade" style="{{.Shade}}" title="{{.Title}}"></div>
{{end}}{{range .Lanes}}<div class="lane">{{range .Ops}}<i class="{{.Class}}" style="{{.Style}}" title="{{.Title}}"></i>{{end}}</div>
{{end}}</div>
</div></div>
</div>
<h2>Faults</h2>
{{if .FaultRows}}<table>
<tr><th>window</th><th>fault</th><th>targets</th><th>start</th><th>stop</th><th>duration</th></tr>
{{range .FaultRows}}<tr><td>{{.ID}}</td><td class="l">{{.Fault}}</td><td class="l">{{.Targets}}</td><td>{{.Start}}</td><td>{{.Stop}}</td><td>{{.Span}}</td></tr>
{{end}}</table>{{else}}<p>No faults were injected.</p>{{end}}
<h2>Operations</h2>
<table>
<tr><th>f</th><th>invoked</th><th>ok</th><th>fail</th><th>info</th><th>pending</th><th>ok p50</th><th>p95</th><th>p99</th><th>max</th></tr>
{{range .StatRows}}<tr><td>{{.F}}</td><td>{{.Invoked}}</td><td>{{.OK}}</td><td>{{.Fail}}</td><td>{{.Info}}</td><td>{{.Pending}}</td><td>{{.P50}}</td><td>{{.P95}}</td><td>{{.P99}}</td><td>{{.Max}}</td></tr>
{{end}}</table>
</body>
</html>
`))
