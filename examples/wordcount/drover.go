package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
)

// droverCluster is the cluster of a driver run by Drover: it registers the
// application with the masters in $DROVER_MASTERS, tied to this driver
// attempt through $DROVER_DRIVER_ID and $DROVER_ATTEMPT (which the client
// reads), so the application ends if the attempt dies. The client tries
// every master, so a leader failover only delays registration and events.
type droverCluster struct {
	c    *client.Client
	logf func(string, ...any)

	app  *client.App
	out  chan execEvent
	stop chan struct{}
	wg   sync.WaitGroup
}

func newDroverCluster(logf func(string, ...any)) (*droverCluster, error) {
	masters := strings.Split(os.Getenv("DROVER_MASTERS"), ",")
	// On a secured cluster the worker hands this driver the CA and its
	// own token in DROVER_CACERT and DROVER_TOKEN.
	opts, err := client.OptionsFromEnv()
	if err != nil {
		return nil, err
	}
	c, err := client.New(masters, opts)
	if err != nil {
		return nil, errors.New("DROVER_MASTERS: " + err.Error())
	}
	return &droverCluster{c: c, logf: logf, out: make(chan execEvent), stop: make(chan struct{})}, nil
}

func (d *droverCluster) launch(ctx context.Context, spec appSpec) error {
	app, err := d.c.RegisterApp(ctx, client.AppSpec{
		Name:                spec.Name,
		CoresPerExecutor:    spec.Cores,
		MemoryPerExecutorMB: spec.MemoryMB,
		Executors:           spec.Executors,
		Argv:                spec.Argv,
		Env:                 spec.Env,
		DriverArtifacts:     spec.DriverArtifacts,
	})
	if err != nil {
		return err
	}
	d.app = app
	d.logf("registered application %s", app.ID())
	d.wg.Add(1)
	go d.forward()
	return nil
}

// forward turns the client's executor events into the driver's, until the
// application ends or close is called.
func (d *droverCluster) forward() {
	defer d.wg.Done()
	defer close(d.out)
	for ev := range d.app.Events() {
		e := ev.Executor
		out := execEvent{
			Executor: e.ID,
			Ended:    ev.Kind == client.ExecutorExited || ev.Kind == client.ExecutorLost,
			State:    string(e.State),
			Message:  e.Message,
		}
		if !out.Ended {
			d.logf("executor %d %s on worker %s", e.ID, e.State, e.WorkerID)
		}
		select {
		case d.out <- out:
		case <-d.stop:
			return
		}
	}
}

func (d *droverCluster) events() <-chan execEvent { return d.out }

func (d *droverCluster) done() <-chan struct{} { return d.app.Done() }

func (d *droverCluster) why() string {
	if err := d.app.Err(); err != nil {
		return err.Error()
	}
	if s := d.app.Status(); s.App != nil {
		return strings.TrimSpace(string(s.State) + " " + s.Message)
	}
	return "unknown"
}

func (d *droverCluster) finish(ctx context.Context, err error) error {
	if err != nil {
		return d.app.Unregister(ctx, model.AppFailed, err.Error())
	}
	return d.app.Unregister(ctx, model.AppFinished, "")
}

// close stops watching; the forwarder ends once the client closes Events.
func (d *droverCluster) close() {
	close(d.stop)
	d.app.Close()
	d.wg.Wait()
}
