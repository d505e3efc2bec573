package master_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// submission i of a list test: named job-<i%3>-<i>, so that a name glob
// keeps a third of them.
func listSubmission(i int) api.SubmitRequest {
	return api.SubmitRequest{Token: fmt.Sprintf("list-%d", i), Name: fmt.Sprintf("job-%d-%d", i%3, i),
		DriverSpec: model.DriverSpec{
			Argv:     []string{"/bin/true"},
			Cores:    1,
			MemoryMB: 64,
		}}
}

// getList asks master n for path?query and returns the status and body.
func getList(t *testing.T, n *mastertest.Node, path string, q url.Values) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTP() + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A paged list continues, from its cursor, on another master after the
// leader that served the first page is gone: the cursor is the last
// driver ID, a position in the replicated tables. Every driver comes
// once, in ID order, and a page names no cursor after the last.
func TestListCursorAcrossLeaderChange(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	want := c.Submit(25, listSubmission)
	slices.Sort(want)
	leader := c.Leader()

	first := page(t, leader, url.Values{"limit": {"10"}})
	if len(first.Drivers) != 10 || first.Next != first.Drivers[9].ID {
		t.Fatalf("first page: %d drivers, next %q", len(first.Drivers), first.Next)
	}
	c.Stop(leader)
	next := c.Leader()
	if next == leader {
		t.Fatal("the leader did not change")
	}
	var got []string
	for _, d := range first.Drivers {
		got = append(got, d.ID)
	}
	for cursor := first.Next; cursor != ""; {
		// Each page from a master that never served the one before.
		var from *mastertest.Node
		for _, n := range c.Followers() {
			from = n
		}
		if len(got) >= 20 {
			from = next
		}
		p := page(t, from, url.Values{"limit": {"10"}, "cursor": {cursor}})
		for _, d := range p.Drivers {
			got = append(got, d.ID)
		}
		cursor = p.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages across the failover gave\n%v\nwant\n%v", got, want)
	}
}

// page reads one page of drivers from n (forwarded to the leader when n
// follows).
func page(t *testing.T, n *mastertest.Node, q url.Values) api.DriverPage {
	t.Helper()
	status, body := getList(t, n, api.PathDrivers, q)
	var p api.DriverPage
	if err := json.Unmarshal([]byte(body), &p); status != http.StatusOK || err != nil {
		t.Fatalf("%s?%s: %d %v: %s", api.PathDrivers, q.Encode(), status, err, body)
	}
	return p
}

