package report

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/drover-project/drover/jepsen/history"
)

// t0 is the synthetic history's first event.
const t0 = int64(1_700_000_000_000_000_000)

// at is t0 plus ms milliseconds.
func at(ms int64) int64 { return t0 + ms*int64(time.Millisecond) }

// synthetic is a small history with every case the reports must handle:
// four processes; ok, fail and info completions; an invoke that never
// completes; two overlapping fault windows, the second never stopped.
// Its last event is at 2 s.
func synthetic() []history.Op {
	ops := []history.Op{
		{Process: 0, Type: history.Invoke, F: history.FSubmit, Time: at(0), Token: "t1", Supervise: true},
		{Process: 1, Type: history.Invoke, F: history.FRead, Time: at(5), Driver: "d1"},
		{Process: 2, Type: history.Invoke, F: history.FKill, Time: at(8), Driver: "d9"},
		{Process: 0, Type: history.OK, F: history.FSubmit, Time: at(10), Token: "t1", Supervise: true, Driver: "d1"},
		{Process: 1, Type: history.OK, F: history.FRead, Time: at(25), Driver: "d1", State: "running", Attempt: 1},
		{Process: history.NemesisProcess, Type: history.Invoke, F: history.FStart, Time: at(30), Fault: "kill-leader", Targets: []string{"n1"}, Window: 1},
		{Process: 2, Type: history.Fail, F: history.FKill, Time: at(38), Driver: "d9", Error: "no such driver"},
		{Process: 0, Type: history.Invoke, F: history.FSubmit, Time: at(40), Token: "t2"},
		{Process: 1, Type: history.Invoke, F: history.FRead, Time: at(50), Driver: "d1"},
		{Process: 1, Type: history.OK, F: history.FRead, Time: at(80), Driver: "d1", State: "running", Attempt: 2},
		{Process: history.NemesisProcess, Type: history.Invoke, F: history.FStart, Time: at(100), Fault: "partition-halves", Targets: []string{"n1", "n2"}, Window: 2},
		{Process: history.NemesisProcess, Type: history.OK, F: history.FStop, Time: at(500), Fault: "kill-leader", Targets: []string{"n1"}, Window: 1},
		{Process: 0, Type: history.Info, F: history.FSubmit, Time: at(1040), Token: "t2", Error: "timeout"},
		{Process: 2, Type: history.Invoke, F: history.FRead, Time: at(1100), Driver: "d1"},
		{Process: 2, Type: history.OK, F: history.FRead, Time: at(1140), Driver: "d1", State: "finished", Attempt: 2},
		{Process: 1, Type: history.Invoke, F: history.FSubmit, Time: at(1200), Token: "t3"},
		{Process: 1, Type: history.OK, F: history.FSubmit, Time: at(1250), Token: "t3", Driver: "d2"},
		{Process: 3, Type: history.Invoke, F: history.FRead, Time: at(1300), Driver: "d2"},
		{Process: 2, Type: history.Invoke, F: history.FKill, Time: at(1400), Driver: "d2"},
		{Process: 2, Type: history.OK, F: history.FKill, Time: at(2000), Driver: "d2"},
	}
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}

func TestSummarize(t *testing.T) {
	st := Summarize(synthetic())
	want := Stats{
		DurationS: 2,
		Processes: 4,
		Faults:    2,
		Total:     Counts{Invoked: 9, OK: 6, Fail: 1, Info: 1, Pending: 1},
		ByF: map[string]FStats{
			// ok latencies 10, 50 ms
			"submit": {Counts{Invoked: 3, OK: 2, Info: 1}, Latency{N: 2, P50: 10, P95: 50, P99: 50, Max: 50}},
			// ok latencies 20, 30, 40 ms; nearest rank: p50 is the 2nd
			"read": {Counts{Invoked: 4, OK: 3, Pending: 1}, Latency{N: 3, P50: 30, P95: 40, P99: 40, Max: 40}},
			"kill": {Counts{Invoked: 2, OK: 1, Fail: 1}, Latency{N: 1, P50: 600, P95: 600, P99: 600, Max: 600}},
		},
		OKPerS: 3,
	}
	got, _ := json.Marshal(st)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("Summarize:\n got %s\nwant %s", got, exp)
	}
	for _, key := range []string{`"duration_s":2`, `"ok_per_s":3`, `"pending":1`, `"p99_ms":40`, `"by_f":{"kill":`} {
		if !strings.Contains(string(got), key) {
			t.Errorf("results JSON lacks %s: %s", key, got)
		}
	}
	line := st.String()
	for _, want := range []string{
		"2.0s, 4 procs, 2 faults: 9 ops (ok 6, fail 1, info 1, pending 1), 3.0 ok/s",
		"; submit p50/p95/p99/max 10/50/50/50ms; read p50/p95/p99/max 30/40/40/40ms; kill ",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("String() = %q, lacks %q", line, want)
		}
	}
	if strings.Contains(line, "\n") {
		t.Errorf("String() is not one line: %q", line)
	}
}

