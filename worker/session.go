package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/wait"
)

// session is the part of the worker that speaks with the leader: it
// registers, heartbeats (reports out, the desired set in, which it hands
// to the reconciler), learns the masters' gossip addresses and, on Close,
// decommissions the worker. It owns the masters' client, known and the
// peers; the contact times it records are the workerState's. Only its
// loop starts units (through the reconciler), so none starts once it has
// stopped.
type session struct {
	cfg     Config
	log     *slog.Logger
	db      *store
	metrics *workerMetrics
	st      *workerState
	lease   *leaseKeeper
	rec     *reconciler
	masters *client.Client
	// instance is this work dir's instance ID (see InstanceFile).
	instance string
	// httpAddr is the log server's host:port, as registered.
	httpAddr string
	// known holds the orders of the leader's last desired set, by unit:
	// what a brief answer names only (api.HeartbeatRequest.Brief). Only
	// the loop touches it.
	known map[unitKey]order
	// peers are the masters' gossip addresses, as they tell them.
	peers    peers
	cancel   context.CancelFunc
	loopDone chan struct{}
}

// start registers and heartbeats from now on, and asks the masters for
// their gossip addresses, until stop.
func (s *session) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.loopDone = make(chan struct{})
	go func() {
		defer close(s.loopDone)
		var beside sync.WaitGroup
		beside.Go(func() { s.refreshPeers(ctx) })
		s.loop(ctx)
		beside.Wait()
	}()
}

// stop ends the loop, a heartbeat in flight included, and returns once
// it has: no unit starts afterwards.
func (s *session) stop() {
	s.cancel()
	<-s.loopDone
}

// loop registers, then heartbeats until ctx ends. Only this goroutine starts
// attempts, so none starts once it has returned.
func (s *session) loop(ctx context.Context) {
	registered := false
	var index uint64
	for {
		if !registered {
			if !s.register(ctx) {
				return
			}
			registered = true
		}
		// The heartbeat about to go out carries every change so far, so a
		// wake left by one of them must not cut its long poll short.
		// Drained before the snapshot: a change after it wakes the loop.
		select {
		case <-s.st.wake:
		default:
		}
		sent := time.Now()
		req := s.heartbeatRequest(index)
		resp, err := s.heartbeat(ctx, req)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errWoken):
			continue
		case err != nil:
			s.metrics.heartbeatFailed()
			s.log.Warn("heartbeat failed", "err", err)
			if !wait.Sleep(ctx, s.cfg.HeartbeatInterval) {
				return
			}
			continue
		}
		s.contacted(sent)
		desired := s.desired(resp)
		s.metrics.heartbeatAnswered(req, sent, desired)
		index = resp.Index
		s.ack(resp)
		s.rec.reconcile(desired)
		s.rec.preempt(resp.Preempt)
		s.lease.actedOn(sent)
		if !resp.Registered {
			s.log.Warn("the leader does not know this worker as alive; registering again")
			registered = false
			continue
		}
		if s.longPolls() && longPollNext(req, resp) {
			continue
		}
		if !s.pause(ctx, s.cfg.HeartbeatInterval-time.Since(sent)) {
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
	return req.WaitIndex == 0 && resp.Index != 0 && (!hasReports(req) || len(resp.Acked)+len(resp.AckedExecutors) > 0)
}

// hasReports says whether req carries reports of either kind.
func hasReports(req api.HeartbeatRequest) bool {
	return len(req.Reports)+len(req.ExecutorReports) > 0
}

