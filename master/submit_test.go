package master_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// Submissions that reach the leader together are committed together, in
// fewer entries than submissions, and each caller still gets its own
// answer: its own driver, the same driver for every copy of one token,
// and its own refusal for a request that is invalid, which refuses no
// other.
func TestConcurrentSubmissionsShareEntries(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	leader := c.Leader()
	cl, ctx := c.Client(leader), c.Context()
	state := func() uint64 {
		t.Helper()
		s, err := cl.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.AppliedIndex
	}
	const tokens, twice, invalid = 100, 20, 10
	reqs := make([]api.SubmitRequest, 0, tokens+twice+invalid)
	for i := range tokens {
		r := submitReq()
		r.Name = fmt.Sprint("group-", i)
		reqs = append(reqs, r)
		if i < twice {
			reqs = append(reqs, r)
		}
	}
	for range invalid {
		reqs = append(reqs, api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Cores: 1, MemoryMB: 64}})
	}
	before := state()
	res := make([]api.SubmitResponse, len(reqs))
	errs := make([]error, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			<-start
			res[i], errs[i] = cl.Submit(ctx, r)
		})
	}
	close(start)
	wg.Wait()
	entries := state() - before

	byToken := map[string]string{}
	drivers := map[string]bool{}
	for i, r := range reqs {
		if len(r.Argv) == 0 {
			if !errors.Is(errs[i], api.ErrInvalidRequest) {
				t.Errorf("request %d without a program: %+v, %v; want ErrInvalidRequest", i, res[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || res[i].DriverID == "" {
			t.Fatalf("request %d: %+v, %v", i, res[i], errs[i])
		}
		if id, ok := byToken[r.Token]; ok {
			if id != res[i].DriverID {
				t.Errorf("token %s made %s and %s", r.Token, id, res[i].DriverID)
			}
			continue
		}
		byToken[r.Token] = res[i].DriverID
		if drivers[res[i].DriverID] {
			t.Errorf("%s answered to two tokens", res[i].DriverID)
		}
		drivers[res[i].DriverID] = true
	}
	all, err := cl.Drivers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != tokens {
		t.Errorf("%d drivers in the tables, want %d", len(all), tokens)
	}
	for _, d := range all {
		if !drivers[d.ID] || byToken[d.Token] != d.ID {
			t.Errorf("driver %s (token %s) was never answered with", d.ID, d.Token)
		}
	}
	// One entry each would be tokens entries; how far below depends on
	// how the requests overlap on a loaded machine.
	if entries == 0 || entries > tokens*3/4 {
		t.Errorf("%d submissions took %d entries, want at most %d", tokens, entries, tokens*3/4)
	}
	t.Logf("%d submissions (%d with their token twice) in %d entries", tokens, twice, entries)
}

// A batch is answered submission by submission, in order, each as a
// request of its own would be: a new driver, the same driver for a token
// sent twice or known already, and its own refusal for an invalid one,
// which refuses no other. It takes no more entries than it has
// submissions to commit, and a follower hands it to the leader whole. A
// batch that is empty, too long or malformed is refused whole and
// changes nothing.
func TestSubmitBatch(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	leader, follower := c.Leader(), c.Followers()[0]
	cl, ctx := c.Client(leader), c.Context()
	applied := func() uint64 {
		t.Helper()
		s, err := cl.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.AppliedIndex
	}
	knownReq := submitReq()
	known, err := cl.Submit(ctx, knownReq)
	if err != nil {
		t.Fatal(err)
	}
	a, b := submitReq(), submitReq()
	invalid := submitReq()
	invalid.Argv = nil
	batch := api.SubmitBatchRequest{Submissions: []api.SubmitRequest{a, invalid, b, a, knownReq}}

	for _, via := range []*mastertest.Node{leader, follower} {
		before := applied()
		status, _, body := post(t, via.HTTP(), api.PathSubmitBatch, batch, nil)
		var res api.SubmitBatchResponse
		if status != http.StatusOK || json.Unmarshal(body, &res) != nil || len(res.Results) != len(batch.Submissions) {
			t.Fatalf("batch through %s: %d %s", via.ID, status, body)
		}
		r := res.Results
		if r[0].Error != nil || r[2].Error != nil || r[0].DriverID == "" || r[2].DriverID == "" || r[0].DriverID == r[2].DriverID {
			t.Errorf("through %s: two new submissions answered %+v and %+v", via.ID, r[0], r[2])
		}
		if r[1].Error == nil || r[1].Error.Code != api.CodeInvalidRequest || r[1].DriverID != "" {
			t.Errorf("through %s: a submission without a program answered %+v, want invalid_request", via.ID, r[1])
		}
		if r[3].Error != nil || r[3].DriverID != r[0].DriverID || !r[3].Existing {
			t.Errorf("through %s: a token twice in one batch answered %+v, then %+v; want the same driver, existing the second time", via.ID, r[0], r[3])
		}
		if r[4].Error != nil || r[4].DriverID != known.DriverID || !r[4].Existing {
			t.Errorf("through %s: a known token answered %+v, want %s, existing", via.ID, r[4], known.DriverID)
		}
		// The second time round every token is known: nothing to
		// commit, and every driver is the first time's.
		if entries := applied() - before; (via == leader && entries > 2) || (via == follower && entries != 0) {
			t.Errorf("through %s: %d entries", via.ID, entries)
		}
		if via == follower && (!r[0].Existing || !r[2].Existing) {
			t.Errorf("the same batch again: %+v, want every driver existing", r)
		}
	}
	if all, err := cl.Drivers(ctx); err != nil || len(all) != 3 {
		t.Fatalf("drivers after the batches: %d, %v; want 3", len(all), err)
	}

	before := applied()
	tooMany := api.SubmitBatchRequest{Submissions: make([]api.SubmitRequest, api.MaxBatchSubmissions+1)}
	for i := range tooMany.Submissions {
		tooMany.Submissions[i] = submitReq()
	}
	for name, body := range map[string]any{
		"empty":         api.SubmitBatchRequest{},
		"too long":      tooMany,
		"unknown field": map[string]any{"submissions": []any{}, "extra": 1},
		"not a batch":   []api.SubmitRequest{submitReq()},
	} {
		status, _, out := post(t, follower.HTTP(), api.PathSubmitBatch, body, nil)
		var e api.Error
		if status != http.StatusBadRequest || json.Unmarshal(out, &e) != nil || e.Code != api.CodeInvalidRequest {
			t.Errorf("%s batch: %d %s, want 400 invalid_request", name, status, out)
		}
	}
	if entries := applied() - before; entries != 0 {
		t.Errorf("refused batches made %d entries", entries)
	}
}

// A batch larger than the client's free slots, sent again whole each time
// part of it comes back too_many_requests, is committed in full: the
// submissions the master holds committed need no slot.
func TestWholeBatchSentAgainMovesOn(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.MaxSubmitsPerClient = 2 })
	leader := c.Leader()
	batch := api.SubmitBatchRequest{Submissions: []api.SubmitRequest{submitReq(), submitReq(), submitReq(), submitReq(), submitReq()}}
	ids := map[string]bool{}
	for send := 1; ; send++ {
		if send > 3 {
			t.Fatalf("%d sends of a batch of 5 at 2 slots, and still not all committed", send-1)
		}
		status, _, body := post(t, leader.HTTP(), api.PathSubmitBatch, batch, nil)
		var res api.SubmitBatchResponse
		if status != http.StatusOK || json.Unmarshal(body, &res) != nil || len(res.Results) != len(batch.Submissions) {
			t.Fatalf("send %d: %d %s", send, status, body)
		}
		refused := 0
		for i, r := range res.Results {
			switch {
			case r.Error != nil && r.Error.Code == api.CodeTooManyRequests:
				refused++
			case r.Error != nil || r.DriverID == "":
				t.Fatalf("send %d, submission %d: %+v", send, i, r)
			default:
				ids[r.DriverID] = true
			}
		}
		if refused == 0 {
			break
		}
	}
	if len(ids) != 5 {
		t.Fatalf("%d drivers, want 5", len(ids))
	}
}

// A body that fits the bound reaches the leader through a follower, and
// from the Go client, whatever characters it holds: neither the client nor
// the follower escapes <, & and > sixfold (JSON for HTML), which made the
// leader refuse as too large what the follower had taken.
func TestBodiesThatFitReachTheLeader(t *testing.T) {
	// A program as large as a body may be: the bound on programs is not
	// what this is about.
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxProgramSize = api.MaxBodyBytes })
	arg := strings.Repeat("<&>", 100_000) // 300 KB, 1.8 MB escaped
	body := fmt.Sprintf(`{"token":%q,"argv":["/bin/echo",%q],"cores":1,"memory_mb":1}`, client.NewToken(), arg)
	// The cluster's election timeout is 200 ms, which a loaded machine can
	// let pass while the leader commits this entry: a 503 then says the
	// body reached the leader and the commit is unknown. Sent again with
	// its token, as a client sends it, it is the same submission.
	var follower *mastertest.Node
	var res api.SubmitResponse
	for try := 1; ; try++ {
		follower = c.Followers()[0]
		resp, err := http.Post("http://"+follower.HTTP()+api.PathDrivers, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && try < 5 {
			t.Logf("try %d through follower %s: %s", try, follower.ID, out)
			continue
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &res) != nil {
			t.Fatalf("a %d-byte body through follower %s: %d %s", len(body), follower.ID, resp.StatusCode, out)
		}
		break
	}
	req := submitReq()
	req.Argv = []string{"/bin/echo", arg}
	viaClient, err := c.Client(follower).Submit(c.Context(), req)
	if err != nil {
		t.Fatalf("the Go client: %v", err)
	}
	for _, id := range []string{res.DriverID, viaClient.DriverID} {
		if d, err := c.Client().Driver(c.Context(), id); err != nil || len(d.Argv) != 2 || d.Argv[1] != arg {
			t.Fatalf("driver %s: %v", id, err)
		}
	}
}

