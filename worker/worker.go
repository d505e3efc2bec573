// Package worker is Drover's worker daemon, the counterpart of Spark's
// standalone Worker: it registers with the masters, offers its cores and
// memory, and reconciles the driver attempts and the executors it runs with
// the sets the leader assigns it, reporting every state change until the
// leader acknowledges it. Each attempt or executor (a "unit") is supervised
// by its own runner process (package runner), so the daemon itself never
// waits on a user's program. It also serves their logs over HTTP, and
// removes the directories of finished units after a TTL or when the disk
// runs low (cleanup.go).
//
// The runners keep their programs running while the daemon renews its
// lease file. They follow the daemon that holds it: one that dies without
// detaching (a crash, a kill) takes its programs with it at once, so that
// the leader may relaunch its drivers as soon as it knows the daemon is
// gone (unitdir.LeaseContent); one that detaches (Detach, for an upgrade)
// leaves them running for up to Config.Lease. The daemon records every
// runner it starts in a bbolt database in its work dir, so that a daemon
// restarted within the lease after a detach adopts the attempts still
// running, and one restarted after a crash reports those that ended,
// instead of running anything twice.
// Executors get all of this as driver attempts do; they are only never
// supervised within the runner, since the leader replaces a failed executor
// with a new one. With isolation (package isolation) each unit also runs
// in a cgroup of its own, made by the worker before its runner starts and
// removed once the unit has ended.
//
// Gossip membership is not part of this package; the command that builds a
// Worker joins the pool beside it.
package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/wait"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/worker/unitdir"
)

// shutdownTimeout bounds the HTTP server's graceful stop in Close.
const shutdownTimeout = 5 * time.Second

// closeGrace is how long Close waits for the runners beyond the kill
// timeout: a runner may spend up to 5s more after its SIGKILL waiting for a
// process stuck in the kernel (runner's killGrace), then reports.
const closeGrace = 7 * time.Second

// decommissionReason is the reason a worker gives the leader when it shuts
// down on purpose.
const decommissionReason = "worker shut down"

// Worker is a running worker daemon. Close (graceful decommission) or Detach
// (hand over to the next daemon) stops it.
type Worker struct {
	cfg       Config
	log       *slog.Logger
	masters   *client.Client
	server    *http.Server
	httpAddr  string
	db        *store
	leasePath string
	// holder is this daemon, as its lease file names it.
	holder holder
	// succeeds, fixed by New, is the detached daemon this one took over
	// the work dir from, or nobody (see predecessor).
	succeeds holder
	// untethered, fixed by New, says that a runner it adopted does not
	// follow its daemon (unitdir.Status's Tethered): an older version's,
	// left by the daemon this one upgraded.
	untethered bool
	// instance is this work dir's instance ID (see InstanceFile).
	instance string
	// iso makes the units' cgroups; nil without isolation.
	iso Cgroups
	// users says who programs run as.
	users *users

	mu    sync.Mutex
	units map[unitKey]*unit
	// unacked holds the reports the leader has not acknowledged yet, oldest
	// first; each heartbeat carries all of them.
	unacked []report
	// known holds the orders of the leader's last desired set, by unit:
	// what a brief answer names only (api.HeartbeatRequest.Brief). Only
	// the heartbeat loop touches it.
	known map[unitKey]order
	// lastContact is when the worker sent the last heartbeat or
	// registration that a leader answered (the send time, not the answer's:
	// the leader may have given up on the worker at any point after it got
	// the request). It starts as the previous worker's on this work dir
	// (see previousContact), zero when unknown: strict fencing holds until
	// a leader answers.
	lastContact time.Time
	// leaseContact is lastContact as the lease file reports it to the
	// runners (unitdir.LeaseContent's LeaderContact): it moves only once
	// the answer has been acted on, so a runner that sees it also finds
	// the stop file of any kill the answer asked for.
	leaseContact time.Time
	// relaunchDue is when the last runner still waiting for a leader's
	// answer before relaunching its program asked for one
	// (unitdir.EventRelaunchDue), zero when none waits: until a request
	// sent since then is answered, heartbeats do not long-poll, and each
	// answer is written to the lease file at once, for the runners that
	// asked earlier.
	relaunchDue time.Time
	// leaseMu orders the lease file's rewrites, so that the last one
	// carries the latest contact.
	leaseMu sync.Mutex
	// metrics is this worker's Prometheus registry (MetricsPath).
	metrics *workerMetrics

	// wake asks the heartbeat loop (non-blocking send, buffer 1) to sync
	// now rather than at its next tick.
	wake chan struct{}
	// peers are the masters' gossip addresses, as they tell them.
	peers peers
	// quit is closed by Detach (and by Close when runners outlast its
	// wait): the watchers return without waiting for their runners, which
	// live on.
	quit chan struct{}

	cancel    context.CancelFunc
	loopDone  chan struct{}
	serveDone chan struct{}
	keepStop  chan struct{}
	keepDone  chan struct{}
	// runners counts the goroutines that watch runner processes.
	runners   sync.WaitGroup
	closeOnce sync.Once

	// cleanMu makes cleanup passes (see clean) one at a time, and
	// guards shortWarned: the pass has warned that it cannot free
	// enough space, and does not again until the disk recovers.
	cleanMu     sync.Mutex
	shortWarned bool
	// cache is the artifact cache the runners stage through; the
	// trimmer keeps it to CacheSizeMB (trimNow: a non-blocking ask,
	// buffer 1). Nil without Config.Artifacts.
	cache    ArtifactCache
	trimNow  chan struct{}
	trimStop chan struct{}
	trimDone chan struct{}
}

