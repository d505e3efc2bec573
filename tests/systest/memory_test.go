package systest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// What a master's memory does when one submitter's programs are large: an
// app whose environment is nearly the largest a request may carry, changed
// 200 times by requests of some 20 bytes each, and ten reads at once of a
// drivers table of 100 such programs (20 in the test). Events and reads share the rows the
// tables hold, so neither multiplies the environment: the app's events
// hold its row, and a read of the table encodes one row at a time.

const (
	// memEnvVars variables of 62 bytes each, 68 in JSON: an environment
	// of 0.91 MiB as JSON, about as large as fits in a request
	// (api.MaxBodyBytes).
	memEnvVars = 14000
	// memMaxProgram is the masters' --max-program-size, which takes
	// such a program (64k by default).
	memMaxProgram = "1m"
	// memAppEvents is how many changes the app goes through.
	memAppEvents = 200
	// memDrivers drivers share one environment, memTestDrivers in the
	// test, which has to finish under the race detector on a loaded
	// machine; memReaders read the table at once.
	memDrivers     = 100
	memTestDrivers = 20
	memReaders     = 10

	// The bounds the tests hold the master to, in MiB: each a quarter or
	// less of what the master took when each event and each read copied
	// the rows, and several times what it takes now, with the race
	// detector too (docs/deployment.md gives the figures).
	memAppEventsHeapMiB  = 48
	memAppEventsRSSMiB   = 128
	memReadsHeapPeakMiB  = 192
	memReadsRSSGrowthMiB = 384
)

// memEnv is the large environment.
func memEnv() map[string]string {
	env := make(map[string]string, memEnvVars)
	for i := range memEnvVars {
		env[fmt.Sprintf("V%05d", i)] = fmt.Sprintf("%05d-%s", i, strings.Repeat("x", 50))
	}
	return env
}

// memAppEventsFigures is a master's memory, in KiB, before an app with a
// large environment registers and after it went through memAppEvents
// changes: each a settled low point (tputSettledMemory).
type memAppEventsFigures struct {
	before, after tputMemory
}

