// Package workload is the suite's clients: concurrent processes that submit
// probe drivers (with and without supervise, some failing at first), read
// their statuses and kill some (and, in a run with schedules, ask for
// manual runs), through the real Go client, recording every
// operation in the history. A timeout or a lost leader is recorded as info
// (indeterminate), never as fail.
package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/model"
)

// Config shapes the workload.
type Config struct {
	// Masters are the masters' HTTP addresses.
	Masters []string
	// Clients is the number of concurrent client processes.
	Clients int
	// Seed draws every client's choice of operations.
	Seed uint64
	// Program is the probe executable (jepsen/cmd/probe); drivers run
	// Program ARGS.
	Program string
	// ProbeDir is where probes write their traces.
	ProbeDir string
	// OpTimeout bounds each operation; one that times out is info.
	OpTimeout time.Duration
	// Pause is the longest pause between two operations of a client.
	Pause time.Duration
	// Namespaces, when set, are the namespaces (besides default) that
	// submissions spread over, each as likely as default; empty, every
	// submission names none, and the clients draw what they always drew.
	Namespaces []string
	// Schedules, when set, are the run's schedules: a fifth of the
	// operations that would kill a driver ask one of them for a manual
	// run instead. Empty, the clients draw what they always drew.
	Schedules []string
}

// Workload runs the clients. Drivers lists what was submitted.
type Workload struct {
	cfg Config
	rec *history.Recorder
	cl  *client.Client

	mu      sync.Mutex
	drivers []string
}

// New returns a workload recording into rec.
func New(cfg Config, rec *history.Recorder) (*Workload, error) {
	cl, err := client.New(cfg.Masters, client.Options{RequestTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	return &Workload{cfg: cfg, rec: rec, cl: cl}, nil
}

// Run runs every client until ctx ends, then waits for their last
// operations to complete.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for p := 0; p < w.cfg.Clients; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(ctx, p)
		}()
	}
	wg.Wait()
}

func (w *Workload) client(ctx context.Context, p int) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(p)+1))
	for ctx.Err() == nil {
		switch x := rng.IntN(100); {
		case x < 40:
			w.Submit(ctx, p, rng)
		case x < 85:
			if id := w.known(rng); id != "" {
				w.read(ctx, p, id)
			}
		case len(w.cfg.Schedules) > 0 && rng.IntN(5) == 0:
			w.runSchedule(p, rng)
		default:
			if id := w.known(rng); id != "" {
				w.kill(ctx, p, id)
			}
		}
		t := time.NewTimer(time.Duration(rng.Int64N(int64(w.cfg.Pause) + 1)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func (w *Workload) known(rng *rand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.drivers) == 0 {
		return ""
	}
	// Favour recent drivers, which are the ones still changing.
	n := len(w.drivers)
	return w.drivers[n-1-rng.IntN(min(n, 20))]
}

// opContext is the context of one operation: it outlives the run's end by
// the op timeout, so an operation in flight when the run stops completes.
func (w *Workload) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), w.cfg.OpTimeout)
}

// outcome classifies an error: an authoritative refusal is fail, anything
// else (no leader, timeout, connection cut) is info.
func outcome(err error) history.Type {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		return history.Fail
	}
	return history.Info
}

// Submit submits one probe driver as process p and returns the op's
// completion. The driver runs 1 to 8 s; some are supervised, some exit
// non-zero on their first run.
func (w *Workload) Submit(ctx context.Context, p int, rng *rand.Rand) history.Op {
	supervise := rng.IntN(100) < 60
	spec := probe.Spec{Dir: w.cfg.ProbeDir, Run: time.Duration(1000+rng.IntN(7000)) * time.Millisecond}
	if rng.IntN(100) < 25 {
		spec.FailFirst = 1
	}
	req := api.SubmitRequest{
		Token: client.NewToken(),
		DriverSpec: model.DriverSpec{
			Argv:      append([]string{w.cfg.Program}, spec.Args()...),
			Cores:     1,
			MemoryMB:  64,
			Supervise: supervise,
		},
	}
	if n := len(w.cfg.Namespaces); n > 0 {
		if i := rng.IntN(n + 1); i < n {
			req.Namespace = w.cfg.Namespaces[i]
		}
	}
	inv := w.rec.Add(history.Op{Process: p, Type: history.Invoke, F: history.FSubmit, Token: req.Token, Supervise: supervise, Namespace: req.Namespace})
	octx, cancel := w.opContext()
	defer cancel()
	res, err := w.cl.Submit(octx, req)
	if err != nil {
		return w.rec.Complete(inv, outcome(err), func(op *history.Op) { op.Error = err.Error() })
	}
	w.mu.Lock()
	w.drivers = append(w.drivers, res.DriverID)
	w.mu.Unlock()
	return w.rec.Complete(inv, history.OK, func(op *history.Op) { op.Driver = res.DriverID })
}

func (w *Workload) read(_ context.Context, p int, id string) {
	inv := w.rec.Add(history.Op{Process: p, Type: history.Invoke, F: history.FRead, Driver: id})
	octx, cancel := w.opContext()
	defer cancel()
	d, err := w.cl.Driver(octx, id)
	if err != nil {
		w.rec.Complete(inv, outcome(err), func(op *history.Op) { op.Error = err.Error() })
		return
	}
	w.rec.Complete(inv, history.OK, func(op *history.Op) { op.State, op.Attempt = string(d.State), d.Attempt })
}

func (w *Workload) kill(_ context.Context, p int, id string) {
	inv := w.rec.Add(history.Op{Process: p, Type: history.Invoke, F: history.FKill, Driver: id})
	octx, cancel := w.opContext()
	defer cancel()
	if err := w.cl.Kill(octx, id); err != nil {
		w.rec.Complete(inv, outcome(err), func(op *history.Op) { op.Error = err.Error() })
		return
	}
	w.rec.Complete(inv, history.OK, nil)
}

// AwaitWrite submits as process p until a submission is acknowledged or
// ctx ends, and returns the time of the acknowledgement (Unix ns), or 0.
func (w *Workload) AwaitWrite(ctx context.Context, p int) int64 {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 0))
	for ctx.Err() == nil {
		if op := w.Submit(ctx, p, rng); op.Type == history.OK {
			return op.Time
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0
}
