package master_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/master/ui"
)

// uiDrivers is the number of drivers of TestUIWith100kDrivers.
const uiDrivers = 100_000

// The web UI stays a page with 100,000 drivers: the overview lists the
// first few of each kind and links to the drivers list, and the drivers
// list shows a page of ui.DriverPageSize, filtered by state and name on
// the master, with a link to the next that continues after it. The test
// states the page sizes and render times.
func TestUIWith100kDrivers(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		cfg.MaxLiveDrivers, cfg.MaxLiveDriversPerClient, cfg.MaxSubmitsPerClient = 0, 0, 0
	})
	start := time.Now()
	c.Submit(uiDrivers, listSubmission)
	t.Logf("%d drivers submitted in %s", uiDrivers, time.Since(start).Round(time.Millisecond))
	n := c.Nodes[0]

	get := func(path string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := http.Get("http://" + n.HTTP() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v: %.300s", path, resp.StatusCode, err, b)
		}
		return string(b), took
	}
	rows := regexp.MustCompile(`<tr><td class="id"><a href="/ui/drivers/(driver-[0-9-]+)">`)

	body, took := get("/")
	t.Logf("overview: %d KiB in %s", len(body)>>10, took.Round(time.Millisecond))
	if len(body) > 256<<10 || !strings.Contains(body, fmt.Sprintf("first 25 of %d", uiDrivers)) {
		t.Fatalf("overview of %d KiB; want under 256 KiB, saying first 25 of %d waiting", len(body)>>10, uiDrivers)
	}

	q := url.Values{"state": {"SUBMITTED"}, "name": {"job-1-*"}}
	body, took = get("/ui/drivers?" + q.Encode())
	got := rows.FindAllStringSubmatch(body, -1)
	t.Logf("drivers list, SUBMITTED and job-1-*: a page of %d rows, %d KiB in %s", len(got), len(body)>>10, took.Round(time.Millisecond))
	if len(got) != ui.DriverPageSize || took > 5*time.Second {
		t.Fatalf("a page of %d rows in %s; want %d", len(got), took, ui.DriverPageSize)
	}
	next := regexp.MustCompile(`<a id="next" href="([^"]+)"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no link to the next page")
	}
	body, took = get(strings.ReplaceAll(next[1], "&amp;", "&"))
	more := rows.FindAllStringSubmatch(body, -1)
	t.Logf("its next page: %d rows, %d KiB in %s", len(more), len(body)>>10, took.Round(time.Millisecond))
	if len(more) != ui.DriverPageSize || more[0][1] <= got[len(got)-1][1] {
		t.Fatalf("next page: %d rows from %s after %s", len(more), more[0][1], got[len(got)-1][1])
	}
	// Every third driver is named job-1-*: the master filtered them.
	if !strings.Contains(body, ">job-1-") || strings.Contains(body, ">job-0-") || strings.Contains(body, ">job-2-") {
		t.Fatal("the name filter kept other names")
	}
}