// measureAppEvents registers an app with the large environment on a
// master of its own and changes its executor target memAppEvents times.
func measureAppEvents(tb testing.TB) memAppEventsFigures {
	// The app's client never watches: --app-timeout keeps it alive.
	c := testcluster.New(tb, testcluster.Options{Masters: 1, MasterArgs: []string{"--app-timeout", "1h", "--max-program-size", memMaxProgram}})
	n := c.Masters[0]
	cl := c.Client()
	var f memAppEventsFigures
	f.before = tputSettledMemory(tb, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var reg api.RegisterAppResponse
	if err := cl.Do(ctx, http.MethodPost, api.PathApps, api.RegisterAppRequest{
		Token: "memory-app", Name: "large", CoresPerExecutor: 1, MemoryPerExecutorMB: 64,
		Argv: []string{"/bin/true"}, Env: memEnv(),
	}, &reg); err != nil {
		tb.Fatal(err)
	}
	for i := range memAppEvents {
		if err := cl.Do(ctx, http.MethodPost, api.AppPath(reg.AppID, "/executors"), api.RequestExecutorsRequest{Total: i % 7}, nil); err != nil {
			tb.Fatal(err)
		}
	}
	f.after = tputSettledMemory(tb, n)
	return f
}

// memReadFigures is a master's memory, in KiB, with drivers
// sharing the large environment, and at its highest while memReaders
// read the drivers table at once; with the bytes of one read and how
// long the reads took.
type memReadFigures struct {
	before tputMemory
	// heapPeak is the highest heap sampled during the reads, rssPeak
	// the resident set's high-water mark over them (VmHWM, reset just
	// before).
	heapPeak, rssPeak int64
	readBytes         int64
	elapsed           time.Duration
}

// measureDriverReads submits drivers drivers with the large environment
// to a master of its own (no worker: they wait) and reads the drivers
// table memReaders times at once.
func measureDriverReads(tb testing.TB, drivers int) memReadFigures {
	if os.Geteuid() != 0 {
		tb.Skip("needs root to reset the master's peak resident set (/proc/PID/clear_refs)")
	}
	c := testcluster.New(tb, testcluster.Options{Masters: 1, MasterArgs: []string{"--max-program-size", memMaxProgram}})
	n := c.Masters[0]
	cl, err := client.New([]string{n.HTTP}, client.Options{RequestTimeout: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	env := memEnv()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range drivers {
		if _, err := cl.Submit(ctx, api.SubmitRequest{Token: fmt.Sprintf("memory-%d", i), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Env: env, Cores: 1, MemoryMB: 64}}); err != nil {
			tb.Fatal(err)
		}
	}
	var f memReadFigures
	f.before = tputSettledMemory(tb, n)
	// Writing 5 resets the high-water mark of the resident set to what
	// is resident now (proc(5), clear_refs).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", n.PID()), []byte("5"), 0); err != nil {
		tb.Fatal(err)
	}
	sizes := make([]int64, memReaders)
	errs := make([]error, memReaders)
	start := time.Now()
	var readers sync.WaitGroup
	for i := range memReaders {
		readers.Go(func() { sizes[i], errs[i] = memReadDrivers(ctx, n) })
	}
	done := make(chan struct{})
	go func() {
		readers.Wait()
		close(done)
	}()
	// The heap, sampled until the reads are done.
	for sampling := true; sampling; {
		f.heapPeak = max(f.heapPeak, int64(tputMetric(tb, n, "go_memstats_heap_alloc_bytes"))/1024)
		select {
		case <-done:
			sampling = false
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.elapsed = time.Since(start)
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("read %d of the %d at once, after %s: %v", i, memReaders, f.elapsed.Round(time.Millisecond), err)
		}
		if sizes[i] < int64(drivers*memEnvVars*68) {
			tb.Fatalf("read %d: %d bytes, fewer than %d drivers' environments", i, sizes[i], drivers)
		}
	}
	f.readBytes = sizes[0]
	f.rssPeak = tputStatusKiB(tb, n.PID(), "VmHWM")
	return f
}

// memReadDrivers reads the drivers table from master n, linearizable, and
// returns the size of the answer, which it does not keep.
func memReadDrivers(ctx context.Context, n *testcluster.Node) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTP+api.PathDrivers, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read of the drivers: %s", resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}

// The app's events share its row: after 200 changes of an app whose
// environment is 0.91 MiB, the master's heap has grown by a small multiple
// of that environment, not by a copy of it per change.
func TestAppEventsShareTheAppRow(t *testing.T) {
	f := measureAppEvents(t)
	heap := (f.after.heap - f.before.heap) / 1024
	rss := (f.after.rss - f.before.rss) / 1024
	t.Logf("heap %d -> %d KiB, RSS %d -> %d KiB", f.before.heap, f.after.heap, f.before.rss, f.after.rss)
	if heap > memAppEventsHeapMiB {
		t.Errorf("after %d changes of an app with a %d-variable environment the master's heap grew by %d MiB; want at most %d MiB",
			memAppEvents, memEnvVars, heap, memAppEventsHeapMiB)
	}
	if rss > memAppEventsRSSMiB {
		t.Errorf("after %d changes of an app with a %d-variable environment the master's resident set grew by %d MiB; want at most %d MiB",
			memAppEvents, memEnvVars, rss, memAppEventsRSSMiB)
	}
}

// Ten reads at once of a drivers table whose 20 programs share a 0.91 MiB
// environment cost the master a few rows' encoding each, not a copy of
// every environment and the whole answer at once.
func TestConcurrentDriverReadsShareTheRows(t *testing.T) {
	f := measureDriverReads(t, memTestDrivers)
	heap := (f.heapPeak - f.before.heap) / 1024
	rss := (f.rssPeak - f.before.rss) / 1024
	t.Logf("%d reads of %d bytes in %s: heap %d KiB before, %d at the highest; RSS %d KiB before, %d at the highest",
		memReaders, f.readBytes, f.elapsed.Round(time.Millisecond), f.before.heap, f.heapPeak, f.before.rss, f.rssPeak)
	if heap > memReadsHeapPeakMiB {
		t.Errorf("the heap grew by %d MiB during %d reads of the drivers table; want at most %d MiB", heap, memReaders, memReadsHeapPeakMiB)
	}
	if rss > memReadsRSSGrowthMiB {
		t.Errorf("the resident set grew by %d MiB during %d reads of the drivers table; want at most %d MiB", rss, memReaders, memReadsRSSGrowthMiB)
	}
}

// BenchmarkMasterMemory prints the figures of the two tests above:
// go test -run '^$' -bench MasterMemory -benchtime 1x ./systest/
func BenchmarkMasterMemory(b *testing.B) {
	for range b.N {
		a := measureAppEvents(b)
		b.ReportMetric(float64(a.after.heap-a.before.heap)/1024, "app_events_heap_growth_mib")
		b.ReportMetric(float64(a.after.rss-a.before.rss)/1024, "app_events_rss_growth_mib")
		r := measureDriverReads(b, memDrivers)
		b.ReportMetric(float64(r.heapPeak-r.before.heap)/1024, "reads_heap_peak_growth_mib")
		b.ReportMetric(float64(r.rssPeak-r.before.rss)/1024, "reads_rss_peak_growth_mib")
		b.ReportMetric(float64(r.readBytes)/(1<<20), "read_mib")
		b.ReportMetric(r.elapsed.Seconds(), "reads_s")
	}
}