// New starts a worker: it creates the work dir, opens its record (failing
// after a second if another worker holds it), renews the lease, makes its
// cgroup (Config.Isolation), adopts the attempts and executors a previous
// worker on the same work dir left running (and queues the reports of those
// that ended meanwhile, whose cgroups it removes with whatever still runs
// in them), listens for HTTP
// and starts registering with the masters in the background. It returns once
// the HTTP server is up; registration goes on until it succeeds.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Fencing == "" {
		cfg.Fencing = FencingDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FreeSpace == nil {
		cfg.FreeSpace = DiskFree
	}
	if cfg.RunnerCommand == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the drover binary for runners: %w", err)
		}
		cfg.RunnerCommand = self
	}
	// Runners work in their attempt directories and must find the lease
	// file and their own directory from there.
	abs, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	cfg.WorkDir = abs
	warning, err := auth.CheckExposure(cfg.BindIP, cfg.TLS.Enabled(), cfg.NodeToken != "", cfg.Insecure)
	if err != nil {
		return nil, err
	}
	// Without TLS or a token, anyone may read the logs, so a page under
	// another name must not (DNS rebinding).
	gate, err := transport.NewGate(transport.GateConfig{CheckHost: !cfg.TLS.Enabled() && cfg.NodeToken == "", BindIP: cfg.BindIP, AllowedHosts: cfg.AllowedHosts})
	if err != nil {
		return nil, err
	}
	var toMasters, serverTLS *tls.Config
	var certWarning string
	if cfg.TLS.Enabled() {
		bound, err := cfg.TLS.CheckNode(pki.RoleWorker, cfg.ID)
		if err != nil {
			return nil, err
		}
		if !bound {
			certWarning = fmt.Sprintf("TLS certificate %s names no worker: masters refuse it unless they run with --allow-unbound-worker-certs; reissue it with drover tls cert --role worker --name %s", cfg.TLS.Cert, cfg.ID)
		}
		if toMasters, err = cfg.TLS.ClientConfig(pki.RoleMaster); err != nil {
			return nil, err
		}
		if serverTLS, err = cfg.TLS.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleMaster); err != nil {
			return nil, err
		}
		// Runners read them from their units' directories.
		for _, f := range []*string{&cfg.TLS.CA, &cfg.TLS.Cert, &cfg.TLS.Key} {
			if *f, err = filepath.Abs(*f); err != nil {
				return nil, err
			}
		}
	}
	us, err := newUsers(cfg, os.Geteuid())
	if err != nil {
		return nil, err
	}
	// After the refusals above: a refused worker makes nothing.
	if err := makeDirs(cfg.WorkDir, us.dirMode()); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if cfg.TLS.Enabled() {
		if err := copyCA(cfg.WorkDir, cfg.TLS.CA); err != nil {
			return nil, fmt.Errorf("copy the CA for programs: %w", err)
		}
	}
	var cache ArtifactCache
	if cfg.Artifacts != nil {
		if cache, err = cfg.Artifacts.OpenCache(filepath.Join(cfg.WorkDir, CacheDir)); err != nil {
			return nil, err
		}
	}
	masters, err := client.New(cfg.Masters, client.Options{
		BindIP:         cfg.BindIP,
		RequestTimeout: cfg.RequestTimeout,
		Sticky:         true,
		TLS:            toMasters,
		Token:          cfg.mastersToken(),
	})
	if err != nil {
		return nil, err
	}
	db, err := openStore(filepath.Join(cfg.WorkDir, DBFile))
	if err != nil {
		return nil, err
	}
	instance, err := loadInstance(cfg.WorkDir)
	if err != nil {
		_ = db.close()
		return nil, err
	}
	w := &Worker{
		instance:  instance,
		users:     us,
		cfg:       cfg,
		log:       cfg.Logger.With("worker", cfg.ID),
		masters:   masters,
		db:        db,
		leasePath: filepath.Join(cfg.WorkDir, LeaseFile),
		holder:    self(),
		units:     map[unitKey]*unit{},
		wake:      make(chan struct{}, 1),
		peers:     peers{now: make(chan struct{}, 1)},
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		serveDone: make(chan struct{}),
		keepStop:  make(chan struct{}),
		keepDone:  make(chan struct{}),
		cache:     cache,
		trimNow:   make(chan struct{}, 1),
		trimStop:  make(chan struct{}),
		trimDone:  make(chan struct{}),
	}
	if w.cfg.Cache == nil && cache != nil {
		w.cfg.Cache = w
	}
	// Fence adopted attempts from the previous worker's last contact: the
	// leader counts from then, not from this start.
	prev := unitdir.ReadLease(w.leasePath)
	w.lastContact = previousContact(prev, time.Now())
	w.succeeds = predecessor(prev)
	w.leaseContact = w.lastContact
	w.metrics = newWorkerMetrics(w)
	// Renew at once: runners left by a previous worker are counting down.
	if err := w.renewLease(false); err != nil {
		db.close()
		return nil, fmt.Errorf("lease file: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindIP, strconv.Itoa(cfg.HTTPPort)))
	if err != nil {
		db.close()
		return nil, fmt.Errorf("http listen: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln = transport.LimitConns(ln, cfg.MaxConnsPerClient, transport.DefaultMaxConns())
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	for _, msg := range []string{warning, certWarning} {
		if msg != "" {
			w.log.Warn(msg)
		}
	}
	if cfg.Isolation != nil {
		w.iso, err = cfg.Isolation.OpenCgroups(unitdir.WorkerCgroupName(cfg.ID, instance), w.log)
	}
	if err != nil {
		ln.Close()
		db.close()
		return nil, err
	}
	if err := w.adopt(); err != nil {
		ln.Close()
		db.close()
		return nil, err
	}
	w.sweepCgroups()
	w.httpAddr = net.JoinHostPort(cfg.BindIP, strconv.Itoa(port))
	w.server = w.newServer(gate)
	go func() {
		defer close(w.serveDone)
		if err := w.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("http server stopped", "err", err)
		}
	}()
	go w.keep()
	go w.trimmer()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.loopDone)
		var beside sync.WaitGroup
		beside.Go(func() { w.refreshPeers(ctx) })
		beside.Go(func() { w.cleaner(ctx) })
		w.loop(ctx)
		beside.Wait()
	}()
	isolated := "none"
	if w.iso != nil {
		isolated = w.iso.String()
	}
	w.log.Info("worker started", "http", w.httpAddr, "cores", cfg.Cores, "memory_mb", cfg.MemoryMB,
		"work_dir", cfg.WorkDir, "lease", cfg.Lease, "fencing", cfg.Fencing, "isolation", isolated)
	return w, nil
}

