package report

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/drover-project/drover/jepsen/history"
)

// Plot layout.
const (
	plotW       = 11 * vg.Inch
	plotH       = 7.5 * vg.Inch
	plotLegendW = 130 // points, right of the panels
	plotLabelH  = 10  // points per fault label row
	// plotLabelRows caps the fault label rows; a label that finds no room
	// is left out (its shading and the legend still show the fault).
	plotLabelRows = 3
	// minLatencyMs stands in for a zero latency (both events in the same
	// clock tick), which a log axis cannot show.
	minLatencyMs = 1e-3
	// logRatio is the max/min latency spread from which the latency axis
	// turns logarithmic: past it, a linear axis crushes the fast ops,
	// which are most of them, into its bottom pixels.
	logRatio = 20
)

// Plot writes an SVG to path with two panels sharing the time axis
// (seconds since the first event): the latency of every completed client
// op (scatter; colour by outcome, glyph by function; log scale when the
// latencies spread widely) and the ok throughput (ops per second in 1 s
// buckets, by completion time). Fault windows are shaded and labelled in
// both panels.
//
// Ops that never completed have no latency and are left out of the
// scatter; timeline.html shows them.
func Plot(path string, ops []history.Op) error {
	first, last := bounds(ops)
	dur := seconds(last - first)
	if dur <= 0 {
		dur = 1 // a zero-width axis cannot be drawn
	}
	ss := spans(ops, last)
	fs := faults(ops, last)

	lat := plot.New()
	lat.Title.Text = "Latency of completed client operations"
	lat.Y.Label.Text = "latency (ms)"
	thr := plot.New()
	thr.Title.Text = "Throughput"
	thr.X.Label.Text = "seconds since the first event"
	thr.Y.Label.Text = "ok ops/s (1 s buckets)"

	// Shading first so the data is drawn over it; labels last so the data
	// does not hide them.
	lat.Add(faultLayer{faults: fs, first: first})
	thr.Add(faultLayer{faults: fs, first: first})

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = 9
	legend.ThumbnailWidth = 14
	legend.Padding = 1.5

	lo, hi, err := addLatency(lat, &legend, ss, first)
	if err != nil {
		return err
	}
	peak, err := addThroughput(thr, &legend, ss, first, dur)
	if err != nil {
		return err
	}
	addFaultLegend(&legend, fs)

	lat.Add(faultLayer{faults: fs, first: first, labels: true})
	thr.Add(faultLayer{faults: fs, first: first, labels: true})

	lat.X.Min, lat.X.Max = 0, dur
	thr.X.Min, thr.X.Max = 0, dur
	// Headroom above the data for the fault labels: one row per overlap
	// level, plus one for labels wider than their windows.
	rows := 0
	if len(fs) > 0 {
		rows = min(levels(fs)+1, plotLabelRows)
	}
	scaleLatency(lat, lo, hi, rows)
	thr.Y.Min, thr.Y.Max = 0, max(peak, 1)*(1.05+0.07*float64(rows))

	c := vgsvg.New(plotW, plotH)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	panels := draw.Crop(dc, 0, -plotLegendW, 0, 0)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: 12, PadTop: 6, PadBottom: 6, PadLeft: 6, PadRight: 6}
	canvases := plot.Align([][]*plot.Plot{{lat}, {thr}}, tiles, panels)
	lat.Draw(canvases[0][0])
	thr.Draw(canvases[1][0])
	legend.Draw(draw.Crop(dc, plotW-plotLegendW+8, -4, 0, -30))

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	_, err = c.WriteTo(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// addLatency adds one scatter per (function, outcome) to p and the legend,
// and returns the smallest and largest latency in ms (0, 0 if none).
func addLatency(p *plot.Plot, legend *plot.Legend, ss []span, first int64) (lo, hi float64, err error) {
	type key struct {
		f string
		t history.Type
	}
	groups := map[key]plotter.XYs{}
	seen := map[string]bool{}
	var names []string
	for _, s := range ss {
		if s.done == nil {
			continue
		}
		y := max(millis(s.latency()), minLatencyMs)
		if hi == 0 {
			lo = y
		}
		lo, hi = min(lo, y), max(hi, y)
		k := key{s.invoke.F, s.done.Type}
		if !seen[k.f] {
			seen[k.f] = true
			names = append(names, k.f)
		}
		// Plotted at invoke time, as Jepsen does: a slow op then sits
		// where it began, next to the fault that may have slowed it.
		groups[k] = append(groups[k], plotter.XY{X: seconds(s.start - first), Y: y})
	}
	fOrder(names)
	// ok first so the rarer fail and info glyphs are drawn on top.
	for _, t := range []history.Type{history.OK, history.Info, history.Fail} {
		for _, f := range names {
			xys := groups[key{f, t}]
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return 0, 0, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: outcomeColor(t), Radius: 2, Shape: glyphFor(f)}
			p.Add(sc)
			legend.Add(fmt.Sprintf("%s %s (%d)", f, t, len(xys)), sc)
		}
	}
	return lo, hi, nil
}

