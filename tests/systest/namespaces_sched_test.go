package systest

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestNamespacesShareCoresByWeight: two namespaces of weights 1 and 3
// flood a cluster of four 4-core workers with 3-second drivers; once the
// first running drivers have ended, the cores their drivers hold settle
// at 1:3 (light's part 0.25, within 10 % of it, averaged over samples
// taken every 100 ms for 4 s while both still have drivers waiting).
func TestNamespacesShareCoresByWeight(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for name, weight := range map[string]float64{"light": 1, "heavy": 3} {
		// A driver share of 1: the drivers are the work here.
		one := 1.0
		if _, err := cl.ApplyNamespace(ctx, name, api.NamespaceRequest{Weight: &weight, DriverShare: &one}); err != nil {
			t.Fatalf("apply namespace %s: %v", name, err)
		}
	}
	// Enough of each to keep both waiting through the samples: heavy
	// runs 12 at a time, light 4.
	for i := range 90 {
		ns := "heavy"
		if i%3 == 0 {
			ns = "light"
		}
		submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{
			Argv: []string{"/bin/sh", "-c", "sleep 3"}, Cores: 1, MemoryMB: 64, Namespace: ns,
		}})
	}
	for i := range 4 {
		c.AddWorker(fmt.Sprintf("w%d", i+1))
	}
	// held returns the cores of light's and heavy's placed drivers, and
	// how many drivers have finished.
	held := func() (light, heavy, finished int) {
		for _, d := range listDrivers(t, ctx, cl) {
			switch {
			case d.State == model.DriverFinished:
				finished++
			case d.WorkerID == "" || d.State.Terminal():
			case d.Namespace == "light":
				light += d.Cores
			case d.Namespace == "heavy":
				heavy += d.Cores
			}
		}
		return light, heavy, finished
	}
	waitFor(t, time.Minute, "the first wave of drivers finished", func() bool { _, _, f := held(); return f >= 16 })
	var sum float64
	samples := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); samples++ {
		light, heavy, _ := held()
		if light+heavy > 0 {
			sum += float64(light) / float64(light+heavy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	light, heavy, finished := held()
	part := sum / float64(samples)
	t.Logf("light's part of the held cores %.3f over %d samples; at the end light %d cores, heavy %d, %d finished", part, samples, light, heavy, finished)
	if math.Abs(part-0.25) > 0.025 {
		t.Fatalf("light held %.3f of the cores on average, want 0.25 within 10 %%", part)
	}
	if heavy == 0 {
		t.Fatal("heavy ran out of waiting drivers before the samples ended: the test measured nothing")
	}
}

// TestPriorityOrderWithinANamespace: in a namespace that runs one driver
// at a time (--max-running-drivers 1), drivers submitted while its first
// runs are placed, as each one before them ends, highest priority first
// and, of equal priorities, in the order they were submitted. The order
// is that of the Raft entries that placed them, as the event stream
// gives them.
func TestPriorityOrderWithinANamespace(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Masters: 1, Workers: 1})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	one, whole := 1, 1.0
	if _, err := cl.ApplyNamespace(ctx, "batch", api.NamespaceRequest{MaxRunningDrivers: &one, DriverShare: &whole}); err != nil {
		t.Fatalf("apply namespace batch: %v", err)
	}
	p := newProbe(t)
	inBatch := func(body string, priority *int) api.SubmitRequest {
		req := p.request(body, false)
		req.Namespace, req.Priority, req.MemoryMB = "batch", priority, 64
		return req
	}
	first := submit(t, c, inBatch(`while [ ! -e "$PROBE/go" ]; do sleep 0.05; done`, nil))
	held := c.WaitDriver(first, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	events := cl.Events(ctx, client.EventQuery{After: held.ModifyIndex, Kinds: []api.EventKind{api.EventDriver}})

	priorities := []int{10, 50, 90, 50, 90}
	var ids []string
	priorityOf := map[string]int{}
	for _, pr := range priorities {
		id := submit(t, c, inBatch("true", &pr))
		ids = append(ids, id)
		priorityOf[id] = pr
	}
	want := slices.Clone(ids)
	slices.SortStableFunc(want, func(a, b string) int { return priorityOf[b] - priorityOf[a] })
	if err := os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for placed := map[string]bool{first: true}; len(got) < len(ids); {
		select {
		case e, ok := <-events.C():
			if !ok {
				t.Fatalf("event stream ended after placements %v: %v", got, events.Err())
			}
			if e.Driver != nil && e.Driver.WorkerID != "" && !placed[e.ID] {
				placed[e.ID] = true
				got = append(got, e.ID)
			}
		case <-ctx.Done():
			t.Fatalf("placed %d of %d drivers: %v", len(got), len(ids), ctx.Err())
		}
	}
	named := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			out = append(out, fmt.Sprintf("%s(%d)", id, priorityOf[id]))
		}
		return out
	}
	if !slices.Equal(got, want) {
		t.Fatalf("placed in order %v, want %v", named(got), named(want))
	}
}