// sweepCgroups kills and removes, at start, the cgroups under the
// worker's whose units it did not adopt as running: those of units that
// ended while it was down, whose programs must not outlive them, and of
// units whose record is gone.
func (w *Worker) sweepCgroups() {
	if w.iso == nil {
		return
	}
	w.mu.Lock()
	live := map[string]bool{}
	for k, u := range w.units {
		if !u.ended {
			live[k.cgroup()] = true
		}
	}
	w.mu.Unlock()
	removed, err := w.iso.Sweep(func(name string) bool { return live[name] }, orphanGrace)
	if len(removed) > 0 {
		w.log.Info("removed the cgroups of units that are gone", "cgroups", removed)
	}
	if err != nil {
		w.log.Warn("cannot remove the cgroups of units that are gone", "err", err)
	}
}

// Tethered reports whether this worker's runners end their programs as soon
// as this daemon dies without detaching (gossip.Meta's Tethered): false
// where the daemon cannot name itself in its lease file (no /proc), and
// for the life of a daemon that adopted a runner which does not.
func (w *Worker) Tethered() bool { return w.holder.pid != 0 && !w.untethered }

// HTTPAddr is the host:port of the worker's HTTP server, as registered with
// the masters.
func (w *Worker) HTTPAddr() string { return w.httpAddr }