// scaleLatency sets the latency axis: logarithmic in whole decades when
// the spread is wide, linear from zero otherwise, with room at the top for
// rows fault label rows.
func scaleLatency(p *plot.Plot, lo, hi float64, rows int) {
	if hi == 0 { // no completed ops: an empty, still valid panel
		lo, hi = 1, 10
	}
	if hi/lo < logRatio {
		p.Y.Min, p.Y.Max = 0, hi*(1.05+0.07*float64(rows))
		return
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi)+0.15*float64(rows)))
}

// addThroughput adds the ok-ops-per-second line to p and the legend, and
// returns its peak. The last bucket is usually partial, and reads low.
func addThroughput(p *plot.Plot, legend *plot.Legend, ss []span, first int64, dur float64) (float64, error) {
	n := max(int(math.Ceil(dur)), 1)
	counts := make([]float64, n)
	for _, s := range ss {
		if s.outcome() != history.OK {
			continue
		}
		// The last event closes the last bucket rather than opening one.
		counts[min(int(seconds(s.end-first)), n-1)]++
	}
	// Points at bucket starts, drawn as steps, plus one to close the last.
	xys := make(plotter.XYs, 0, n+1)
	peak := 0.0
	for i, c := range counts {
		xys = append(xys, plotter.XY{X: float64(i), Y: c})
		peak = max(peak, c)
	}
	xys = append(xys, plotter.XY{X: float64(n), Y: counts[n-1]})
	line, err := plotter.NewLine(xys)
	if err != nil {
		return 0, err
	}
	line.StepStyle = plotter.PostStep
	line.LineStyle = draw.LineStyle{Color: color.NRGBA{31, 119, 180, 255}, Width: 1.2}
	p.Add(line)
	legend.Add("ok ops/s", line)
	return peak, nil
}

// addFaultLegend adds one swatch per fault name.
func addFaultLegend(legend *plot.Legend, fs []fault) {
	seen := map[int]bool{}
	for _, f := range fs {
		if seen[f.color] {
			continue
		}
		seen[f.color] = true
		legend.Add("fault "+f.Fault, swatch{faultColor(f.color, 90)})
	}
}

// outcomeColor matches timeline.html: ok green, fail red, info orange;
// translucent so that dense regions read as density.
func outcomeColor(t history.Type) color.Color {
	switch t {
	case history.OK:
		return color.NRGBA{44, 160, 44, 150}
	case history.Fail:
		return color.NRGBA{214, 39, 40, 220}
	default:
		return color.NRGBA{255, 127, 14, 220}
	}
}

// glyphFor gives each operation function its own marker shape.
func glyphFor(f string) draw.GlyphDrawer {
	switch f {
	case history.FSubmit:
		return draw.PyramidGlyph{}
	case history.FRead:
		return draw.CircleGlyph{}
	case history.FKill:
		return draw.CrossGlyph{}
	}
	return draw.BoxGlyph{}
}

func faultColor(i int, alpha uint8) color.Color {
	c := paletteColor(i)
	return color.NRGBA{c[0], c[1], c[2], alpha}
}

// swatch is a legend thumbnail: a filled rectangle.
type swatch struct{ color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.Color, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
}

// faultLayer draws the fault windows over a panel's full height: the
// shading, or (labels) the name and targets of each at the top. It has no
// DataRange, so it never stretches the axes.
type faultLayer struct {
	faults []fault
	first  int64
	labels bool
}

// Plot implements plot.Plotter.
func (l faultLayer) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := draw.TextStyle{
		Font:    font.From(plot.DefaultFont, 7.5),
		Handler: p.TextHandler,
		XAlign:  draw.XLeft,
		YAlign:  draw.YTop,
	}
	// Label rows are laid out here, where text widths are known: each
	// label takes the first row that is free from its window's start, and
	// keeps it up to the end of its text or its window, whichever is
	// later, so neither overlapping windows nor a run of short ones
	// print over each other.
	var rowEnd []vg.Length
	for _, f := range l.faults {
		x0 := max(trX(seconds(f.Start-l.first)), c.Min.X)
		x1 := min(max(trX(seconds(f.Stop-l.first)), x0+1), c.Max.X)
		if !l.labels {
			c.FillPolygon(faultColor(f.color, 45), []vg.Point{
				{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
			})
			continue
		}
		label := f.label()
		w := sty.Width(label)
		tx := min(x0+2, c.Max.X-w) // keep labels near the right edge inside
		row := -1
		for r := range plotLabelRows {
			if r == len(rowEnd) {
				rowEnd = append(rowEnd, c.Min.X-1)
			}
			if rowEnd[r] <= tx {
				row = r
				break
			}
		}
		if row < 0 {
			continue
		}
		rowEnd[row] = max(tx+w+4, x1)
		sty.Color = faultColor(f.color, 255)
		c.FillText(sty, vg.Point{X: tx, Y: c.Max.Y - 2 - vg.Length(row*plotLabelH)}, label)
	}
}
