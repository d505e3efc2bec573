// Package simworker runs many simulated Drover workers in one process, for
// benchmarks of the masters at a scale that real worker processes would not
// reach on one machine (a thousand workers on two cores).
//
// Each simulated worker speaks the real worker protocol over real HTTP, the
// way package worker does: it registers through the real client (sticky to
// the master that last answered, fanning out to every master otherwise),
// then heartbeats in a loop, long-polling with WaitIndex when it has nothing
// to report, carrying every unacknowledged report until the leader
// acknowledges it, asking for brief answers (api.HeartbeatRequest.Brief),
// and re-registering when the leader answers
// Registered=false. Its connections leave from its own source address
// (Options.BindIP), as a real worker's do from --bind, and optionally it is a
// real memberlist member with a worker's metadata (Options.GossipJoin).
//
// What a simulated worker does with the leader's desired set is where it
// departs from a real one: it "starts" every assigned driver attempt and
// executor at once by reporting it RUNNING (run 1) in its next heartbeat,
// and "kills" one that is no longer assigned at once by reporting it KILLED.
// Nothing ever finishes on its own. It skips everything else a worker does:
//
//   - no processes: no runner, no program, no process group, no kill
//     timeout; a kill takes no time;
//   - no work dir: no worker record (bbolt), no lease file, no instance
//     file (the instance ID is random per Start), so there is nothing to
//     adopt after a restart and no strict fencing (the worker never fences
//     itself; use it with the masters' default fencing);
//   - no logs: one HTTP server per fleet stands for every worker's and
//     answers every request 404, so `drover client logs` fails cleanly;
//     it listens on worker 0's address, and on each gossiping worker's
//     own, which the worker registers, since a leader takes a member
//     for a worker only from where the worker registered;
//   - no decommission: Close stops the workers as a crash would, and the
//     leader finds them lost after --worker-timeout;
//   - no supervision restarts: a RUNNING attempt stays at run 1.
//
// Each worker is one goroutine, with one client of its own (package
// client, as a real worker's) and so one keep-alive connection to the master
// it sticks to; a thousand workers take about 130 MiB and 4,000 goroutines
// in all, counting the connections' own.
//
// Without gossip (the default) the leader knows a simulated worker is alive
// only from its heartbeats: a long poll the leader holds counts as contact,
// but a gap between two heartbeats longer than the masters' --worker-timeout
// gets the worker declared lost. On a loaded machine give the masters a
// generous --worker-timeout.
package simworker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/wait"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport/gossip"
)

// Options describe a fleet of simulated workers. Zero values take the
// defaults noted.
type Options struct {
	// Masters are the HTTP host:port addresses of every master.
	Masters []string
	// Count is the number of workers (at least 1). Their IDs are
	// IDPrefix followed by a dash and a number from 1.
	Count    int
	IDPrefix string // default "sim"
	// Cores and MemoryMB are what each worker offers (default 4 and 4096).
	Cores    int
	MemoryMB int64
	// BindIP returns the source address of worker i (0-based) for its
	// HTTP connections and its gossip member; nil or "" lets the kernel
	// choose (127.0.0.1 for gossip). Any 127.x.y.z address works on Linux
	// without configuration.
	BindIP func(i int) string
	// HeartbeatInterval is the least time between two heartbeats, as the
	// worker's --heartbeat-interval (default 1s). RequestTimeout bounds
	// one call to the masters (default 10s).
	HeartbeatInterval time.Duration
	RequestTimeout    time.Duration
	// GossipJoin lists the masters' gossip addresses. When set, each
	// worker also runs a real memberlist member (package gossip) with a
	// worker's metadata, joined to them, as `drover worker --join` does.
	// Every member keeps the whole pool and gossips on its own timers, so
	// the cost grows with the square of the fleet: 200 members took some
	// 200 MiB in one process, while 1,000 on two cores passed 1.8 GiB
	// and starved the members' probes until the masters declared workers
	// lost. Leave it empty for large fleets.
	GossipJoin []string
	// GossipProfile is the memberlist profile (default "local").
	GossipProfile string
	// OnRunning, when set, is called once for each driver attempt whose
	// RUNNING report the leader acknowledged (committed), from the
	// worker's goroutine; it must not block.
	OnRunning func(driverID string, attempt int)
	// Logger gets the workers' warnings (default: discarded).
	Logger *slog.Logger
}