// Where the masters require a credential, a write without any is refused
// 401 before its body is read: a body that never ends gets its answer at
// once, and nothing is decoded for nobody. A write with a credential is
// read and answered as before.
func TestAnonymousWritesAreRefusedBeforeTheirBody(t *testing.T) {
	const submitToken = "SubmitTok-0123456789abcdef"
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		cfg.OperatorToken, cfg.SubmitToken = "OperatorTok-0123456789abcdef", submitToken
	})
	addr := c.Leader().HTTP()
	for _, path := range []string{api.PathSubmitBatch, api.PathDrivers, api.PathRegisterWorker} {
		body, open := io.Pipe()
		go func() { _, _ = open.Write([]byte(`{"submissions":[`)) }() // and never more
		// A master reading the body would wait for the rest of it, until
		// this client gives up and ends the body.
		ctx, cancel := context.WithTimeout(c.Context(), 5*time.Second)
		context.AfterFunc(ctx, func() { open.CloseWithError(ctx.Err()) })
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.Error
		if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(out, &e) != nil || e.Code != api.CodeUnauthenticated {
			t.Errorf("%s without a token: %d %s, want 401 unauthenticated", path, resp.StatusCode, out)
		}
	}
	status, _, out := post(t, addr, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{submitReq()}},
		http.Header{"Authorization": {"Bearer " + submitToken}})
	if status != http.StatusOK {
		t.Fatalf("a batch with the submit token: %d %s", status, out)
	}
}

