package systest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// eventKey names one event: its entry's index and its row.
type eventKey struct {
	index    uint64
	kind     api.EventKind
	id, op   string
	state    string
	modifyAt uint64
}

func keyOf(e api.Event) eventKey {
	k := eventKey{index: e.Index, kind: e.Kind, id: e.ID, op: e.Op}
	if e.Driver != nil {
		k.state, k.modifyAt = string(e.Driver.State), e.Driver.ModifyIndex
	}
	return k
}

// collect reads a stream's events until it has delivered every one of
// index end: until one past end arrives, for one entry (a batch of
// reports) can change several rows, whose events share its index. The
// caller commits an entry past end first.
func collect(t *testing.T, s *client.EventStream, end uint64) []api.Event {
	t.Helper()
	var out []api.Event
	timeout := time.After(5 * time.Minute)
	for len(out) == 0 || out[len(out)-1].Index <= end {
		select {
		case e, ok := <-s.C():
			if !ok {
				t.Fatalf("stream ended: %v", s.Err())
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("stream stuck before index %d", end)
		}
	}
	return out
}

// The event stream delivers every change of 200 drivers in index order
// across a leader SIGKILL: the stream that read from the leader resumes on
// another master from its last index, and what it delivers is exactly what
// a stream that never lost its master delivers, with no gap and no
// duplicate. A blocking read answers when the row it waits on changes.
func TestEventStreamAcrossLeaderKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Workers: 2, WorkerCores: 8})
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The stream reads from the leader first; the other masters are its
	// fall-backs.
	addrs := []string{leader.HTTP}
	for _, m := range c.Masters {
		if m != leader {
			addrs = append(addrs, m.HTTP)
		}
	}
	opts := c.ClientOptions()
	opts.RetryInterval = 50 * time.Millisecond
	streamClient, err := client.New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start, err := c.Client().State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := client.EventQuery{After: start.AppliedIndex, Kinds: []api.EventKind{api.EventDriver}}
	stream := streamClient.Events(ctx, q)

	cl := c.Client()
	ids := make([]string, 200)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		if i == 100 {
			wg.Wait()
			leader.Kill()
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := cl.Submit(ctx, api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
				return
			}
			ids[i] = res.DriverID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var end uint64
	// Each driver's end, as its row says: on a loaded machine a worker cut
	// off from the leader by the kill may end an attempt otherwise than
	// FINISHED, and the stream must deliver that end all the same.
	ended := map[string]model.DriverState{}
	for _, id := range ids {
		d := c.WaitDriver(id, 2*time.Minute, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
		end = max(end, d.ModifyIndex)
		ended[id] = d.State
	}
	// A driver no worker can hold commits the entry past end that
	// collect waits for.
	if _, err := cl.Submit(ctx, api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1000, MemoryMB: 64}}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, stream, end)
	// A stream from a master that never went away, from the same index.
	ref := collect(t, c.Client().Events(ctx, q), end)
	var gotKeys, refKeys []eventKey
	seen := map[eventKey]bool{}
	for _, e := range got {
		k := keyOf(e)
		if seen[k] {
			t.Fatalf("event delivered twice: %+v", k)
		}
		seen[k] = true
		if k.index <= end {
			gotKeys = append(gotKeys, k)
		}
	}
	for _, e := range ref {
		if e.Index <= end {
			refKeys = append(refKeys, keyOf(e))
		}
	}
	if !slices.IsSortedFunc(gotKeys, func(a, b eventKey) int { return int(a.index) - int(b.index) }) {
		t.Fatal("events out of index order")
	}
	if !slices.Equal(gotKeys, refKeys) {
		t.Fatalf("the stream across the kill delivered %d events, the reference %d; first difference at %s", len(gotKeys), len(refKeys), firstDiff(gotKeys, refKeys))
	}
	delivered := map[string]bool{}
	for _, k := range gotKeys {
		if k.modifyAt != k.index {
			t.Fatalf("event %+v carries a row of index %d", k, k.modifyAt)
		}
		if k.state == string(ended[k.id]) {
			delivered[k.id] = true
		}
	}
	for _, id := range ids {
		if !delivered[id] {
			t.Fatalf("no %s event for %s, which ended so", ended[id], id)
		}
	}

	// A blocking read answers as soon as the row changes.
	p := newProbe(t)
	id := submit(t, c, p.request("sleep 60", false))
	d := c.WaitDriver(id, time.Minute, "running", isState(model.DriverRunning))
	woke := make(chan time.Time, 1)
	go func() {
		_, _, err := cl.WaitDriver(ctx, id, d.ModifyIndex, time.Minute)
		if err != nil {
			t.Errorf("blocking read: %v", err)
		}
		woke <- time.Now()
	}()
	// The read is held: nothing changes the row for a moment.
	select {
	case <-woke:
		t.Fatal("the blocking read answered before any change")
	case <-time.After(500 * time.Millisecond):
	}
	if err := cl.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	at := <-woke
	// Woken by the change, not by the end of its minute's wait; how soon
	// is a figure for the log (some milliseconds here), not a bound that
	// a loaded machine would break.
	lag := at.Sub(killed)
	t.Logf("the blocking read answered %s after the kill was acknowledged", lag)
	if lag > 30*time.Second {
		t.Fatalf("the blocking read answered %s after the kill was acknowledged: it waited for its timeout, not for the change", lag)
	}
}

func firstDiff(a, b []eventKey) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%d: %+v vs %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("%d (one is a prefix of the other)", min(len(a), len(b)))
}