// Fleet is a set of running simulated workers. Close stops them.
type Fleet struct {
	opts     Options
	workers  []*worker
	logs     *http.Server
	httpAddr string
	// logAddrs holds the log stand-in's address on each bind IP it
	// listens on.
	logAddrs map[string]string
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	registered atomic.Int64
	heartbeats atomic.Int64
	running    atomic.Int64
	failures   atomic.Int64
}

// Stats are counters over the whole fleet.
type Stats struct {
	// Registered is the number of workers whose latest registration
	// succeeded and whose latest heartbeat did not answer Registered=false.
	Registered int
	// Heartbeats counts the heartbeats that a master answered.
	Heartbeats int64
	// Running counts the RUNNING reports of driver attempts the leader
	// acknowledged.
	Running int64
	// Failures counts calls to the masters that failed (no authoritative
	// answer in RequestTimeout, or a refusal).
	Failures int64
}

// Start starts opts.Count workers, each registering in the background, and
// returns at once; WaitRegistered waits for them.
func Start(opts Options) (*Fleet, error) {
	if opts.Count < 1 {
		return nil, errors.New("simworker: Count must be at least 1")
	}
	if len(opts.Masters) == 0 {
		return nil, errors.New("simworker: no masters given")
	}
	if opts.IDPrefix == "" {
		opts.IDPrefix = "sim"
	}
	if opts.Cores <= 0 {
		opts.Cores = 4
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = 4096
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.GossipProfile == "" {
		opts.GossipProfile = "local"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.BindIP == nil {
		opts.BindIP = func(int) string { return "" }
	}
	f := &Fleet{opts: opts, logAddrs: map[string]string{}, logs: &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"simulated workers keep no logs"}`+"\n")
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}}
	var err error
	if f.httpAddr, err = f.serveLogs(opts.BindIP(0)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	for i := 0; i < opts.Count; i++ {
		w, err := f.newWorker(i)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.workers = append(f.workers, w)
		wctx, stop := context.WithCancel(ctx)
		w.stop, w.stopped = stop, make(chan struct{})
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(w.stopped)
			w.loop(wctx)
		}()
	}
	return f, nil
}

// serveLogs has the one HTTP server that stands for every worker's,
// answering 404 (simulated workers keep no logs), listen on ip (""
// for 127.0.0.1) unless it does already, and returns its address there.
// Workers are made one at a time, so it needs no lock.
func (f *Fleet) serveLogs(ip string) (string, error) {
	if ip == "" {
		ip = "127.0.0.1"
	}
	if addr, ok := f.logAddrs[ip]; ok {
		return addr, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", fmt.Errorf("simworker: http listen: %w", err)
	}
	f.logAddrs[ip] = ln.Addr().String()
	go func() { _ = f.logs.Serve(ln) }()
	return f.logAddrs[ip], nil
}

// HTTPAddr is the address every worker of the fleet that does not gossip
// registers as its own; a gossiping worker registers the same server's
// address on its own bind IP.
func (f *Fleet) HTTPAddr() string { return f.httpAddr }

// IDs returns the workers' IDs in order.
func (f *Fleet) IDs() []string {
	ids := make([]string, len(f.workers))
	for i, w := range f.workers {
		ids[i] = w.id
	}
	return ids
}

// Stats returns the fleet's counters now.
func (f *Fleet) Stats() Stats {
	return Stats{
		Registered: int(f.registered.Load()),
		Heartbeats: f.heartbeats.Load(),
		Running:    f.running.Load(),
		Failures:   f.failures.Load(),
	}
}

// WaitRegistered waits until every worker has registered, or ctx ends.
func (f *Fleet) WaitRegistered(ctx context.Context) error {
	for {
		if n := f.registered.Load(); n >= int64(len(f.workers)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("simworker: %d of %d workers registered: %w", f.registered.Load(), len(f.workers), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops every worker without decommissioning it (as a crash would:
// the leader declares them lost after --worker-timeout), shuts their gossip
// members down without a leave, and stops the fleet's HTTP server. It
// returns when every goroutine of the fleet is gone.
func (f *Fleet) Close() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	var wg sync.WaitGroup
	for _, w := range f.workers {
		if w.pool != nil {
			wg.Add(1)
			// In parallel: a member's shutdown waits for its
			// listeners, and a thousand in a row add up.
			go func() { defer wg.Done(); _ = w.pool.Shutdown() }()
		}
	}
	wg.Wait()
	_ = f.logs.Close()
}

// unitKey names a driver attempt (exec false: ID is the driver's, N the
// attempt) or an executor (exec true: ID is the app's, N the executor's).
type unitKey struct {
	exec bool
	id   string
	n    int
}

// report is a state change of a unit, queued until the leader acknowledges
// it, as in package worker.
type report struct {
	key    unitKey
	state  model.DriverState
	runs   int
	reason string
}

// ackID is what a report and the leader's echo of it share.
type ackID struct {
	key   unitKey
	state string
	runs  int
}

func (r report) ackID() ackID {
	if r.key.exec {
		return ackID{r.key, string(model.ExecutorStateOf(r.state)), 0}
	}
	return ackID{r.key, string(r.state), r.runs}
}

// Stop stops worker i (0-based) alone, as a crash would: it sends nothing
// more, its held heartbeat is cut off, and the leader declares it lost
// after --worker-timeout. It returns once the worker has stopped; its
// gossip member, if any, stays until Close.
func (f *Fleet) Stop(i int) {
	f.workers[i].stop()
	<-f.workers[i].stopped
}

// worker is one simulated worker. Only its own goroutine (loop) touches its
// fields after newWorker, but for stop and stopped.
type worker struct {
	f        *Fleet
	id       string
	instance string
	// stop ends the worker's loop, which closes stopped when it returns.
	stop    context.CancelFunc
	stopped chan struct{}
	masters *client.Client
	pool    *gossip.Pool
	// httpAddr is the address the worker registers and gossips.
	httpAddr string

	// running is the set of units this worker "runs".
	running map[unitKey]bool
	// unacked holds the reports the leader has not acknowledged yet,
	// oldest first; each heartbeat carries all of them.
	unacked []report
	// registered mirrors the fleet's count for this worker.
	registered bool
}

func (f *Fleet) newWorker(i int) (*worker, error) {
	bind := f.opts.BindIP(i)
	// One client per worker: the real worker's (client.New, sticky), and
	// the only way to give each worker its own source address, since an
	// http.Transport pools connections by destination alone. It costs
	// little beyond the one keep-alive connection a shared transport
	// would hold for this worker's long poll anyway.
	masters, err := client.New(f.opts.Masters, client.Options{
		BindIP:         bind,
		RequestTimeout: f.opts.RequestTimeout,
		Sticky:         true,
	})
	if err != nil {
		return nil, err
	}
	w := &worker{
		f:        f,
		id:       fmt.Sprintf("%s-%d", f.opts.IDPrefix, i+1),
		instance: newInstance(),
		masters:  masters,
		running:  map[unitKey]bool{},
		httpAddr: f.httpAddr,
	}
	if len(f.opts.GossipJoin) > 0 {
		ip := bind
		if ip == "" {
			ip = "127.0.0.1"
		}
		if w.httpAddr, err = f.serveLogs(ip); err != nil {
			return nil, err
		}
		w.pool, err = gossip.Start(gossip.Config{
			Meta:    gossip.Meta{Role: gossip.RoleWorker, ID: w.id, HTTP: w.httpAddr},
			BindIP:  ip,
			Port:    0,
			Profile: f.opts.GossipProfile,
			Join:    f.opts.GossipJoin,
			Logger:  f.opts.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("simworker %s: %w", w.id, err)
		}
	}
	return w, nil
}

// newInstance returns a random instance ID of the form package worker keeps
// in its work dir.
func newInstance() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// loop registers, then heartbeats until ctx ends, following package
// worker's loop step by step.
func (w *worker) loop(ctx context.Context) {
	defer w.setRegistered(false)
	var index uint64
	for {
		if !w.registered {
			if !w.register(ctx) {
				return
			}
			w.setRegistered(true)
		}
		sent := time.Now()
		req := w.heartbeatRequest(index)
		resp, err := w.heartbeat(ctx, req)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.f.failures.Add(1)
			w.f.opts.Logger.Warn("heartbeat failed", "worker", w.id, "err", err)
			if !wait.Sleep(ctx, w.f.opts.HeartbeatInterval) {
				return
			}
			continue
		}
		w.f.heartbeats.Add(1)
		index = resp.Index
		w.ack(resp)
		queued := w.reconcile(resp)
		if !resp.Registered {
			w.f.opts.Logger.Warn("the leader does not know this worker as alive; registering again", "worker", w.id)
			w.setRegistered(false)
			continue
		}
		// A real worker's runners report at once, and each report wakes
		// the loop out of its pause: so does a report queued here.
		if queued || longPollNext(req, resp) {
			continue
		}
		if !wait.Sleep(ctx, w.f.opts.HeartbeatInterval-time.Since(sent)) {
			return
		}
	}
}

func (w *worker) setRegistered(r bool) {
	if r == w.registered {
		return
	}
	w.registered = r
	if r {
		w.f.registered.Add(1)
	} else {
		w.f.registered.Add(-1)
	}
}

// longPollNext is package worker's: skip the pause when the next heartbeat
// will be a long poll the last one was not.
func longPollNext(req api.HeartbeatRequest, resp api.HeartbeatResponse) bool {
	return req.WaitIndex == 0 && resp.Index != 0 && (!hasReports(req) || len(resp.Acked)+len(resp.AckedExecutors) > 0)
}

func hasReports(req api.HeartbeatRequest) bool {
	return len(req.Reports)+len(req.ExecutorReports) > 0
}

// register retries the registration until it succeeds; false means ctx
// ended first.
func (w *worker) register(ctx context.Context) bool {
	req := api.RegisterWorkerRequest{ID: w.id, Instance: w.instance, HTTPAddr: w.httpAddr,
		Cores: w.f.opts.Cores, MemoryMB: w.f.opts.MemoryMB}
	for {
		cctx, cancel := context.WithTimeout(ctx, w.f.opts.RequestTimeout)
		var resp api.RegisterWorkerResponse
		err := w.masters.Do(cctx, http.MethodPost, "/v1/workers/register", req, &resp)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.f.failures.Add(1)
		w.f.opts.Logger.Warn("cannot register, retrying", "worker", w.id, "err", err)
		if !wait.Sleep(ctx, w.f.opts.HeartbeatInterval) {
			return false
		}
	}
}

func (w *worker) heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, w.f.opts.RequestTimeout)
	defer cancel()
	var resp api.HeartbeatResponse
	err := w.masters.Do(ctx, http.MethodPost, "/v1/workers/"+w.id+"/heartbeat", req, &resp)
	return resp, err
}

// heartbeatRequest carries every unacknowledged report and every running
// unit, sorted as package worker sorts them, and long-polls only when there
// is nothing to report.
func (w *worker) heartbeatRequest(index uint64) api.HeartbeatRequest {
	// Brief always: a simulated worker needs nothing of a unit it runs
	// but its name.
	req := api.HeartbeatRequest{Instance: w.instance, Running: []api.AttemptRef{}, Brief: true}
	for _, r := range w.unacked {
		if r.key.exec {
			req.ExecutorReports = append(req.ExecutorReports, model.ExecutorReport{
				AppID: r.key.id, ExecutorID: r.key.n, State: model.ExecutorStateOf(r.state), Reason: r.reason})
		} else {
			req.Reports = append(req.Reports, model.AttemptReport{
				DriverID: r.key.id, Attempt: r.key.n, State: r.state, Runs: r.runs, Reason: r.reason})
		}
	}
	keys := make([]unitKey, 0, len(w.running))
	for k := range w.running {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b unitKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return a.n - b.n
	})
	for _, k := range keys {
		if k.exec {
			req.RunningExecutors = append(req.RunningExecutors, api.ExecutorRef{AppID: k.id, ExecutorID: k.n})
		} else {
			req.Running = append(req.Running, api.AttemptRef{DriverID: k.id, Attempt: k.n})
		}
	}
	if !hasReports(req) {
		req.WaitIndex = index
	}
	return req
}

// ack drops the reports the leader committed, and tells OnRunning about the
// driver attempts among them that are RUNNING.
func (w *worker) ack(resp api.HeartbeatResponse) {
	if len(resp.Acked)+len(resp.AckedExecutors) == 0 {
		return
	}
	ids := map[ackID]bool{}
	for _, a := range resp.Acked {
		ids[ackID{unitKey{false, a.DriverID, a.Attempt}, string(a.State), a.Runs}] = true
	}
	for _, e := range resp.AckedExecutors {
		ids[ackID{unitKey{true, e.AppID, e.ExecutorID}, string(e.State), 0}] = true
	}
	w.unacked = slices.DeleteFunc(w.unacked, func(r report) bool {
		if !ids[r.ackID()] {
			return false
		}
		if !r.key.exec && r.state == model.DriverRunning {
			w.f.running.Add(1)
			if w.f.opts.OnRunning != nil {
				w.f.opts.OnRunning(r.key.id, r.key.n)
			}
		}
		return true
	})
}

// reconcile makes the running set the leader's desired set (the units of
// a brief answer in full and those it kept): it reports
// every new unit RUNNING and every unit no longer wanted KILLED, both at
// once. It says whether it queued a report.
func (w *worker) reconcile(resp api.HeartbeatResponse) bool {
	want := make(map[unitKey]bool, len(resp.Assignments)+len(resp.Executors))
	for _, a := range resp.Assignments {
		want[unitKey{false, a.DriverID, a.Attempt}] = true
	}
	for _, e := range resp.Executors {
		want[unitKey{true, e.AppID, e.ExecutorID}] = true
	}
	for _, a := range resp.Kept {
		want[unitKey{false, a.DriverID, a.Attempt}] = true
	}
	for _, e := range resp.KeptExecutors {
		want[unitKey{true, e.AppID, e.ExecutorID}] = true
	}
	queued := false
	for k := range w.running {
		if !want[k] {
			delete(w.running, k)
			w.queue(report{key: k, state: model.DriverKilled, reason: "no longer assigned to worker " + w.id})
			queued = true
		}
	}
	// In the leader's order, so reports go out in the order a real worker
	// would most likely start them.
	for _, k := range orderedKeys(resp) {
		if w.running[k] {
			continue
		}
		w.running[k] = true
		r := report{key: k, state: model.DriverRunning}
		if !k.exec {
			r.runs = 1
		}
		w.queue(r)
		queued = true
	}
	return queued
}

func orderedKeys(resp api.HeartbeatResponse) []unitKey {
	out := make([]unitKey, 0, len(resp.Assignments)+len(resp.Executors))
	for _, a := range resp.Assignments {
		out = append(out, unitKey{false, a.DriverID, a.Attempt})
	}
	for _, e := range resp.Executors {
		out = append(out, unitKey{true, e.AppID, e.ExecutorID})
	}
	return out
}

// queue adds r to the unacknowledged reports, replacing an unacknowledged
// RUNNING report of the same unit, as package worker does.
func (w *worker) queue(r report) {
	if r.state == model.DriverRunning {
		w.unacked = slices.DeleteFunc(w.unacked, func(u report) bool {
			return u.state == model.DriverRunning && u.key == r.key
		})
	}
	w.unacked = append(w.unacked, r)
}