// Close shuts the worker down gracefully and decommissions it, as Spark's
// worker decommissioning does. It stops syncing with the masters and asks the
// leader, within RequestTimeout, to mark the worker DECOMMISSIONED (POST
// /v1/workers/{id}/decommission), so that nothing new is placed here. It then
// kills every attempt and executor it runs, adopted ones included, and waits
// for them to end (up to the kill timeout plus closeGrace; runners still
// alive then end their programs once this process has exited, and the next
// worker on this work dir reports them), and sends their KILLED reports once, within RequestTimeout;
// those relaunch the supervised drivers elsewhere. The order matters:
// reported while the worker was still ALIVE, a KILLED supervised attempt
// could be placed right back here. A master without the endpoint (404) or out
// of reach is logged, not returned. Close returns when every goroutine is
// gone and always returns nil. It is safe to call more than once, and does
// nothing after Detach.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		w.cancel()
		<-w.loopDone
		w.decommission()
		w.killAll("worker " + w.cfg.ID + " shut down")
		w.awaitRunners(w.cfg.KillTimeout + closeGrace)
		if w.iso != nil {
			// Runners still alive keep their units' cgroups, and so
			// the worker's, for the next worker on this work dir.
			if err := w.iso.Remove(); err != nil {
				w.log.Info("keeping the worker's cgroup", "err", err)
			}
		}
		w.stopKeeper()
		w.stopTrimmer()
		w.flushReports()
		if err := w.db.close(); err != nil {
			w.log.Warn("close the worker record", "err", err)
		}
		w.stopServer()
		w.log.Info("worker stopped")
	})
	return nil
}

// Detach stops the daemon without touching its attempts and executors, for an
// upgrade: their runners keep the programs running while nobody renews the
// lease file, for up to the lease, and a new worker started with the same ID
// and work dir within it adopts them. Detach stops the heartbeats and the
// lease renewals, lets go of the runners (their events now go nowhere; their
// status files still tell), closes the record and stops the HTTP server.
// Reports not yet acknowledged are dropped: the next worker reports again
// from the record and the status files. It returns when every goroutine is
// gone and always returns nil; afterwards Close does nothing.
func (w *Worker) Detach() error {
	w.closeOnce.Do(func() {
		w.cancel()
		<-w.loopDone
		w.stopKeeper()
		// A last renewal records the latest leader contact for the next
		// worker's fencing, and tells the runners that this daemon
		// leaves on purpose: they keep their programs for the lease.
		if err := w.renewLease(true); err != nil {
			w.log.Warn("cannot renew the lease file", "err", err)
		}
		w.release()
		w.runners.Wait()
		w.stopTrimmer()
		if err := w.db.close(); err != nil {
			w.log.Warn("close the worker record", "err", err)
		}
		w.stopServer()
		w.log.Info("worker detached; its attempts and executors run on until the lease ends", "lease", w.cfg.Lease)
	})
	return nil
}