func TestSummarizePercentiles(t *testing.T) {
	// 100 ok reads of 1..100 ms: nearest rank gives exactly 50, 95, 99.
	var ops []history.Op
	for i := int64(1); i <= 100; i++ {
		ops = append(ops,
			history.Op{Process: 0, Type: history.Invoke, F: history.FRead, Time: at(1000 * i)},
			history.Op{Process: 0, Type: history.OK, F: history.FRead, Time: at(1000*i + i)})
	}
	got := Summarize(ops).ByF["read"].Latency
	if want := (Latency{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}); got != want {
		t.Fatalf("latency = %+v, want %+v", got, want)
	}
}

func TestTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.html")
	if err := Timeline(path, synthetic()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}

	// Self-contained: no scripts, no links to anything.
	walk(doc, func(n *html.Node) {
		if n.Data == "script" || n.Data == "link" || n.Data == "img" {
			t.Errorf("page has a <%s>", n.Data)
		}
		for _, a := range n.Attr {
			if a.Key == "src" || a.Key == "href" {
				t.Errorf("<%s> has %s=%q", n.Data, a.Key, a.Val)
			}
		}
	})

	// One lane per client process, labelled in process order.
	lanes := findAll(doc, func(n *html.Node) bool { return hasClass(n, "lane") })
	if len(lanes) != 4 {
		t.Fatalf("%d lanes, want 4", len(lanes))
	}
	names := findAll(doc, func(n *html.Node) bool { return n.Parent != nil && hasClass(n.Parent, "names") && text(n) != "" })
	var got []string
	for _, n := range names {
		got = append(got, text(n))
	}
	if strings.Join(got, " ") != "p0 p1 p2 p3" {
		t.Errorf("lane names %q", got)
	}

	// The time axis: round steps, labels clear of the right edge.
	var ticks []string
	for _, ax := range findAll(doc, func(n *html.Node) bool { return hasClass(n, "axis") }) {
		for _, sp := range findAll(ax, func(n *html.Node) bool { return n.Data == "span" }) {
			ticks = append(ticks, text(sp))
		}
	}
	if got, want := strings.Join(ticks, " "), "0.0s 0.2s 0.4s 0.6s 0.8s 1.0s 1.2s 1.4s 1.6s 1.8s"; got != want {
		t.Errorf("axis %q, want %q", got, want)
	}

	// Every op a bar in its process's lane, classed by outcome.
	perLane := []string{"ok info", "ok ok ok", "fail ok ok", "pend"}
	bars := map[string]*html.Node{} // by title's first line
	for i, lane := range lanes {
		var classes []string
		for _, b := range findAll(lane, func(n *html.Node) bool { return n.Data == "i" }) {
			classes = append(classes, attr(b, "class"))
			bars[strings.SplitN(attr(b, "title"), "\n", 2)[0]] = b
		}
		if strings.Join(classes, " ") != perLane[i] {
			t.Errorf("lane p%d bars %q, want %q", i, classes, perLane[i])
		}
	}

	// Hover titles and geometry: 2 s over 1000 px is 500 px/s.
	checks := []struct{ first, style string }{
		{"submit by p0 (event 0)", "left:0.0px;width:5.0px"},
		{"submit by p0 (event 7)", "left:20.0px;width:500.0px"},
		{"kill by p2 (event 18)", "left:700.0px;width:300.0px"},
		{"read by p3 (event 17)", "left:650.0px;width:350.0px"},
		{"read by p2 (event 13)", "left:550.0px;width:20.0px"},
	}
	for _, c := range checks {
		b := bars[c.first]
		if b == nil {
			t.Errorf("no bar titled %q (have %v)", c.first, slices.Collect(maps.Keys(bars)))
			continue
		}
		if got := attr(b, "style"); got != c.style {
			t.Errorf("%s: style %q, want %q", c.first, got, c.style)
		}
	}
	titles := map[string][]string{
		"submit by p0 (event 0)": {"driver d1", "token t1 (supervised)", "ok after 10ms"},
		"submit by p0 (event 7)": {"token t2", "error timeout", "info after 1.00s (invoked at 0.040s)"},
		"kill by p2 (event 2)":   {"driver d9", "error no such driver", "fail after 30ms"},
		"read by p1 (event 8)":   {"state running, attempt 2", "ok after 30ms"},
		"read by p3 (event 17)":  {"driver d2", "never completed (invoked at 1.300s"},
	}
	for first, wants := range titles {
		b := bars[first]
		if b == nil {
			t.Errorf("no bar titled %q", first)
			continue
		}
		for _, w := range wants {
			if title := attr(b, "title"); !strings.Contains(title, w) {
				t.Errorf("%s: title %q lacks %q", first, title, w)
			}
		}
	}

	// Fault windows: shaded over the lanes, labelled above, overlapping
	// ones on separate label rows, and listed in the table.
	shades := findAll(doc, func(n *html.Node) bool { return hasClass(n, "shade") })
	if len(shades) != 2 {
		t.Fatalf("%d fault shades, want 2", len(shades))
	}
	if s := attr(shades[0], "style"); !strings.HasPrefix(s, "left:15.0px;width:235.0px;") {
		t.Errorf("kill-leader shade style %q", s)
	}
	if s := attr(shades[1], "style"); !strings.HasPrefix(s, "left:50.0px;width:950.0px;") || !strings.Contains(s, "dashed") {
		t.Errorf("unclosed partition shade style %q", s)
	}
	band := findAll(doc, func(n *html.Node) bool { return hasClass(n, "band") })
	if len(band) != 1 {
		t.Fatalf("%d label bands", len(band))
	}
	labels := map[string]string{}
	for _, l := range findAll(band[0], func(n *html.Node) bool { return n.Data == "div" && n != band[0] }) {
		labels[text(l)] = attr(l, "style")
	}
	for label, top := range map[string]string{
		"kill-leader n1":                       "top:0px",
		"partition-halves n1,n2 (not stopped)": "top:16px",
	} {
		if s, ok := labels[label]; !ok || !strings.Contains(s, top) {
			t.Errorf("fault label %q: style %q (labels %v)", label, s, labels)
		}
	}
	var rows []string
	for _, tr := range findAll(doc, func(n *html.Node) bool { return n.Data == "tr" }) {
		var cells []string
		for _, td := range findAll(tr, func(n *html.Node) bool { return n.Data == "td" }) {
			cells = append(cells, text(td))
		}
		rows = append(rows, strings.Join(cells, "|"))
	}
	for _, want := range []string{
		"1|kill-leader|n1|0.030s|0.500s|470ms",
		"2|partition-halves|n1, n2|0.100s|never stopped|1.90s+",
		// f, invoked, ok, fail, info, pending, ok latency p50/p95/p99/max
		"submit|3|2|0|1|0|10ms|50ms|50ms|50ms",
		"read|4|3|0|0|1|30ms|40ms|40ms|40ms",
		"kill|2|1|1|0|0|600ms|600ms|600ms|600ms",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("tables lack row %q; rows:\n%s", want, strings.Join(rows, "\n"))
		}
	}
}