// The master filters by state and name before it pages; without limit
// or cursor the answer is the whole array it always was, filtered.
func TestListFiltersOnTheMaster(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	ids := c.Submit(12, listSubmission)
	cl := c.Client()
	for _, id := range ids[:4] {
		if err := cl.Kill(c.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	n := c.Leader()
	p := page(t, n, url.Values{"state": {"killed"}, "limit": {"3"}})
	if len(p.Drivers) != 3 || p.Next == "" {
		t.Fatalf("KILLED, 3 a page: %d drivers, next %q", len(p.Drivers), p.Next)
	}
	p2 := page(t, n, url.Values{"state": {"KILLED"}, "limit": {"3"}, "cursor": {p.Next}})
	if len(p2.Drivers) != 1 || p2.Next != "" || p2.Drivers[0].State != model.DriverKilled {
		t.Fatalf("second page of KILLED: %+v", p2)
	}
	p = page(t, n, url.Values{"state": {"SUBMITTED,KILLED"}, "name": {"job-1-*"}, "limit": {"100"}})
	if len(p.Drivers) != 4 || p.Next != "" {
		t.Fatalf("job-1-* in SUBMITTED or KILLED: %d drivers", len(p.Drivers))
	}
	for _, d := range p.Drivers {
		if !strings.HasPrefix(d.Name, "job-1-") {
			t.Fatalf("job-1-* kept %s", d.Name)
		}
	}
	status, body := getList(t, n, api.PathDrivers, url.Values{"state": {"SUBMITTED", "RUNNING"}})
	var all []model.Driver
	if err := json.Unmarshal([]byte(body), &all); status != http.StatusOK || err != nil || len(all) != 8 {
		t.Fatalf("unpaged SUBMITTED or RUNNING: %d %v, %d drivers", status, err, len(all))
	}
	if status, body := getList(t, n, api.PathDrivers, url.Values{"state": {"FAILED"}}); status != http.StatusOK || body != "[]\n" {
		t.Fatalf("unpaged, none FAILED: %d %q; want the empty array", status, body)
	}
	status, body = getList(t, n, api.PathApps, url.Values{"limit": {"5"}})
	if status != http.StatusOK || strings.TrimSpace(body) != `{"apps":[]}` {
		t.Fatalf("a page of no apps: %d %s", status, body)
	}
}

// A list's query is checked before any row is read: a limit of 0, one
// past --max-list-page, a cursor that is not an ID, an unknown state, a
// name filter past its bound or not a glob, a malformed worker are 400
// with one line naming what is wrong; at the bounds they pass.
func TestListQueriesAreBounded(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.MaxListLimit = 50 })
	c.Submit(3, listSubmission)
	n := c.Leader()
	for _, ok := range []url.Values{
		{"limit": {"50"}},
		{"limit": {"1"}, "cursor": {"driver-20260101000000-0000"}},
		{"name": {strings.Repeat("a", api.MaxNameFilter)}, "limit": {"1"}},
		{"cursor": {"app-20260101000000-0000"}, "path": {"apps"}},
	} {
		path := api.PathDrivers
		if ok.Get("path") == "apps" {
			path = api.PathApps
			ok.Del("path")
		}
		if status, body := getList(t, n, path, ok); status != http.StatusOK {
			t.Errorf("%s?%s: %d %s; want 200", path, ok.Encode(), status, body)
		}
	}
	for _, c := range []struct {
		q    url.Values
		want string
	}{
		{url.Values{"limit": {"51"}}, "limit 51 exceeds --max-list-page of 50 rows"},
		{url.Values{"limit": {"0"}}, `limit "0" must be a count of rows`},
		{url.Values{"limit": {"-3"}}, `limit "-3" must be a count of rows`},
		{url.Values{"limit": {"ten"}}, `limit "ten" must be a count of rows`},
		{url.Values{"cursor": {"driver-x"}}, `cursor "driver-x" is not the ID of a row of this list`},
		{url.Values{"cursor": {"../../etc"}, "limit": {"5"}}, `cursor "../../etc" is not the ID`},
		{url.Values{"state": {"RUNNING,DONE"}}, `state "DONE" is not one of`},
		{url.Values{"name": {strings.Repeat("a", api.MaxNameFilter+1)}}, "name filter of 257 bytes exceeds 256 bytes"},
		{url.Values{"name": {"job-["}}, `name filter "job-[" is not a glob`},
		{url.Values{"worker": {"w 1"}}, "worker filter:"},
	} {
		status, body := getList(t, n, api.PathDrivers, c.q)
		var e api.Error
		if err := json.Unmarshal([]byte(body), &e); status != http.StatusBadRequest || err != nil ||
			!strings.Contains(e.Error, c.want) || strings.Contains(e.Error, "\n") {
			t.Errorf("%s: %d %s; want 400 with one line containing %q", c.q.Encode(), status, body, c.want)
		}
	}
	if status, body := getList(t, n, api.PathApps, url.Values{"state": {"SUBMITTED"}}); status != http.StatusBadRequest || !strings.Contains(body, `state \"SUBMITTED\" is not one of [WAITING`) {
		t.Errorf("apps in a driver state: %d %s; want 400", status, body)
	}
}

// The web UI hides the environment values whose names the master's
// --redact-regex matches, and those only; the JSON API gives them whole
// to those who may read it.
func TestRedactRegexIsTheMasters(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RedactRegex = `^NIGHTLY_` })
	id := c.Submit(1, func(int) api.SubmitRequest {
		return api.SubmitRequest{Token: "redact", DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64, Env: map[string]string{"NIGHTLY_DSN": "dsn-value", "AWS_SECRET_ACCESS_KEY": "aws-value"}}}
	})[0]
	n := c.Leader()
	status, page := getList(t, n, "/ui/drivers/"+id, nil)
	if status != http.StatusOK || strings.Contains(page, "dsn-value") || !strings.Contains(page, "aws-value") {
		t.Fatalf("the driver's page (%d) shows NIGHTLY_DSN or hides AWS_SECRET_ACCESS_KEY", status)
	}
	status, body := getList(t, n, api.DriverPath(id, ""), nil)
	if status != http.StatusOK || !strings.Contains(body, "dsn-value") || !strings.Contains(body, "aws-value") {
		t.Fatalf("the API (%d) does not give the environment whole: %s", status, body)
	}
}