// release makes every watcher return without waiting for its runner: the
// adopted ones see quit, the others the end of their event pipe.
func (w *Worker) release() {
	close(w.quit)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, u := range w.units {
		if u.events != nil {
			_ = u.events.Close()
		}
	}
}

// awaitRunners waits up to d for every watched runner to end, then lets go
// of those left (see release).
func (w *Worker) awaitRunners(d time.Duration) {
	done := make(chan struct{})
	go func() {
		w.runners.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	w.log.Error("runners still alive after the kill timeout; they end their programs once this daemon has exited", "waited", d)
	w.release()
	<-done
}

// decommission asks the leader, once and within RequestTimeout, to mark this
// worker DECOMMISSIONED. A master without the endpoint (an older version)
// answers 404, which is only logged: the KILLED reports then relaunch the
// supervised drivers, and the worker's death is noticed the usual way.
func (w *Worker) decommission() {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	err := w.masters.Do(ctx, http.MethodPost, "/v1/workers/"+w.cfg.ID+"/decommission",
		api.DecommissionWorkerRequest{Instance: w.instance, Reason: decommissionReason}, nil)
	switch {
	case err == nil:
		w.log.Info("decommissioned by the leader")
	case errors.Is(err, api.ErrNotFound):
		w.log.Warn("the leader could not decommission this worker (an older master?)", "err", err)
	default:
		w.log.Warn("could not decommission this worker", "err", err)
	}
}

func (w *Worker) stopServer() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := w.server.Shutdown(ctx); err != nil {
		w.log.Warn("http server shutdown", "err", err)
		_ = w.server.Close()
	}
	<-w.serveDone
}

// keep renews the lease file every Lease/4 and, in strict fencing, checks
// the contact with the leader every leasePoll, until stopKeeper.
func (w *Worker) keep() {
	defer close(w.keepDone)
	renew := time.NewTicker(max(w.cfg.Lease/4, time.Millisecond))
	defer renew.Stop()
	var fence <-chan time.Time
	if w.cfg.Fencing == FencingStrict {
		t := time.NewTicker(leasePoll(w.cfg.Lease))
		defer t.Stop()
		fence = t.C
	}
	for {
		select {
		case <-w.keepStop:
			return
		case <-renew.C:
			if err := w.renewLease(false); err != nil {
				w.log.Error("cannot renew the lease file; runners will end their programs", "err", err)
			}
		case <-fence:
			w.fence(time.Now())
		}
	}
}

func (w *Worker) stopKeeper() {
	close(w.keepStop)
	<-w.keepDone
}

// contacted records that a leader answered a request sent at sent.
func (w *Worker) contacted(sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sent.After(w.lastContact) {
		w.lastContact = sent
	}
}

// actedOn records that the answer to a request sent at sent has been
// acted on, and tells the runners at once while one of them waits (see
// relaunchDue); otherwise the next renewal tells them.
func (w *Worker) actedOn(sent time.Time) {
	w.mu.Lock()
	if sent.After(w.leaseContact) {
		w.leaseContact = sent
	}
	waiting := !w.relaunchDue.IsZero()
	if waiting && !sent.Before(w.relaunchDue) {
		w.relaunchDue = time.Time{}
	}
	w.mu.Unlock()
	if waiting {
		if err := w.renewLease(false); err != nil {
			w.log.Warn("cannot renew the lease file for a relaunch; the next renewal tells it", "err", err)
		}
	}
}

// askForRelaunch records that a runner waits for a leader's answer before
// relaunching its program, and has the heartbeat loop ask at once.
func (w *Worker) askForRelaunch() {
	w.mu.Lock()
	w.relaunchDue = time.Now()
	w.mu.Unlock()
	w.poke()
}

