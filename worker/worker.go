// Package worker is Drover's worker daemon, the counterpart of Spark's
// standalone Worker: it registers with the masters, offers its cores and
// memory, and reconciles the driver attempts it runs with the set the leader
// assigns it, reporting every state change until the leader acknowledges it.
// Each attempt is supervised by its own runner process (package runner), so
// the daemon itself never waits on a user's program. It also serves the
// attempts' logs over HTTP.
//
// Gossip membership is not part of this package; the command that builds a
// Worker joins the pool beside it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/fsm"
)

// shutdownTimeout bounds the HTTP server's graceful stop in Close.
const shutdownTimeout = 5 * time.Second

// Worker is a running worker daemon. Close stops it.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	masters  *client.Client
	server   *http.Server
	httpAddr string

	mu       sync.Mutex
	attempts map[attemptKey]*attempt
	// unacked holds the reports the leader has not acknowledged yet, oldest
	// first; each heartbeat carries all of them.
	unacked []fsm.AttemptReport

	// wake asks the heartbeat loop (non-blocking send, buffer 1) to sync
	// now rather than at its next tick.
	wake chan struct{}

	cancel    context.CancelFunc
	loopDone  chan struct{}
	serveDone chan struct{}
	// runners counts the goroutines that watch runner processes.
	runners   sync.WaitGroup
	closeOnce sync.Once
}

// New starts a worker: it creates the work dir, listens for HTTP and starts
// registering with the masters in the background. It returns once the HTTP
// server is up; registration goes on until it succeeds.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RunnerCommand == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the drover binary for runners: %w", err)
		}
		cfg.RunnerCommand = self
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	masters, err := client.New(cfg.Masters, client.Options{
		BindIP:         cfg.BindIP,
		RequestTimeout: cfg.RequestTimeout,
		Sticky:         true,
	})
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:       cfg,
		log:       cfg.Logger.With("worker", cfg.ID),
		masters:   masters,
		attempts:  map[attemptKey]*attempt{},
		wake:      make(chan struct{}, 1),
		loopDone:  make(chan struct{}),
		serveDone: make(chan struct{}),
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindIP, strconv.Itoa(cfg.HTTPPort)))
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	w.httpAddr = net.JoinHostPort(cfg.BindIP, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	w.server = w.newServer()
	go func() {
		defer close(w.serveDone)
		if err := w.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("http server stopped", "err", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.loopDone)
		w.loop(ctx)
	}()
	w.log.Info("worker started", "http", w.httpAddr, "cores", cfg.Cores, "memory_mb", cfg.MemoryMB, "work_dir", cfg.WorkDir)
	return w, nil
}

// HTTPAddr is the host:port of the worker's HTTP server, as registered with
// the masters.
func (w *Worker) HTTPAddr() string { return w.httpAddr }

// Close shuts the worker down gracefully: it stops syncing with the masters,
// kills every attempt it runs (they end KILLED, and the leader relaunches the
// supervised ones elsewhere), sends those last reports to the masters once,
// within RequestTimeout, and stops the HTTP server. It returns when every
// goroutine and runner process is gone. It is safe to call more than once.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		w.cancel()
		<-w.loopDone
		w.killAll("worker " + w.cfg.ID + " shut down")
		w.runners.Wait()
		w.flushReports()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := w.server.Shutdown(ctx); err != nil {
			w.log.Warn("http server shutdown", "err", err)
			_ = w.server.Close()
		}
		<-w.serveDone
		w.log.Info("worker stopped")
	})
	return nil
}

// loop registers, then heartbeats until ctx ends. Only this goroutine starts
// attempts, so none starts once it has returned.
func (w *Worker) loop(ctx context.Context) {
	registered := false
	var index uint64
	for {
		if !registered {
			if !w.register(ctx) {
				return
			}
			registered = true
		}
		sent := time.Now()
		req := w.heartbeatRequest(index)
		resp, err := w.heartbeat(ctx, req)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errWoken):
			continue
		case err != nil:
			w.log.Warn("heartbeat failed", "err", err)
			if !sleep(ctx, w.cfg.HeartbeatInterval) {
				return
			}
			continue
		}
		index = resp.Index
		w.ack(resp.Acked)
		w.reconcile(resp.Assignments)
		if !resp.Registered {
			w.log.Warn("the leader does not know this worker as alive; registering again")
			registered = false
			continue
		}
		if longPollNext(req, resp) {
			continue
		}
		if !w.pause(ctx, w.cfg.HeartbeatInterval-time.Since(sent)) {
			return
		}
	}
}

// longPollNext says whether the loop may skip its pause because the next
// heartbeat will be a long poll the last one was not: after the first answer,
// or once the leader committed the reports the last one carried. Waiting out
// the interval then would only hold back the leader's next move (a kill, a
// placement). A long poll is always followed by the pause, and a resend of
// unacknowledged reports too, so requests never repeat without progress.
func longPollNext(req api.HeartbeatRequest, resp api.HeartbeatResponse) bool {
	return req.WaitIndex == 0 && resp.Index != 0 && (len(req.Reports) == 0 || len(resp.Acked) > 0)
}

