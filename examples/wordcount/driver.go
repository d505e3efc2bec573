package main

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/drover-project/drover/internal/strictjson"
)

// envDriver carries the driver's base URL to its executors.
const envDriver = "WORDCOUNT_DRIVER"

// driverConfig is the driver's command line.
type driverConfig struct {
	Roots     []string
	Name      string
	Executors int
	Cores     int
	MemoryMB  int64
	// Shards is how many shards to cut the input into; 0 means 4 per
	// executor slot, enough for fast slots to take more than slow ones.
	Shards int
	// Listen is the address of the driver's HTTP server.
	Listen string
	// Executable is what executors run, with the argument "executor";
	// with DriverArtifacts it is one of the driver's artifacts, which the
	// executors get staged too.
	Executable      string
	DriverArtifacts bool
}

// jobResult is a finished job.
type jobResult struct {
	Files  int
	Counts map[string]int
	Status jobStatus
}

// runDriver lists the input, cuts it into shards and has the executors of
// one application on cl count them.
func runDriver(ctx context.Context, cfg driverConfig, cl cluster, logf func(string, ...any)) (*jobResult, error) {
	files, err := listFiles(cfg.Roots)
	if err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n <= 0 {
		n = 4 * cfg.Executors * max(cfg.Cores, 1)
	}
	shards, err := makeShards(files, n)
	if err != nil {
		return nil, err
	}
	return newDriver(len(files), shards, logf).run(ctx, cfg, cl)
}

// shard is a slice of the input and what the driver knows of its runs.
type shard struct {
	id    int
	files []string
	bytes int64

	done   bool
	queued bool
	// holders are the slots running the shard now, with when each
	// started: more than one when it was handed out speculatively.
	holders map[slot]time.Time
	// launch orders shards by first hand-out, so speculation copies the
	// oldest.
	launch   int
	failures int
}

// slot names one task thread of one executor.
type slot struct{ executor, n int }

// driver is the scheduler: it hands shards to slots that ask and merges
// their results. All its fields are guarded by mu.
type driver struct {
	files int
	logf  func(string, ...any)
	// onAssign, if set, is called with mu held whenever a slot is handed
	// a shard, before the answer is written. Tests use it.
	onAssign func(s slot, shard int)

	mu       sync.Mutex
	shards   []*shard
	pending  []int        // shard IDs, next first
	running  map[slot]int // the shard each busy slot runs
	ended    map[int]bool // executors reported gone
	counts   map[string]int
	left     int
	launches int
	// took is how long the first copy of each done shard ran, sorted.
	took     []time.Duration
	st       jobStatus
	err      error
	complete chan struct{} // closed when every shard is in
	failed   chan struct{} // closed when err is set
}

func newDriver(files int, shards []*shard, logf func(string, ...any)) *driver {
	d := &driver{
		files:    files,
		logf:     logf,
		shards:   shards,
		running:  map[slot]int{},
		ended:    map[int]bool{},
		counts:   map[string]int{},
		left:     len(shards),
		complete: make(chan struct{}),
		failed:   make(chan struct{}),
	}
	for _, sh := range shards {
		sh.queued = true
		d.pending = append(d.pending, sh.id)
	}
	d.st.Shards = len(shards)
	if d.left == 0 {
		close(d.complete)
	}
	return d
}

// makeShards cuts files into at most n shards of about equal bytes: the
// biggest file first, each into the lightest shard so far (the LPT rule).
// Each shard's files are sorted; shards are numbered heaviest first, which
// is also the order they are handed out.
func makeShards(files []string, n int) ([]*shard, error) {
	type sized struct {
		path string
		size int64
	}
	fs := make([]sized, len(files))
	for i, f := range files {
		fi, err := os.Lstat(f)
		if err != nil {
			return nil, err
		}
		fs[i] = sized{f, fi.Size()}
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].size > fs[j].size })
	h := make(shardHeap, min(n, len(fs)))
	for i := range h {
		h[i] = &shard{id: i}
	}
	for _, f := range fs {
		sh := h[0]
		sh.files = append(sh.files, f.path)
		sh.bytes += f.size
		heap.Fix(&h, 0)
	}
	shards := []*shard(h)
	sort.Slice(shards, func(i, j int) bool {
		if shards[i].bytes != shards[j].bytes {
			return shards[i].bytes > shards[j].bytes
		}
		return shards[i].id < shards[j].id
	})
	for i, sh := range shards {
		sh.id = i
		sh.holders = map[slot]time.Time{}
		sort.Strings(sh.files)
	}
	return shards, nil
}

// shardHeap is a min-heap of shards by bytes, then ID (deterministic).
type shardHeap []*shard