// fencedLocked reports, with w.mu held, whether strict fencing forbids
// running supervised attempts and executors, and starting anything, at now.
func (w *Worker) fencedLocked(now time.Time) bool {
	return w.cfg.Fencing == FencingStrict && now.Sub(w.lastContact) > w.cfg.Lease
}

// fence kills the supervised attempts and the executors once no leader has
// answered for the lease, in strict fencing (see FencingStrict).
func (w *Worker) fence(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.fencedLocked(now) {
		return
	}
	reason := fmt.Sprintf("fenced: no contact with a leader for %s", w.cfg.Lease)
	for k, u := range w.units {
		if u.ended || !u.fenceable() || u.killReason != "" {
			continue
		}
		u.killReason = reason
		w.log.Warn("killing "+k.kind.info().noun, k.attrs("reason", reason)...)
		u.fence()
	}
}

// longPolls says whether heartbeats may ask the leader to hold its answer.
// A strict worker does not: a held answer would age its last contact by
// the hold and fence it while the leader is fine.
func (w *Worker) longPolls() bool { return w.cfg.Fencing != FencingStrict }

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
		// The heartbeat about to go out carries every change so far, so a
		// wake left by one of them must not cut its long poll short.
		// Drained before the snapshot: a change after it wakes the loop.
		select {
		case <-w.wake:
		default:
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
			w.metrics.heartbeatFailed()
			w.log.Warn("heartbeat failed", "err", err)
			if !wait.Sleep(ctx, w.cfg.HeartbeatInterval) {
				return
			}
			continue
		}
		w.contacted(sent)
		desired := w.desired(resp)
		w.metrics.heartbeatAnswered(req, sent, desired)
		index = resp.Index
		w.ack(resp)
		w.reconcile(desired)
		w.actedOn(sent)
		if !resp.Registered {
			w.log.Warn("the leader does not know this worker as alive; registering again")
			registered = false
			continue
		}
		if w.longPolls() && longPollNext(req, resp) {
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
	return req.WaitIndex == 0 && resp.Index != 0 && (!hasReports(req) || len(resp.Acked)+len(resp.AckedExecutors) > 0)
}

// hasReports says whether req carries reports of either kind.
func hasReports(req api.HeartbeatRequest) bool {
	return len(req.Reports)+len(req.ExecutorReports) > 0
}

