package master_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// sse is one server-sent event of GET /v1/events.
type sse struct {
	name, id string
	event    api.Event
}

// eventStream reads one master's GET /v1/events as a browser's
// EventSource would.
type eventStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// openEvents opens GET /v1/events?query on addr with the given header
// (Last-Event-ID), until ctx ends or the test does.
func openEvents(t *testing.T, ctx context.Context, addr, query string, header http.Header) *eventStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events?%s: %s", query, resp.Status)
	}
	return &eventStream{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event, skipping comments (keepalives).
func (s *eventStream) next() sse {
	s.t.Helper()
	var e sse
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "" && e.name != "":
			return e
		case strings.HasPrefix(line, "event: "):
			e.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.event); err != nil {
				s.t.Fatalf("event data %q: %v", line, err)
			}
		}
	}
	s.t.Fatalf("the event stream ended: %v", s.sc.Err())
	return e
}

// until returns the events up to and including the first at index or past
// it.
func (s *eventStream) until(index uint64) []sse {
	s.t.Helper()
	var out []sse
	for {
		e := s.next()
		out = append(out, e)
		if e.event.Index >= index {
			return out
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// The event stream over HTTP: ?kind= and ?id= leave out every other row,
// replayed or live; Last-Event-ID, as an EventSource sends it on a
// reconnect, resumes right after that index (and wins over ?index=); an
// index older than what the master holds (here: from before a snapshot it
// restored) gets a reset event and then the current rows the filter picks.
func TestEventStreamOverHTTP(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, addr := c.Client(), c.Leader().HTTP()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	register := func(id string, cores int) uint64 {
		t.Helper()
		reg := api.RegisterWorkerRequest{ID: id, Instance: "i-" + id, HTTPAddr: "127.0.0.1:1", Cores: cores, MemoryMB: 1024}
		if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
			t.Fatal(err)
		}
		st, err := cl.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(st.Workers, func(w *model.Worker) bool { return w.ID == id })
		return st.Workers[i].ModifyIndex
	}
	submit := func() string {
		t.Helper()
		res, err := cl.Submit(ctx, submitReq())
		if err != nil {
			t.Fatal(err)
		}
		return res.DriverID
	}
	w1First := register("w1", 1)
	register("w2", 1)
	submit()
	w1Second := register("w1", 2)

	// Replayed, then live: only w1's worker row, while w2 and drivers
	// change in between (a placement changes its worker's row too).
	only := openEvents(t, ctx, addr, "kind=worker&id=w1", nil)
	replayed := only.until(w1Second)
	submit()
	register("w2", 2)
	w1Third := register("w1", 3)
	live := only.until(w1Third)
	// Every event from the start, to compare filtered and resumed
	// streams with.
	all := openEvents(t, ctx, addr, "", nil).until(w1Third)
	var want []api.Event
	others := map[api.EventKind]int{}
	for _, e := range all {
		if e.event.Kind == api.EventWorker && e.event.ID == "w1" {
			want = append(want, e.event)
		} else {
			others[e.event.Kind]++
		}
	}
	if others[api.EventDriver] == 0 || others[api.EventWorker] == 0 || want[0].Index != w1First || want[len(want)-1].Index != w1Third {
		t.Fatalf("the whole stream: w1's events %+v and %v others, want w1's from %d to %d and drivers' and w2's",
			want, others, w1First, w1Third)
	}
	var got []api.Event
	for _, e := range append(replayed, live...) {
		if e.name != string(api.EventWorker) {
			t.Fatalf("the stream of w1's worker row sent a %s event", e.name)
		}
		got = append(got, e.event)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the stream of w1's worker row sent %d events, want the %d of the whole stream's that are w1's", len(got), len(want))
	}

	after := func(index uint64) []sse {
		i := slices.IndexFunc(all, func(e sse) bool { return e.event.Index > index })
		return all[i:]
	}
	if len(after(w1First)) < 4 {
		t.Fatalf("only %d events after w1's first registration", len(after(w1First)))
	}
	for _, tc := range []struct {
		name, query string
		header      http.Header
	}{
		{"Last-Event-ID", "", http.Header{"Last-Event-ID": {itoa(w1First)}}},
		{"Last-Event-ID over ?index=", "index=0", http.Header{"Last-Event-ID": {itoa(w1First)}}},
		{"?index=", "index=" + itoa(w1First), nil},
	} {
		if got := openEvents(t, ctx, addr, tc.query, tc.header).until(w1Third); !reflect.DeepEqual(got, after(w1First)) {
			t.Fatalf("%s %d: %d events from index %d, want the %d past it from index %d",
				tc.name, w1First, len(got), got[0].event.Index, len(after(w1First)), after(w1First)[0].event.Index)
		}
	}

	// A restore leaves nothing before its snapshot to replay.
	archive, err := cl.SnapshotSave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := submit()
	if _, err := cl.SnapshotRestore(ctx, archive); err != nil {
		t.Fatal(err)
	}
	drivers, err := cl.Drivers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var current []string
	for _, d := range drivers {
		current = append(current, d.ID)
	}
	slices.Sort(current)
	if len(current) != 2 || slices.Contains(current, gone) {
		t.Fatalf("drivers after the restore %v, want the 2 before %s", current, gone)
	}
	rs := openEvents(t, ctx, addr, "index="+itoa(w1First)+"&kind=driver", nil)
	reset := rs.next()
	if reset.name != api.OpReset || reset.event.Op != api.OpReset || reset.event.Index == 0 {
		t.Fatalf("resuming from before the restore: first %s %+v, want a reset", reset.name, reset.event)
	}
	var rows []string
	for range current {
		e := rs.next()
		if e.name != "driver" || e.event.Op != api.OpUpsert || e.event.Driver == nil || e.event.Index != reset.event.Index {
			t.Fatalf("after the reset: %s %+v, want a driver upsert at %d", e.name, e.event, reset.event.Index)
		}
		rows = append(rows, e.event.ID)
	}
	if !slices.Equal(rows, current) {
		t.Fatalf("rows after the reset %v, want the drivers %v", rows, current)
	}
}