// register retries the registration until it succeeds; false means ctx
// ended first.
func (s *session) register(ctx context.Context) bool {
	req := api.RegisterWorkerRequest{ID: s.cfg.ID, Instance: s.instance, HTTPAddr: s.httpAddr, Cores: s.cfg.Cores, MemoryMB: s.cfg.MemoryMB,
		Resources: s.cfg.Resources}
	for {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		var resp api.RegisterWorkerResponse
		err := s.masters.Do(cctx, http.MethodPost, "/v1/workers/register", req, &resp)
		cancel()
		if err == nil {
			s.contacted(sent)
			s.log.Info("registered with the masters")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, api.ErrNotInPool) {
			// The leader's word says what it sees; this worker's says
			// where it tries to join, and asks the masters again.
			s.askPeersNow()
			s.log.Warn("cannot register: the leader does not see this worker in its gossip pool; retrying",
				"err", err, "joining", s.gossipAddrs())
		} else {
			s.log.Warn("cannot register, retrying", "err", err)
		}
		if !wait.Sleep(ctx, s.cfg.HeartbeatInterval) {
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
func (s *session) heartbeat(ctx context.Context, req api.HeartbeatRequest) (resp api.HeartbeatResponse, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if req.WaitIndex != 0 {
		woken := false
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-s.st.wake:
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
				s.st.poke()
			}
		}()
	}
	err = s.masters.Do(ctx, http.MethodPost, "/v1/workers/"+s.cfg.ID+"/heartbeat", req, &resp)
	return resp, err
}

// heartbeatRequest carries every unacknowledged report and every live
// unit, adopted ones included, each in the fields of its kind. It
// long-polls (WaitIndex) only when there is nothing to report, reports want
// their acknowledgement at once, and never in strict fencing (see
// longPolls) or while a runner waits for an answer to relaunch (see
// relaunchDue).
func (s *session) heartbeatRequest(index uint64) api.HeartbeatRequest {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	req := api.HeartbeatRequest{Instance: s.instance, Running: []api.AttemptRef{}}
	for _, r := range s.st.unacked {
		if r.key.kind == kindExecutor {
			req.ExecutorReports = append(req.ExecutorReports, r.executorReport())
		} else {
			req.Reports = append(req.Reports, r.attemptReport())
		}
	}
	var running []unitKey
	for k, u := range s.st.units {
		if !u.ended {
			running = append(running, k)
		}
	}
	slices.SortFunc(running, func(a, b unitKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return a.n - b.n
	})
	// Brief only when the worker holds the order of every unit it
	// names, such as adopted ones before the first answer: the units a
	// brief answer keeps come back without one.
	req.Brief = true
	for _, k := range running {
		if _, ok := s.known[k]; !ok {
			req.Brief = false
		}
		if k.kind == kindExecutor {
			req.RunningExecutors = append(req.RunningExecutors, api.ExecutorRef{AppID: k.id, ExecutorID: k.n})
		} else {
			req.Running = append(req.Running, api.AttemptRef{DriverID: k.id, Attempt: k.n})
		}
	}
	req.Preempting = s.rec.preempting()
	if !hasReports(req) && s.longPolls() && s.st.relaunchDue.IsZero() {
		req.WaitIndex = index
	}
	return req
}

// desired is the desired set of an answer: its units in full, then those
// a brief answer kept, with the orders the worker holds for them; it
// becomes the orders the worker holds. A kept unit is one the request
// named, and a request is brief only when the worker holds the order of
// every unit it names, so none is missing.
func (s *session) desired(resp api.HeartbeatResponse) []order {
	out := orders(resp)
	for _, a := range resp.Kept {
		if o, ok := s.known[attemptKey(a.DriverID, a.Attempt)]; ok {
			out = append(out, o)
		}
	}
	for _, e := range resp.KeptExecutors {
		if o, ok := s.known[executorKey(e.AppID, e.ExecutorID)]; ok {
			out = append(out, o)
		}
	}
	s.known = make(map[unitKey]order, len(out))
	for _, o := range out {
		s.known[o.key] = o
	}
	return out
}

// ack drops the reports the leader committed (resp.Acked and
// resp.AckedExecutors). The leader echoes what it was sent, so a report
// matches on its ackID: a newer RUNNING report that replaced an
// acknowledged one stays queued. Once a unit's final report is committed
// its record goes too: nothing is left to adopt or report.
func (s *session) ack(resp api.HeartbeatResponse) {
	ids, done := acked(resp)
	if len(ids) == 0 {
		return
	}
	s.st.mu.Lock()
	s.st.unacked = slices.DeleteFunc(s.st.unacked, func(u report) bool { return ids[u.ackID()] })
	s.st.mu.Unlock()
	if len(done) == 0 {
		return
	}
	// Outside s.st.mu: a commit waits for the disk. Should it fail, the next
	// worker on this work dir reports the unit again, which the leader
	// ignores.
	if err := s.db.remove(done); err != nil {
		s.log.Warn("cannot remove acknowledged units from the record", "err", err)
	}
}

// flushReports sends the queued reports once, for Close: the loop has
// stopped, and the leader, which keeps a decommissioned worker's drivers
// placed until they are reported, should learn at once that they were
// killed. It takes reports from a decommissioned worker, though it answers
// that the worker is no longer registered.
func (s *session) flushReports() {
	req := s.heartbeatRequest(0)
	if !hasReports(req) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	var resp api.HeartbeatResponse
	if err := s.masters.Do(ctx, http.MethodPost, "/v1/workers/"+s.cfg.ID+"/heartbeat", req, &resp); err != nil {
		s.log.Warn("could not send the last reports", "reports", len(req.Reports)+len(req.ExecutorReports), "err", err)
		return
	}
	s.ack(resp)
}

// pause waits d, or less if a local change asks for a heartbeat; false means
// ctx ended.
func (s *session) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.st.wake:
	}
	return true
}

// longPolls says whether heartbeats may ask the leader to hold its answer.
// A strict worker does not: a held answer would age its last contact by
// the hold and fence it while the leader is fine.
func (s *session) longPolls() bool { return s.cfg.Fencing != FencingStrict }

// contacted records that a leader answered a request sent at sent.
func (s *session) contacted(sent time.Time) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if sent.After(s.st.lastContact) {
		s.st.lastContact = sent
	}
}

// decommission asks the leader, once and within RequestTimeout, to mark this
// worker DECOMMISSIONED. A master without the endpoint (an older version)
// answers 404, which is only logged: the KILLED reports then relaunch the
// supervised drivers, and the worker's death is noticed the usual way.
func (s *session) decommission() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	err := s.masters.Do(ctx, http.MethodPost, "/v1/workers/"+s.cfg.ID+"/decommission",
		api.DecommissionWorkerRequest{Instance: s.instance, Reason: decommissionReason}, nil)
	switch {
	case err == nil:
		s.log.Info("decommissioned by the leader")
	case errors.Is(err, api.ErrNotFound):
		s.log.Warn("the leader could not decommission this worker (an older master?)", "err", err)
	default:
		s.log.Warn("could not decommission this worker", "err", err)
	}
}