// register retries the registration until it succeeds; false means ctx
// ended first.
func (w *Worker) register(ctx context.Context) bool {
	req := api.RegisterWorkerRequest{ID: w.cfg.ID, Instance: w.instance, HTTPAddr: w.httpAddr, Cores: w.cfg.Cores, MemoryMB: w.cfg.MemoryMB,
		Resources: w.cfg.Resources}
	for {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		var resp api.RegisterWorkerResponse
		err := w.masters.Do(cctx, http.MethodPost, "/v1/workers/register", req, &resp)
		cancel()
		if err == nil {
			w.contacted(sent)
			w.log.Info("registered with the masters")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, api.ErrNotInPool) {
			// The leader's word says what it sees; this worker's says
			// where it tries to join, and asks the masters again.
			w.askPeersNow()
			w.log.Warn("cannot register: the leader does not see this worker in its gossip pool; retrying",
				"err", err, "joining", w.GossipAddrs())
		} else {
			w.log.Warn("cannot register, retrying", "err", err)
		}
		if !wait.Sleep(ctx, w.cfg.HeartbeatInterval) {
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
// unit, adopted ones included, each in the fields of its kind. It
// long-polls (WaitIndex) only when there is nothing to report, reports want
// their acknowledgement at once, and never in strict fencing (see
// longPolls) or while a runner waits for an answer to relaunch (see
// relaunchDue).
func (w *Worker) heartbeatRequest(index uint64) api.HeartbeatRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := api.HeartbeatRequest{Instance: w.instance, Running: []api.AttemptRef{}}
	for _, r := range w.unacked {
		if r.key.kind == kindExecutor {
			req.ExecutorReports = append(req.ExecutorReports, r.executorReport())
		} else {
			req.Reports = append(req.Reports, r.attemptReport())
		}
	}
	var running []unitKey
	for k, u := range w.units {
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
		if _, ok := w.known[k]; !ok {
			req.Brief = false
		}
		if k.kind == kindExecutor {
			req.RunningExecutors = append(req.RunningExecutors, api.ExecutorRef{AppID: k.id, ExecutorID: k.n})
		} else {
			req.Running = append(req.Running, api.AttemptRef{DriverID: k.id, Attempt: k.n})
		}
	}
	if !hasReports(req) && w.longPolls() && w.relaunchDue.IsZero() {
		req.WaitIndex = index
	}
	return req
}

// desired is the desired set of an answer: its units in full, then those
// a brief answer kept, with the orders the worker holds for them; it
// becomes the orders the worker holds. A kept unit is one the request
// named, and a request is brief only when the worker holds the order of
// every unit it names, so none is missing.
func (w *Worker) desired(resp api.HeartbeatResponse) []order {
	out := orders(resp)
	for _, a := range resp.Kept {
		if o, ok := w.known[attemptKey(a.DriverID, a.Attempt)]; ok {
			out = append(out, o)
		}
	}
	for _, e := range resp.KeptExecutors {
		if o, ok := w.known[executorKey(e.AppID, e.ExecutorID)]; ok {
			out = append(out, o)
		}
	}
	w.known = make(map[unitKey]order, len(out))
	for _, o := range out {
		w.known[o.key] = o
	}
	return out
}

// report queues r for the leader and asks for a heartbeat now.
func (w *Worker) report(r report) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue(r)
}

// queue is report with w.mu held. A RUNNING report replaces an
// unacknowledged one of the same unit, so a supervised program that keeps
// failing while the masters are away does not pile up one report per run.
// A staging report replaces the unit's unacknowledged staging report, and
// any later report drops it: only the latest word on a staging matters.
func (w *Worker) queue(r report) {
	w.unacked = slices.DeleteFunc(w.unacked, func(u report) bool {
		return u.key == r.key && (u.staging || (u.state == model.DriverRunning && r.state == model.DriverRunning && !r.staging))
	})
	w.unacked = append(w.unacked, r)
	w.poke()
}

// ack drops the reports the leader committed (resp.Acked and
// resp.AckedExecutors). The leader echoes what it was sent, so a report
// matches on its ackID: a newer RUNNING report that replaced an
// acknowledged one stays queued. Once a unit's final report is committed
// its record goes too: nothing is left to adopt or report.
func (w *Worker) ack(resp api.HeartbeatResponse) {
	ids, done := acked(resp)
	if len(ids) == 0 {
		return
	}
	w.mu.Lock()
	w.unacked = slices.DeleteFunc(w.unacked, func(u report) bool { return ids[u.ackID()] })
	w.mu.Unlock()
	if len(done) == 0 {
		return
	}
	// Outside w.mu: a commit waits for the disk. Should it fail, the next
	// worker on this work dir reports the unit again, which the leader
	// ignores.
	if err := w.db.remove(done); err != nil {
		w.log.Warn("cannot remove acknowledged units from the record", "err", err)
	}
}

// flushReports sends the queued reports once, for Close: the loop has
// stopped, and the leader, which keeps a decommissioned worker's drivers
// placed until they are reported, should learn at once that they were
// killed. It takes reports from a decommissioned worker, though it answers
// that the worker is no longer registered.
func (w *Worker) flushReports() {
	req := w.heartbeatRequest(0)
	if !hasReports(req) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	var resp api.HeartbeatResponse
	if err := w.masters.Do(ctx, http.MethodPost, "/v1/workers/"+w.cfg.ID+"/heartbeat", req, &resp); err != nil {
		w.log.Warn("could not send the last reports", "reports", len(req.Reports)+len(req.ExecutorReports), "err", err)
		return
	}
	w.ack(resp)
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