// A write whose body is JSON must say so (Content-Type: application/json,
// parameters allowed): one that says text/plain, a form or nothing, as a
// page of another site can make a browser post, is 415 before its body is
// read, and nothing is committed. The same submission with
// application/json;charset=UTF-8 is taken.
func TestJSONWritesNeedTheirContentType(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	addr := c.Leader().HTTP()
	for _, path := range []string{api.PathDrivers, api.PathSubmitBatch, api.PathRegisterWorker, api.PathApps} {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
			body := `{"token":"` + client.NewToken() + `","argv":["/bin/true"],"cores":1,"memory_mb":64}`
			status, _, out := post(t, addr, path, json.RawMessage(body), http.Header{"Content-Type": {ct}})
			var e api.Error
			if status != http.StatusUnsupportedMediaType || json.Unmarshal(out, &e) != nil || e.Code != api.CodeUnsupportedMediaType ||
				!strings.Contains(e.Error, "Content-Type: application/json") {
				t.Errorf("%s with Content-Type %q: %d %s, want 415 unsupported_media_type", path, ct, status, out)
			}
		}
	}
	st, err := c.Client().State(c.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Drivers) != 0 || len(st.Workers) != 0 || len(st.Apps) != 0 {
		t.Fatalf("refused writes changed the tables: %d drivers, %d workers, %d apps", len(st.Drivers), len(st.Workers), len(st.Apps))
	}
	status, _, out := post(t, addr, api.PathDrivers, submitReq(), http.Header{"Content-Type": {"application/json;charset=UTF-8"}})
	if status != http.StatusOK {
		t.Fatalf("a submission with application/json;charset=UTF-8: %d %s", status, out)
	}
}