func (h shardHeap) Len() int { return len(h) }
func (h shardHeap) Less(i, j int) bool {
	if h[i].bytes != h[j].bytes {
		return h[i].bytes < h[j].bytes
	}
	return h[i].id < h[j].id
}
func (h shardHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *shardHeap) Push(x any)   { *h = append(*h, x.(*shard)) }
func (h *shardHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run serves the executors of one application until every shard is in,
// then ends the application.
func (d *driver) run(ctx context.Context, cfg driverConfig, cl cluster) (*jobResult, error) {
	if d.left == 0 {
		// Nothing to count: no application needed.
		return d.result(), nil
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A result is the distinct words of a shard: a few MiB that a
		// busy executor may upload slowly.
		ReadTimeout:    2 * time.Minute,
		WriteTimeout:   time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       log.New(logWriter{d.logf}, "", 0),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns ErrServerClosed after Shutdown
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
	}()

	url := "http://" + advertise(ln.Addr().(*net.TCPAddr))
	d.logf("driver at %s: %d files in %d shards for %d executors", url, d.files, len(d.shards), cfg.Executors)
	spec := appSpec{
		Name:      cfg.Name,
		Executors: cfg.Executors,
		Cores:     cfg.Cores,
		MemoryMB:  cfg.MemoryMB,
		Argv:      []string{cfg.Executable, "executor"},
		Env:       map[string]string{envDriver: url},

		DriverArtifacts: cfg.DriverArtifacts,
	}
	// Registration waits out a leader election; it must not wait forever.
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = cl.launch(lctx, spec)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("register the application: %w", err)
	}
	defer cl.close()

	jobErr := d.wait(ctx, cl)
	// End the application even when ctx is done (SIGTERM): the executors
	// should not outlive the driver.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := cl.finish(fctx, jobErr); err != nil {
		// The result stands; Drover ends the application with its
		// driver anyway.
		d.logf("unregister the application: %v", err)
	}
	if jobErr != nil {
		return nil, jobErr
	}
	return d.result(), nil
}

