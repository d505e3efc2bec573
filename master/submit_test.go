package master_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master/mastertest"
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
		reqs = append(reqs, api.SubmitRequest{Token: client.NewToken(), Cores: 1, MemoryMB: 64})
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