func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plot.svg")
	if err := Plot(path, synthetic()); err != nil {
		t.Fatal(err)
	}
	texts, root := parseSVG(t, path)
	if root != "svg" {
		t.Errorf("root element %q", root)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"Latency of completed client operations", "Throughput",
		"seconds since the first event", "latency (ms)", "ok ops/s (1 s buckets)",
		"kill-leader n1", "partition-halves n1,n2 (not stopped)",
		"submit ok (2)", "read ok (3)", "kill ok (1)", "submit info (1)", "kill fail (1)",
		"fault kill-leader", "fault partition-halves", "ok ops/s",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("plot lacks text %q; has:\n%s", want, all)
		}
	}
	// The never-completed read has no latency, so no legend count counts it.
	if strings.Contains(all, "read ok (4)") {
		t.Error("pending read plotted")
	}
	// Latencies span 10..1000 ms, so the axis is logarithmic, in decades.
	for _, want := range []string{"10", "100", "1000"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no log tick %q", want)
		}
	}
}

func TestEmptyHistory(t *testing.T) {
	dir := t.TempDir()
	if err := Timeline(filepath.Join(dir, "timeline.html"), nil); err != nil {
		t.Fatal(err)
	}
	if err := Plot(filepath.Join(dir, "plot.svg"), nil); err != nil {
		t.Fatal(err)
	}
	parseSVG(t, filepath.Join(dir, "plot.svg"))
	if st := Summarize(nil); st.Total != (Counts{}) || st.OKPerS != 0 || len(st.ByF) != 0 {
		t.Errorf("Summarize(nil) = %+v", st)
	}
}