// TestDriversHeldToTheirShareWhileExecutorsWait: namespace etl has a
// quota of 4 cores and a driver share of 0.5, on a cluster of 8 cores.
// Four 1-core drivers flood it; each one, once it runs, registers an
// app asking for two 1-core executors, and ends once they run. At every
// committed index, as the event stream gives the rows, etl's placed
// drivers hold at most 2 cores and all its work at most 4; the drivers
// beyond the share wait saying why, and every app's executors are
// placed: the drivers leave the quota's other half to them.
func TestDriversHeldToTheirShareWhileExecutorsWait(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Masters: 1, Workers: 2})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const quota, driverCap, drivers = 4, 2, 4
	cores, share := quota, 0.5
	ns, err := cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{Cores: &cores, DriverShare: &share})
	if err != nil {
		t.Fatalf("apply namespace etl: %v", err)
	}
	w := watchUse(ctx, cl, "etl", driverCap, ns.ModifyIndex)

	p := newProbe(t)
	var ids []string
	for range drivers {
		req := p.request(`while [ ! -e "$PROBE/go-$DROVER_DRIVER_ID" ]; do sleep 0.05; done`, false)
		req.Namespace, req.MemoryMB = "etl", 64
		ids = append(ids, submit(t, c, req))
	}
	want := fmt.Sprintf("driver share of etl reached (%d of %d cores)", driverCap, driverCap)
	// The last driver waits for the share, or, past it, is placed.
	if d := c.WaitDriver(ids[drivers-1], 30*time.Second, "waiting for the driver share", func(d *model.Driver) bool {
		return d.Message == want || d.WorkerID != ""
	}); d.Message != want {
		if u := w.until(t, d.ModifyIndex); u.overShare != "" {
			t.Fatal(u.overShare)
		}
		t.Fatalf("driver %s placed on %s, want it waiting: %q", d.ID, d.WorkerID, want)
	}

	apps := map[string]*client.App{}
	// pending are the drivers given an app and not yet ended, oldest
	// first: every running driver has its app, so that one waits for
	// executors while the oldest one's run.
	var pending []string
	for ended := range drivers {
		waitFor(t, 30*time.Second, "a running driver of etl with an app", func() bool {
			ds, err := cl.Drivers(ctx)
			if err != nil {
				return false
			}
			for _, d := range ds {
				if d.State == model.DriverRunning && apps[d.ID] == nil {
					spec := p.appSpec("exec sleep 600", 2)
					spec.DriverID, spec.DriverAttempt, spec.MemoryPerExecutorMB = d.ID, d.Attempt, 64
					apps[d.ID] = registerApp(t, c, spec)
					pending = append(pending, d.ID)
				}
			}
			return len(pending) > 0
		})
		id := pending[0]
		pending = pending[1:]
		running(t, apps[id], 2)
		if ended == 0 && len(pending) > 0 {
			full := fmt.Sprintf("namespace etl is at its cores quota (%d of %d)", quota, quota)
			if s := appStatus(t, c, apps[pending[0]].ID()); s.Message != full {
				t.Errorf("the app of the second driver waits with %q, want %q", s.Message, full)
			}
		}
		if err := os.WriteFile(filepath.Join(p.dir, "go-"+id), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
	}
	ds, err := cl.Drivers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, d := range ds {
		last = max(last, d.ModifyIndex)
	}
	u := w.until(t, last)
	t.Logf("over %d committed indexes etl's drivers held at most %d cores, its work %d; %d executors placed",
		u.indexes, u.maxDriverCores, u.maxCores, u.executors)
	switch {
	case u.overShare != "":
		t.Fatal(u.overShare)
	case u.maxCores > quota:
		t.Fatalf("etl's work held %d cores, past its quota of %d", u.maxCores, quota)
	case u.maxDriverCores < driverCap || u.maxCores < quota:
		t.Fatalf("etl's drivers held at most %d cores and its work %d: the share and the quota were never reached", u.maxDriverCores, u.maxCores)
	case u.executors != 2*drivers:
		t.Fatalf("%d executors placed, want %d", u.executors, 2*drivers)
	}
}

