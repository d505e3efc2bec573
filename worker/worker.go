// Package worker is Drover's worker daemon, the counterpart of Spark's
// standalone Worker: it registers with the masters, offers its cores and
// memory, and reconciles the driver attempts and the executors it runs with
// the sets the leader assigns it, reporting every state change until the
// leader acknowledges it. Each attempt or executor (a "unit") is supervised
// by its own runner process (package runner), so the daemon itself never
// waits on a user's program; the two speak only through the files of
// package unitdir, and the worker links no part of the runner. It also serves their logs over HTTP, and
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
// with a new one. With isolation (package isolation, given as
// Config.Isolation) each unit also runs in a cgroup of its own, made by
// the worker before its runner starts and removed once the unit has
// ended. DESIGN.md names the parts a Worker is made of.
//
// Gossip membership is not part of this package; the command that builds a
// Worker joins the pool beside it.
package worker

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/drover-project/drover/client"
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

// Worker is a running worker daemon, made of five parts with one job
// each (DESIGN.md): the reconciler runs the units (launches, adoption,
// kills, reports), the lease keeper renews the lease file and fences in
// strict mode, the janitor removes old unit directories and trims the
// artifact cache, the log server answers HTTP (logs, health, metrics) and
// the session registers and heartbeats with the leader. New starts them in
// that order; Close (graceful decommission) or Detach (hand over to the
// next daemon) stops them, the session first.
type Worker struct {
	cfg     Config
	log     *slog.Logger
	db      *store
	st      *workerState
	rec     *reconciler
	lease   *leaseKeeper
	janitor *janitor
	logs    *logServer
	session *session

	closeOnce sync.Once
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
	log := cfg.Logger.With("worker", cfg.ID)
	st := &workerState{units: map[unitKey]*unit{}, wake: make(chan struct{}, 1)}
	lk := newLeaseKeeper(cfg, log, st)
	j := newJanitor(cfg, log, db, st, cache)
	if cfg.Cache == nil && cache != nil {
		cfg.Cache = j
		j.cfg.Cache = j
	}
	metrics := newWorkerMetrics(cfg, st, j.freeSpace)
	j.metrics = metrics
	rc := &reconciler{cfg: cfg, log: log, db: db, metrics: metrics, st: st, lease: lk, janitor: j, users: us, quit: make(chan struct{})}
	w := &Worker{cfg: cfg, log: log, db: db, st: st, rec: rc, lease: lk, janitor: j}
	// Renew at once: runners left by a previous worker are counting down.
	if err := lk.renewLease(false); err != nil {
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
			log.Warn(msg)
		}
	}
	if cfg.Isolation != nil {
		rc.iso, err = cfg.Isolation.OpenCgroups(unitdir.WorkerCgroupName(cfg.ID, instance), log)
	}
	if err != nil {
		ln.Close()
		db.close()
		return nil, err
	}
	if err := rc.adopt(); err != nil {
		ln.Close()
		db.close()
		return nil, err
	}
	rc.sweepCgroups()
	lk.start()
	j.start()
	w.logs = &logServer{cfg: cfg, log: log, db: db, metrics: metrics, janitor: j}
	w.logs.start(ln, gate)
	w.session = &session{cfg: cfg, log: log, db: db, metrics: metrics, st: st, lease: lk, rec: rc,
		masters: masters, instance: instance, httpAddr: net.JoinHostPort(cfg.BindIP, strconv.Itoa(port)),
		peers: peers{now: make(chan struct{}, 1)}}
	w.session.start()
	isolated := "none"
	if rc.iso != nil {
		isolated = rc.iso.String()
	}
	log.Info("worker started", "http", w.session.httpAddr, "cores", cfg.Cores, "memory_mb", cfg.MemoryMB,
		"work_dir", cfg.WorkDir, "lease", cfg.Lease, "fencing", cfg.Fencing, "isolation", isolated)
	return w, nil
}

// Tethered reports whether this worker's runners end their programs as soon
// as this daemon dies without detaching (gossip.Meta's Tethered): false
// where the daemon cannot name itself in its lease file (no /proc), and
// for the life of a daemon that adopted a runner which does not.
func (w *Worker) Tethered() bool { return w.lease.holder.pid != 0 && !w.rec.untethered }

// HTTPAddr is the host:port of the worker's HTTP server, as registered with
// the masters.
func (w *Worker) HTTPAddr() string { return w.session.httpAddr }

// GossipAddrs returns the masters' gossip addresses learned from them: the
// gossip pool's Discover (gossip.Config), so --join may stay empty.
func (w *Worker) GossipAddrs() []string { return w.session.gossipAddrs() }

// FreeCache asks the artifact cache (Config.Artifacts; none frees
// nothing) for space when the disk runs low, as the janitor does: it
// evicts the least recently used entries that no live unit uses until
// bytes are freed, and returns how many it freed. It is safe for
// concurrent use.
func (w *Worker) FreeCache(ctx context.Context, bytes int64) (int64, error) {
	return w.janitor.FreeCache(ctx, bytes)
}

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
		w.session.stop()
		w.session.decommission()
		w.rec.killAll("worker " + w.cfg.ID + " shut down")
		w.rec.awaitRunners(w.cfg.KillTimeout + closeGrace)
		w.rec.removeWorkerCgroup()
		w.lease.stop()
		w.janitor.stop()
		w.session.flushReports()
		if err := w.db.close(); err != nil {
			w.log.Warn("close the worker record", "err", err)
		}
		w.logs.stop()
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
		w.session.stop()
		w.lease.stop()
		// A last renewal records the latest leader contact for the next
		// worker's fencing, and tells the runners that this daemon
		// leaves on purpose: they keep their programs for the lease.
		if err := w.lease.renewLease(true); err != nil {
			w.log.Warn("cannot renew the lease file", "err", err)
		}
		w.rec.release()
		w.rec.runners.Wait()
		w.janitor.stop()
		if err := w.db.close(); err != nil {
			w.log.Warn("close the worker record", "err", err)
		}
		w.logs.stop()
		w.log.Info("worker detached; its attempts and executors run on until the lease ends", "lease", w.cfg.Lease)
	})
	return nil
}