// drover client watch ID follows one driver through its changes and exits
// as submit --wait does: 0 for FINISHED, 1 for a driver that failed.
func TestClientWatchFollowsADriver(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Workers: 1})
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	p := newProbe(t)
	for _, tc := range []struct {
		body  string
		code  int
		final string
	}{{"sleep 1; exit 0", 0, "FINISHED"}, {"sleep 1; exit 3", 1, "FAILED"}} {
		id := submit(t, c, p.request(tc.body, false))
		stdout, stderr, code := runDrover(t, c.ClientEnv(), "client", "watch", id)
		if code != tc.code || !strings.Contains(stdout, id) || !strings.Contains(stdout, "\t"+tc.final+"\t") {
			t.Fatalf("watch %s (%s): exit %d, stdout %q, stderr %q; want exit %d and a %s line", id, tc.body, code, stdout, stderr, tc.code, tc.final)
		}
	}
	stdout, stderr, code := runDrover(t, c.ClientEnv(), "client", "watch", "--kind", "bogus")
	if code != 1 || !strings.Contains(stderr, "unknown event kind") {
		t.Fatalf("watch --kind bogus: exit %d, %q %q", code, stdout, stderr)
	}

	// Without an ID: the whole stream of drivers, from now on, as JSON.
	cmd := exec.Command(testcluster.Binary(t), "client", "watch", "--kind", "driver", "--json")
	cmd.Env = append(os.Environ(), c.ClientEnv()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := make(chan api.Event)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e api.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("watch --json printed %q: %v", sc.Text(), err)
				return
			}
			lines <- e
		}
	}()
	var last uint64
	next := func(what string) api.Event {
		t.Helper()
		select {
		case e, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended before %s", what)
			}
			if e.Kind != api.EventDriver || e.Driver == nil || e.Index < last {
				t.Fatalf("watch --kind driver printed %+v after index %d", e, last)
			}
			last = e.Index
			return e
		case <-time.After(90 * time.Second):
			t.Fatalf("watch printed nothing more within 90 s, waiting for %s", what)
		}
		return api.Event{}
	}
	// A line about the first driver says the stream is open. On a loaded
	// machine the watch may start only once that driver has ended, and
	// the first line about it is then its FINISHED one, which counts.
	first := submit(t, c, p.request("sleep 5; exit 0", false))
	finished := map[string]bool{}
	for {
		e := next("a line about " + first)
		finished[e.ID] = finished[e.ID] || e.Driver.State == model.DriverFinished
		if e.ID == first {
			break
		}
	}
	second := submit(t, c, p.request("exit 0", false))
	seenSecond := map[model.DriverState]bool{}
	for !finished[first] || !finished[second] {
		e := next("both drivers FINISHED")
		if e.ID == second {
			seenSecond[e.Driver.State] = true
		}
		if e.Driver.State == model.DriverFinished {
			finished[e.ID] = true
		}
	}
	// Its start and end may reach the leader in one report: RUNNING is
	// not asked for.
	if !seenSecond[model.DriverSubmitted] {
		t.Fatalf("watch printed %s in the states %v, want SUBMITTED and FINISHED", second, seenSecond)
	}
}

// BenchmarkEventDelivery measures, with drivers submitted at 1,000 a second
// for 10 s (each one driver event: no worker places them), the time from a
// submission's acknowledgement to its event reaching a stream on a
// follower: the median and the 99th percentile. Run with -benchtime=1x.
func BenchmarkEventDelivery(b *testing.B) {
	const rate, seconds = 1000, 10
	c := testcluster.New(b, testcluster.Options{})
	leader, err := c.Leader(20 * time.Second)
	if err != nil {
		b.Fatal(err)
	}
	follower := c.Follower(leader)
	// One master takes the load, as a sticky client's would: the CLI's
	// fan-out to every master would triple the requests a 2-core machine
	// serves beside the stream.
	opts := c.ClientOptions()
	opts.Sticky = true
	cl, err := client.New([]string{leader.HTTP}, opts)
	if err != nil {
		b.Fatal(err)
	}
	streamClient, err := client.New([]string{follower.HTTP}, c.ClientOptions())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range b.N {
		st, err := testcluster.State(ctx, follower)
		if err != nil {
			b.Fatal(err)
		}
		stream := streamClient.Events(ctx, client.EventQuery{After: st.AppliedIndex, Kinds: []api.EventKind{api.EventDriver}})
		var mu sync.Mutex
		acked := map[string]time.Time{}
		received := map[string]time.Time{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for e := range stream.C() {
				mu.Lock()
				if _, ok := received[e.ID]; !ok {
					received[e.ID] = time.Now()
				}
				n := len(received)
				mu.Unlock()
				if n == rate*seconds {
					return
				}
			}
		}()
		tick := time.NewTicker(time.Second / rate)
		sem := make(chan struct{}, 256)
		var wg sync.WaitGroup
		for range rate * seconds {
			<-tick.C
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				res, err := cl.Submit(ctx, api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				acked[res.DriverID] = time.Now()
				mu.Unlock()
			})
		}
		tick.Stop()
		wg.Wait()
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("the stream delivered %d of %d events", len(received), rate*seconds)
		}
		var lags []time.Duration
		for id, at := range acked {
			lags = append(lags, received[id].Sub(at))
		}
		slices.Sort(lags)
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d events at %d/s: from acknowledgement to the follower's stream p50 %s, p99 %s, worst %s",
			len(lags), rate, lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
		cancel()
	}
}