// nsUse is what a namespace's work held at the committed indexes a
// useWatch saw: the most its placed drivers held (cores), the most its
// drivers and executors held together, the executors placed, the
// indexes seen, and the first index where its drivers held more than
// the driver share lets them ("" for none).
type nsUse struct {
	maxDriverCores, maxCores, executors, indexes int
	overShare                                    string
}

// useWatch follows a namespace's use through the event stream.
type useWatch struct {
	done   chan struct{}
	seen   atomic.Uint64
	cancel context.CancelFunc
	use    nsUse
}

// watchUse follows the drivers and executors of a cluster whose only
// work is namespace ns's from index on, and checks at every committed
// index, once the first event of the next one has arrived (so once
// every event of its entry has), that ns's placed drivers hold at most
// driverCap cores unless only one is placed (a namespace's first driver
// always runs).
func watchUse(ctx context.Context, cl *client.Client, ns string, driverCap int, index uint64) *useWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &useWatch{done: make(chan struct{}), cancel: cancel}
	events := cl.Events(ctx, client.EventQuery{After: index, Kinds: []api.EventKind{api.EventDriver, api.EventExecutor}})
	drivers, executors := map[string]int{}, map[string]int{}
	placed := map[string]bool{}
	check := func(at uint64) {
		d, e := 0, 0
		for _, n := range drivers {
			d += n
		}
		for _, n := range executors {
			e += n
		}
		w.use.indexes++
		w.use.maxDriverCores = max(w.use.maxDriverCores, d)
		w.use.maxCores = max(w.use.maxCores, d+e)
		if d > driverCap && len(drivers) > 1 && w.use.overShare == "" {
			w.use.overShare = fmt.Sprintf("at index %d %s's %d placed drivers hold %d cores, past its driver share of %d", at, ns, len(drivers), d, driverCap)
		}
	}
	go func() {
		defer close(w.done)
		var at uint64
		for e := range events.C() {
			if e.Index != at && at != 0 {
				check(at)
			}
			at = e.Index
			switch {
			case e.Op == api.OpReset:
				clear(drivers)
				clear(executors)
			case e.Op == api.OpDelete:
				delete(drivers, e.ID)
				delete(executors, e.ID)
			case e.Driver != nil:
				delete(drivers, e.ID)
				if d := e.Driver; d.WorkerID != "" && !d.State.Terminal() && model.NamespaceOf(d.Namespace) == ns {
					drivers[e.ID] = d.Cores
				}
			case e.Executor != nil:
				delete(executors, e.ID)
				if x := e.Executor; !x.State.Terminal() {
					executors[e.ID] = x.Cores
					if !placed[e.ID] {
						placed[e.ID] = true
						w.use.executors++
					}
				}
			}
			w.seen.Store(at)
		}
	}()
	return w
}

// until waits for the watch to have seen index, stops it and returns
// what it saw at the indexes before the last one it saw, whose entry may
// have arrived in part.
func (w *useWatch) until(t *testing.T, index uint64) nsUse {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("the event stream at index %d", index), func() bool { return w.seen.Load() >= index })
	w.cancel()
	<-w.done
	return w.use
}