// register retries the registration until it succeeds; false means ctx
// ended first.
func (w *Worker) register(ctx context.Context) bool {
	req := api.RegisterWorkerRequest{ID: w.cfg.ID, HTTPAddr: w.httpAddr, Cores: w.cfg.Cores, MemoryMB: w.cfg.MemoryMB}
	for {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		var resp api.RegisterWorkerResponse
		err := w.masters.Do(cctx, http.MethodPost, "/v1/workers/register", req, &resp)
		cancel()
		if err == nil {
			w.log.Info("registered with the masters")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.log.Warn("cannot register, retrying", "err", err)
		if !sleep(ctx, w.cfg.HeartbeatInterval) {
			return false
		}
	}
}

// errWoken ends a long-poll heartbeat that a local change cut short.
var errWoken = errors.New("heartbeat cut short by a local change")

// heartbeat sends one heartbeat. With nothing to report it asks the leader
// to hold the answer until the assignments change (WaitIndex); a local
// change meanwhile cancels that wait (errWoken), so that news of an attempt
// never sits behind a long poll.
func (w *Worker) heartbeat(ctx context.Context, req api.HeartbeatRequest) (resp api.HeartbeatResponse, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	if req.WaitIndex != 0 {
		woken := false
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-w.wake:
				woken = true
				cancel()
			case <-ctx.Done():
			}
		}()
		defer func() {
			cancel()
			<-watched
			switch {
			case woken && err != nil:
				err = errWoken
			case woken:
				// The answer came first; keep the wake for the loop.
				w.poke()
			}
		}()
	}
	err = w.masters.Do(ctx, http.MethodPost, "/v1/workers/"+w.cfg.ID+"/heartbeat", req, &resp)
	return resp, err
}

// heartbeatRequest carries every unacknowledged report and every live
// attempt. It long-polls (WaitIndex) only when there is nothing to report:
// reports want their acknowledgement at once.
func (w *Worker) heartbeatRequest(index uint64) api.HeartbeatRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := api.HeartbeatRequest{Reports: slices.Clone(w.unacked), Running: []api.AttemptRef{}}
	for k, at := range w.attempts {
		if !at.ended {
			req.Running = append(req.Running, api.AttemptRef{DriverID: k.driver, Attempt: k.attempt})
		}
	}
	slices.SortFunc(req.Running, func(a, b api.AttemptRef) int {
		if c := strings.Compare(a.DriverID, b.DriverID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
	if len(req.Reports) == 0 {
		req.WaitIndex = index
	}
	return req
}

// report queues r for the leader and asks for a heartbeat now.
func (w *Worker) report(r fsm.AttemptReport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue(r)
}

// queue is report with w.mu held. A RUNNING report replaces an
// unacknowledged one of the same attempt, so a supervised program that keeps
// failing while the masters are away does not pile up one report per run.
func (w *Worker) queue(r fsm.AttemptReport) {
	if r.State == fsm.DriverRunning {
		w.unacked = slices.DeleteFunc(w.unacked, func(u fsm.AttemptReport) bool {
			return u.State == fsm.DriverRunning && u.DriverID == r.DriverID && u.Attempt == r.Attempt
		})
	}
	w.unacked = append(w.unacked, r)
	w.poke()
}

// ack drops the reports the leader committed. The leader echoes what it
// was sent, so a report matches on its driver, attempt, state and runs: a
// newer RUNNING report that replaced an acknowledged one stays queued.
func (w *Worker) ack(acked []fsm.AttemptReport) {
	if len(acked) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unacked = slices.DeleteFunc(w.unacked, func(u fsm.AttemptReport) bool {
		return slices.ContainsFunc(acked, func(a fsm.AttemptReport) bool {
			return a.DriverID == u.DriverID && a.Attempt == u.Attempt && a.State == u.State && a.Runs == u.Runs
		})
	})
}

// flushReports sends the queued reports once, for Close: the loop has
// stopped, and the leader should learn that the attempts were killed.
func (w *Worker) flushReports() {
	req := w.heartbeatRequest(0)
	if len(req.Reports) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	var resp api.HeartbeatResponse
	if err := w.masters.Do(ctx, http.MethodPost, "/v1/workers/"+w.cfg.ID+"/heartbeat", req, &resp); err != nil {
		w.log.Warn("could not send the last reports", "reports", len(req.Reports), "err", err)
		return
	}
	w.ack(resp.Acked)
}

// poke asks the loop for a heartbeat now.
func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pause waits d, or less if a local change asks for a heartbeat; false means
// ctx ended.
func (w *Worker) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		// The heartbeat about to go out carries every change so far.
		select {
		case <-w.wake:
		default:
		}
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-w.wake:
	}
	return true
}

// sleep waits d regardless of local changes, so that failing calls to the
// masters are never repeated faster than that; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
