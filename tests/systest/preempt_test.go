package systest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestPreemptionTakesBackFairShare: namespace ml fills a worker of ten
// cores with supervised drivers; etl, of the same weight, then submits
// as many. Both may preempt. Within the grace plus 2 s of etl's
// submissions, etl runs at least 90 % of its fair share (as the
// namespace status gives it): ml's newest drivers got SIGTERM, went back
// to the queue "preempted by namespace etl", and their cores went to
// etl. Then nothing more moves for twenty rounds: ml, at its share and
// waiting, never takes anything back from etl, and ml lost no more than
// the dead zone above its share lets it keep.
func TestPreemptionTakesBackFairShare(t *testing.T) {
	const grace = 3 * time.Second
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerCores: 10,
		MasterArgs: []string{"--preemption-grace", grace.String(), "--preemption-interval", "200ms"}})
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	env := c.ClientEnv()
	apply := func(ns string, more ...string) {
		t.Helper()
		args := append([]string{"operator", "namespace", "apply", ns, "--driver-share", "1", "--max-queued-drivers", "20"}, more...)
		if out, errOut, code := runDrover(t, env, args...); code != 0 {
			t.Fatalf("namespace apply %s: exit %d: %s%s", ns, code, out, errOut)
		}
	}
	apply("ml", "--preempt")
	apply("etl")
	submitIn := func(ns string, n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, submit(t, c, api.SubmitRequest{Token: fmt.Sprintf("%s-%d", ns, i), Name: ns,
				DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "300"}, Cores: 1, MemoryMB: 32, Supervise: true, Namespace: ns}}))
		}
		return ids
	}
	ml := submitIn("ml", 10)
	for _, id := range ml {
		c.WaitDriver(id, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	}
	// etl's drivers all queue before it may preempt, so that the queue,
	// first come first served, holds them ahead of ml's relaunches.
	etl := submitIn("etl", 10)
	start := time.Now()
	apply("etl", "--preempt")
	cl := c.Client()
	drivers := func(ids []string) []*model.Driver {
		var out []*model.Driver
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			d, err := cl.Driver(ctx, id)
			cancel()
			if err != nil {
				t.Fatalf("driver %s: %v", id, err)
			}
			out = append(out, d)
		}
		return out
	}
	running := func(ds []*model.Driver) int {
		n := 0
		for _, d := range ds {
			if d.State == model.DriverRunning {
				n++
			}
		}
		return n
	}
	var st api.NamespaceStatus
	out, errOut, code := runDrover(t, env, "operator", "namespace", "status", "etl", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.FairShare <= 0 {
		t.Fatalf("namespace status etl: exit %d: %s%s", code, out, errOut)
	}
	want := int(st.FairShare*10*0.9 + 0.999)
	waitFor(t, grace+2*time.Second-time.Since(start), fmt.Sprintf("etl running %d drivers (90%% of its fair share %.2f)", want, st.FairShare), func() bool {
		return running(drivers(etl)) >= want
	})
	t.Logf("etl ran %d drivers %s after it could preempt", want, time.Since(start).Round(time.Millisecond))

	preempted := func(ds []*model.Driver, by string) int {
		n := 0
		for _, d := range ds {
			for _, a := range d.Attempts {
				if strings.HasPrefix(a.Reason, "preempted by namespace ") {
					if a.Reason != model.PreemptedReason(by) || a.State != model.DriverKilled {
						t.Fatalf("driver %s attempt %d: %s %q, want KILLED preempted by namespace %s", d.ID, a.Attempt, a.State, a.Reason, by)
					}
					n++
				}
			}
		}
		return n
	}
	time.Sleep(20 * 200 * time.Millisecond)
	mls, etls := drivers(ml), drivers(etl)
	if n := preempted(etls, "ml"); n != 0 {
		t.Fatalf("%d of etl's attempts were preempted back", n)
	}
	if n := preempted(mls, "etl"); n < 1 || n > 5 {
		t.Fatalf("%d of ml's attempts preempted, want 1 to 5: never below its share", n)
	}
	if r := running(mls); r < 5 {
		t.Fatalf("ml runs %d drivers, below its share of 5", r)
	}
	for _, d := range mls {
		if d.State == model.DriverRelaunching && d.Message != "preempted by namespace etl" {
			t.Fatalf("ml's relaunched driver %s waits with %q", d.ID, d.Message)
		}
	}
}