// TestLargeHistory checks that 20,000 ops stay reasonable in time and size.
func TestLargeHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("large history")
	}
	ops := large(20000)
	dir := t.TempDir()
	start := time.Now()
	if err := Timeline(filepath.Join(dir, "timeline.html"), ops); err != nil {
		t.Fatal(err)
	}
	tl := time.Since(start)
	start = time.Now()
	if err := Plot(filepath.Join(dir, "plot.svg"), ops); err != nil {
		t.Fatal(err)
	}
	pl := time.Since(start)
	st := Summarize(ops)
	if st.Total.Invoked != 20000 {
		t.Fatalf("invoked %d", st.Total.Invoked)
	}
	for name, limit := range map[string]int64{"timeline.html": 6 << 20, "plot.svg": 6 << 20} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", name, fi.Size())
		if fi.Size() > limit {
			t.Errorf("%s is %d bytes, over %d", name, fi.Size(), limit)
		}
	}
	parseSVG(t, filepath.Join(dir, "plot.svg"))
	t.Logf("timeline %v, plot %v; %s", tl, pl, st)
}

// large is a 20-process, n-op history over about five minutes with
// periodic faults, a mix of outcomes and a few pending ops at the end.
func large(n int) []history.Op {
	const procs = 20
	var ops []history.Op
	fs := []string{history.FSubmit, history.FRead, history.FRead, history.FKill}
	next := make([]int64, procs) // ms at which each process is free
	window := 0
	for i := 0; i < n; i++ {
		p := i % procs
		f := fs[i%len(fs)]
		start := next[p]
		if p == 0 && i%1000 == 0 {
			window++
			ops = append(ops, history.Op{Process: history.NemesisProcess, Type: history.Invoke, F: history.FStart,
				Time: at(start), Fault: "kill-leader", Targets: []string{"n" + fmt.Sprint(window%3+1)}, Window: window})
		}
		lat := int64(2 + (i*7919)%40)
		typ := history.OK
		switch {
		case i%97 == 0:
			typ, lat = history.Info, 1000
		case i%53 == 0:
			typ = history.Fail
		}
		inv := history.Op{Process: p, Type: history.Invoke, F: f, Time: at(start), Driver: fmt.Sprintf("d%d", i/4), Token: fmt.Sprintf("t%d", i)}
		ops = append(ops, inv)
		if i >= n-procs/2 {
			continue // the last few never complete
		}
		done := inv
		done.Type, done.Time = typ, at(start+lat)
		if typ != history.OK {
			done.Error = "timeout"
		}
		ops = append(ops, done)
		next[p] = start + lat + int64(i%300)
		if p == 0 && i%1000 == 500 {
			ops = append(ops, history.Op{Process: history.NemesisProcess, Type: history.OK, F: history.FStop, Time: at(start + 1), Window: window})
		}
	}
	// The loop emits each op's events together; a history is in time order.
	sortByTime(ops)
	return ops
}

// sortByTime orders ops by time and renumbers them. The sort is stable,
// so a completion stays before its process's next invoke at the same time.
func sortByTime(ops []history.Op) {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = i
	}
}

// parseSVG checks that path is well-formed XML and returns its text
// content and root element name.
func parseSVG(t *testing.T, path string) (texts []string, root string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = tok.Name.Local
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("%s: unbalanced elements", path)
	}
	return texts, root
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	walk(n, func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
	})
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(strings.TrimSpace(n.Data))
		}
	})
	return b.String()
}
