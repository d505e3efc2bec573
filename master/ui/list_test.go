package ui

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// A page of the drivers list: its rows with a one-line program, the
// filter it was asked with in its form, a link to the next page that
// keeps the filter and names the cursor, and one back to the first.
func TestDriversPage(t *testing.T) {
	s := testState()
	long := strings.Repeat("x", 5000)
	s.Drivers[0].Argv = []string{"/opt/spark/bin/spark-submit", "--conf", "spark.driver.extraJavaOptions=" + long, "/jobs/a.jar"}
	q := api.ListQuery{States: []string{"RUNNING"}, Name: "etl-*", Limit: 2, Cursor: "driver-20240101000000-0"}
	p, err := Drivers(frame("/ui/drivers?state=RUNNING&name=etl-%2A&limit=2&cursor=driver-20240101000000-0"), q,
		api.DriverPage{Drivers: s.Drivers[:2], Next: s.Drivers[1].ID})
	n := doc(t, p, err, http.StatusOK)
	drivers := byID(t, n, "drivers")
	contains(t, drivers, dRunning, dWaiting, "/opt/spark/bin/spark-submit --conf spark.driver.extraJavaOptions=xxx", "…(5030 bytes) /jobs/a.jar")
	if strings.Contains(text(drivers), long[:200]) {
		t.Fatal("the program column shows a 5,000-byte argument whole")
	}
	hasLink(t, n, "/ui/drivers?cursor="+dWaiting+"&limit=2&name=etl-%2A&state=RUNNING")
	hasLink(t, n, "/ui/drivers?limit=2&name=etl-%2A&state=RUNNING")
	body := string(p.Body)
	for _, want := range []string{`<option selected>RUNNING</option>`, `name="name" value="etl-*"`, `<td class="id"><a href="/ui/drivers/` + dRunning, `<td class="time">`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the page has no %s", want)
		}
	}
	// The last page links to no next one.
	p, err = Drivers(frame("/ui/drivers"), api.ListQuery{Limit: DriverPageSize}, api.DriverPage{Drivers: s.Drivers})
	if n := doc(t, p, err, http.StatusOK); strings.Contains(string(p.Body), `id="next"`) || strings.Contains(string(p.Body), `id="first"`) {
		t.Fatalf("the only page links elsewhere: %q", links(n))
	}
}

// A driver's page cuts long environment values and argv elements to a
// preview and says their whole length; the JSON API keeps them whole.
// Values whose names the master's pattern matches are hidden, and only
// those: the pattern replaces the default.
func TestLongValuesArePreviewed(t *testing.T) {
	d := &model.Driver{ID: dRunning, State: model.DriverRunning,
		DriverSpec: model.DriverSpec{
			Argv: []string{"/bin/echo", strings.Repeat("é", 3000)},
			Env:  map[string]string{"BIG": strings.Repeat("v", 960_000), "NIGHTLY_KEY": "k1", "AWS_SECRET": "s1", "SMALL": "ok"},
		},
	}
	f := frame("/ui/drivers/" + dRunning)
	f.Redact = regexp.MustCompile(`^NIGHTLY_`)
	p, err := Driver(f, d, nil)
	n := doc(t, p, err, http.StatusOK)
	if len(p.Body) > 64<<10 {
		t.Fatalf("a page of %d bytes for a 960,000-byte value", len(p.Body))
	}
	contains(t, n, "BIG "+strings.Repeat("v", previewBytes)+"… (960000 bytes in all)", "SMALL ok",
		"NIGHTLY_KEY "+redacted, "AWS_SECRET s1")
	contains(t, byID(t, n, "argv"), "/bin/echo '"+strings.Repeat("é", previewBytes/2)+"'…(6000 bytes)")
	if !strings.Contains(string(p.Body), "AWS_SECRET") || strings.Contains(string(p.Body), "k1") {
		t.Fatal("the master's pattern did not replace the default")
	}
	// Without a pattern of its own, a page hides what Spark's default does.
	p, err = Driver(frame("/ui/drivers/"+dRunning), d, nil)
	contains(t, doc(t, p, err, http.StatusOK), "AWS_SECRET "+redacted, "NIGHTLY_KEY k1")
}

// preview cuts at a whole character.
func TestPreviewKeepsCharactersWhole(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true},
		{"éé", 3, "é", true},
	} {
		if got, cut := preview(c.s, c.n); got != c.want || cut != c.cut {
			t.Errorf("preview(%q, %d) = %q, %t; want %q, %t", c.s, c.n, got, cut, c.want, c.cut)
		}
	}
	if got := program([]string{"a", strings.Repeat("b", 1000)}); got != "a "+strings.Repeat("b", argPreview)+"…(1000 bytes)" {
		t.Fatalf("program of a long argument: %q", got)
	}
	if got := program(strings.Fields(strings.Repeat("word ", 100))); len(got) != programPreview+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("program of many arguments: %q", got)
	}
}