// wait feeds executor events to the scheduler until the job is complete or
// cannot complete.
func (d *driver) wait(ctx context.Context, cl cluster) error {
	events := cl.events()
	for {
		select {
		case <-d.complete:
			return nil
		case <-d.failed:
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.err
		case ev, ok := <-events:
			if !ok {
				events = nil // done() says why
				continue
			}
			d.executorEvent(ev)
		case <-cl.done():
			select {
			case <-d.complete:
				return nil
			default:
				return fmt.Errorf("the application ended before the job did: %s", cl.why())
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (d *driver) result() *jobResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &jobResult{Files: d.files, Counts: d.counts, Status: d.statusLocked()}
}

// executorEvent requeues the shards of an executor that ended.
func (d *driver) executorEvent(ev execEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ev.Ended || d.ended[ev.Executor] {
		return
	}
	d.ended[ev.Executor] = true
	if d.left == 0 {
		return
	}
	d.st.LostExecutors++
	var requeued []int
	for s, id := range d.running {
		if s.executor == ev.Executor && d.release(s) {
			requeued = append(requeued, id)
		}
	}
	d.logf("executor %d ended (%s %s) before the job: shards %v requeued", ev.Executor, ev.State, ev.Message, requeued)
}

// release frees slot s of the shard it runs. When no one else runs that
// shard and it is not done, it goes back to the front of the queue, and
// release reports true.
func (d *driver) release(s slot) bool {
	id, ok := d.running[s]
	if !ok {
		return false
	}
	delete(d.running, s)
	sh := d.shards[id]
	delete(sh.holders, s)
	if sh.done || sh.queued || len(sh.holders) > 0 {
		return false
	}
	sh.queued = true
	d.pending = append([]int{id}, d.pending...)
	d.st.Requeued++
	return true
}

// nextTask picks work for an idle slot: a queued shard, or else a copy of
// a running shard that the slot's executor does not already run, the one
// with the fewest copies and the oldest among those, once it has run
// longer than speculationMultiplier times the median shard. A copy makes a
// silently dead executor, or a slow one, cost time instead of the job.
func (d *driver) nextTask(s slot) taskResponse {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.release(s) // asking means the slot is idle
	if d.left == 0 || d.err != nil || d.ended[s.executor] {
		return taskResponse{Done: true}
	}
	for len(d.pending) > 0 {
		id := d.pending[0]
		d.pending = d.pending[1:]
		sh := d.shards[id]
		sh.queued = false
		if !sh.done {
			return d.assign(s, sh)
		}
	}
	now := time.Now()
	var threshold time.Duration
	if len(d.took) > 0 {
		threshold = time.Duration(speculationMultiplier * float64(d.took[len(d.took)/2]))
	}
	wait := waitHint
	var pick *shard
	for _, sh := range d.shards {
		if sh.done || len(sh.holders) == 0 || runsOn(sh, s.executor) {
			continue
		}
		if age := now.Sub(oldest(sh)); age < threshold {
			wait = min(wait, threshold-age)
			continue
		}
		if pick == nil || len(sh.holders) < len(pick.holders) ||
			len(sh.holders) == len(pick.holders) && sh.launch < pick.launch {
			pick = sh
		}
	}
	if pick == nil {
		return taskResponse{WaitMS: max(int(wait/time.Millisecond), 1)}
	}
	d.st.Speculative++
	return d.assign(s, pick)
}

// oldest is when the longest-running copy of sh started.
func oldest(sh *shard) time.Time {
	var t time.Time
	for _, started := range sh.holders {
		if t.IsZero() || started.Before(t) {
			t = started
		}
	}
	return t
}

func runsOn(sh *shard, executor int) bool {
	for h := range sh.holders {
		if h.executor == executor {
			return true
		}
	}
	return false
}

func (d *driver) assign(s slot, sh *shard) taskResponse {
	sh.holders[s] = time.Now()
	d.running[s] = sh.id
	if sh.launch == 0 {
		d.launches++
		sh.launch = d.launches
	}
	if d.onAssign != nil {
		d.onAssign(s, sh.id)
	}
	return taskResponse{Shard: &shardTask{ID: sh.id, Files: sh.files}}
}

// addResult merges a shard's result if it is the first for that shard.
func (d *driver) addResult(r *resultRequest) (resultResponse, error) {
	if r.Shard < 0 || r.Shard >= len(d.shards) {
		return resultResponse{}, fmt.Errorf("no shard %d", r.Shard)
	}
	if len(r.Words) != len(r.Counts) {
		return resultResponse{}, fmt.Errorf("%d words but %d counts", len(r.Words), len(r.Counts))
	}
	for i, w := range r.Words {
		if w == "" || r.Counts[i] <= 0 {
			return resultResponse{}, fmt.Errorf("bad count %d for %q", r.Counts[i], w)
		}
	}
	s := slot{r.Executor, r.Slot}
	d.mu.Lock()
	defer d.mu.Unlock()
	sh := d.shards[r.Shard]
	id, ok := d.running[s]
	holds := ok && id == sh.id
	if sh.done {
		if holds {
			d.release(s)
		}
		if r.Error == "" {
			d.st.Duplicates++
		}
		return resultResponse{Done: d.left == 0}, nil
	}
	if r.Error != "" {
		d.st.Failures++
		sh.failures++
		d.logf("shard %d failed on executor %d: %s", sh.id, r.Executor, r.Error)
		if sh.failures >= maxTaskFailures {
			d.fail(fmt.Errorf("shard %d failed %d times, last: %s", sh.id, sh.failures, r.Error))
		} else if holds {
			d.release(s) // requeues it unless a copy still runs
		}
		return resultResponse{}, nil
	}
	sh.done = true
	for i, w := range r.Words {
		d.counts[w] += r.Counts[i]
	}
	if holds {
		took := time.Since(sh.holders[s])
		i, _ := slices.BinarySearch(d.took, took)
		d.took = slices.Insert(d.took, i, took)
		d.release(s)
	}
	d.left--
	if d.left == 0 {
		close(d.complete)
	}
	return resultResponse{Accepted: true, Done: d.left == 0}, nil
}

func (d *driver) fail(err error) {
	if d.err == nil {
		d.err = err
		close(d.failed)
	}
}

func (d *driver) status() jobStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.statusLocked()
}

func (d *driver) statusLocked() jobStatus {
	st := d.st
	st.Done = len(d.shards) - d.left
	st.Running = 0
	for _, sh := range d.shards {
		if !sh.done && len(sh.holders) > 0 {
			st.Running++
		}
	}
	st.Pending = 0
	for _, id := range d.pending {
		if !d.shards[id].done {
			st.Pending++
		}
	}
	return st
}

// handler serves the protocol described in protocol.go.
func (d *driver) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/task", func(w http.ResponseWriter, r *http.Request) {
		var req taskRequest
		if !decode(w, r, maxTaskBody, &req) {
			return
		}
		writeJSON(w, http.StatusOK, d.nextTask(slot{req.Executor, req.Slot}))
	})
	mux.HandleFunc("POST /v1/result", func(w http.ResponseWriter, r *http.Request) {
		var req resultRequest
		if !decode(w, r, maxResultBody, &req) {
			return
		}
		resp, err := d.addResult(&req)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.status())
	})
	return mux
}

// decode reads a bounded JSON body into v, or answers 400 or 413.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	err := strictjson.Decode(http.MaxBytesReader(w, r.Body, limit), v)
	if err == nil {
		return true
	}
	status := http.StatusBadRequest
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		status = http.StatusRequestEntityTooLarge
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the peer may be gone; nothing to do
}

// advertise is the host:port executors dial: the listener's own, or the
// host name when it listens on every address.
func advertise(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port))
}

// logWriter sends the HTTP server's own complaints to the driver's log.
type logWriter struct{ logf func(string, ...any) }

func (l logWriter) Write(p []byte) (int, error) {
	l.logf("%s", p)
	return len(p), nil
}
