package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// AppSpec describes an application to register (Spark's
// ApplicationDescription). Memory is in MiB.
type AppSpec struct {
	Name string
	// MaxCores caps the cores of all the app's executors together; 0 for
	// no cap (Spark's spark.cores.max).
	MaxCores            int
	CoresPerExecutor    int
	MemoryPerExecutorMB int64
	// Executors is the initial executor limit; 0 for no limit beyond
	// MaxCores.
	Executors int
	// Argv and Env are each executor's program and environment; a worker
	// adds DROVER_APP_ID, DROVER_EXECUTOR_ID, DROVER_EXECUTOR_CORES,
	// DROVER_EXECUTOR_MEMORY_MB, DROVER_WORKER_ID and DROVER_MASTERS.
	Argv []string
	Env  map[string]string
	// Artifacts are staged into each executor's directory before it
	// starts (see model.Artifact). With DriverArtifacts the executors get
	// the registering driver's artifacts too, first.
	Artifacts       []model.Artifact
	DriverArtifacts bool
	// ExecutorResources are the custom resources each executor needs, by
	// name (Spark's spark.executor.resource.{name}.amount); an executor
	// finds the addresses it holds in $DROVER_RESOURCE_<NAME> and
	// $DROVER_RESOURCES_FILE.
	ExecutorResources model.ResourceAmounts
	// DriverID and DriverAttempt tie the app to the driver attempt that
	// runs this client: when it ends, the app ends. They default to
	// $DROVER_DRIVER_ID and $DROVER_ATTEMPT, which a worker sets for
	// every driver.
	DriverID      string
	DriverAttempt int
	// DriverRun is the run of that attempt ($DROVER_RUN by default): a
	// supervised driver restarted in place ends the apps of its earlier
	// runs.
	DriverRun int
	// User is the user the executors run as (api.RegisterAppRequest's):
	// empty for the driver's own user, or each worker's default when no
	// driver registers the app. A driver may name only its own user.
	User string
}

// EventKind says what happened to an executor.
type EventKind string

// Executor events, derived from the app's status as the leader reports it.
const (
	// ExecutorAdded: the leader placed a new executor (LAUNCHING).
	ExecutorAdded EventKind = "added"
	// ExecutorRunning: its worker started it.
	ExecutorRunning EventKind = "running"
	// ExecutorExited: it ended EXITED, FAILED or KILLED.
	ExecutorExited EventKind = "exited"
	// ExecutorLost: its worker was lost (LOST).
	ExecutorLost EventKind = "lost"
)

// ExecutorEvent is one change of one executor, with the executor's row as
// it was when the change was seen.
type ExecutorEvent struct {
	Kind     EventKind
	Executor model.Executor
}

// App is a registered application, watched from this process (Spark's
// StandaloneAppClient). Its watch is also its sign of life: an app nobody
// watches for the leader's --app-timeout is ended FAILED. The watch goes to
// every master and retries across failovers, so a new leader is picked up
// with the same app ID after a short pause. Call Close when done with it.
// Methods are safe for concurrent use.
type App struct {
	c  *Client
	id string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events chan ExecutorEvent
	done   chan struct{}
	closed chan struct{}
	close  sync.Once

	mu      sync.Mutex
	status  api.AppStatus
	pending []ExecutorEvent
	wake    chan struct{}
	err     error
}

// RegisterApp registers an application and starts watching it. Like
// Submit, it sends the request to every master and retries with one token
// until ctx ends, so a retry never registers a second app (Spark's
// tryRegisterAllMasters and its retry rounds). Refusals (bad spec, unknown
// or ended driver) are *APIError; no leader before ctx ends is
// ErrNoMaster.
func (c *Client) RegisterApp(ctx context.Context, spec AppSpec) (*App, error) {
	if spec.DriverID == "" {
		spec.DriverID = os.Getenv("DROVER_DRIVER_ID")
		if spec.DriverID != "" {
			n, err := strconv.Atoi(os.Getenv("DROVER_ATTEMPT"))
			if err != nil {
				return nil, fmt.Errorf("DROVER_ATTEMPT %q: %w", os.Getenv("DROVER_ATTEMPT"), err)
			}
			spec.DriverAttempt = n
			// Absent under older runners: the app is then tied to the
			// attempt only.
			spec.DriverRun, _ = strconv.Atoi(os.Getenv("DROVER_RUN"))
		}
	}
	req := api.RegisterAppRequest{
		Token: NewToken(), Name: spec.Name, DriverID: spec.DriverID, DriverAttempt: spec.DriverAttempt, DriverRun: spec.DriverRun,
		MaxCores: spec.MaxCores, CoresPerExecutor: spec.CoresPerExecutor, MemoryPerExecutorMB: spec.MemoryPerExecutorMB,
		Executors: spec.Executors, Argv: spec.Argv, Env: spec.Env, Artifacts: spec.Artifacts, DriverArtifacts: spec.DriverArtifacts,
		ExecutorResources: spec.ExecutorResources, User: spec.User,
	}
	var resp api.RegisterAppResponse
	if err := call(ctx, c, api.V1RegisterApp, api.V1RegisterApp.Pattern, req, &resp); err != nil {
		return nil, err
	}
	return c.WatchApp(resp.AppID), nil
}

// WatchApp starts watching an app registered earlier (by this process or
// another), as RegisterApp does for a new one.
func (c *Client) WatchApp(id string) *App {
	ctx, cancel := context.WithCancel(context.Background())
	a := &App{
		c: c, id: id, ctx: ctx, cancel: cancel,
		events: make(chan ExecutorEvent),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
		wake:   make(chan struct{}, 1),
	}
	a.wg.Add(2)
	go a.watch()
	go a.deliver()
	return a
}

// ID is the app's ID, app-<yyyyMMddHHmmss>-<seq>.
func (a *App) ID() string { return a.id }

// Events delivers executor events in the order they were seen; it is
// closed once the app has ended (after its last events) or Close is
// called. Events are queued, never dropped, while nobody reads.
func (a *App) Events() <-chan ExecutorEvent { return a.events }

// Done is closed when the app has reached a final state (see Status), or
// the watch gave up (see Err).
func (a *App) Done() <-chan struct{} { return a.done }

// Status returns the app's status as last seen; App is nil before the
// first answer.
func (a *App) Status() api.AppStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Err says why the watch stopped before the app ended: the app was
// dropped from the tables, or Close was called. It is nil otherwise.
func (a *App) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// RequestExecutors sets the app's executor limit to total (Spark's
// requestTotalExecutors): more are placed when it rises; lowering it kills
// none.
func (a *App) RequestExecutors(ctx context.Context, total int) error {
	return call(ctx, a.c, api.V1RequestExecutors, api.V1RequestExecutors.Path(a.id), api.RequestExecutorsRequest{Total: total}, nil)
}

// KillExecutors kills executors by ID; they are not replaced (the limit
// drops by as many).
func (a *App) KillExecutors(ctx context.Context, ids ...int) error {
	return call(ctx, a.c, api.V1KillExecutors, api.V1KillExecutors.Path(a.id), api.KillExecutorsRequest{ExecutorIDs: ids}, nil)
}

// Unregister ends the app in state (model.AppFinished or model.AppFailed) with
// a message, killing its executors (Spark's UnregisterApplication). The
// watch then sees the final state and ends. Retrying is safe.
func (a *App) Unregister(ctx context.Context, state model.ApplicationState, message string) error {
	return call(ctx, a.c, api.V1UnregisterApp, api.V1UnregisterApp.Path(a.id), api.UnregisterAppRequest{State: state, Message: message}, nil)
}

// Close stops watching without unregistering and closes Events. The app
// ends FAILED after the leader's --app-timeout unless someone else watches
// it.
func (a *App) Close() {
	a.close.Do(func() { close(a.closed) })
	a.stopWatch(errors.New("watch closed"))
	a.wg.Wait()
}

func (a *App) stopWatch(err error) {
	a.mu.Lock()
	if a.err == nil && (a.status.App == nil || !a.status.State.Terminal()) {
		a.err = err
	}
	a.mu.Unlock()
	a.cancel()
}

// watch long-polls the app's status and turns each change into events.
func (a *App) watch() {
	defer a.wg.Done()
	defer close(a.done)
	defer a.cancel()
	seen := map[int]model.ExecutorState{}
	etag := ""
	for a.ctx.Err() == nil {
		resp, err := a.c.do(a.ctx, api.V1WatchApp.Method, api.V1WatchApp.Path(a.id), nil, http.Header{"If-None-Match": {etag}}, 0)
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			a.stopWatch(fmt.Errorf("watch app %s: %w", a.id, err))
			return
		}
		if err != nil {
			continue // ErrNoMaster: ctx ended, or keep trying
		}
		var s api.AppStatus
		if err := json.Unmarshal(resp.Body, &s); err != nil || s.App == nil {
			a.stopWatch(fmt.Errorf("watch app %s: bad answer from %s: %v", a.id, resp.From, err))
			return
		}
		etag = resp.Header.Get("ETag")
		a.mu.Lock()
		a.status = s
		for _, e := range s.Executors {
			a.pending = append(a.pending, changes(seen[e.ID], *e)...)
			seen[e.ID] = e.State
		}
		a.mu.Unlock()
		select {
		case a.wake <- struct{}{}:
		default:
		}
		if s.State.Terminal() {
			return
		}
	}
}

// changes returns the events that take an executor from state was ("" if
// never seen) to e.State.
func changes(was model.ExecutorState, e model.Executor) []ExecutorEvent {
	if was == e.State {
		return nil
	}
	var out []ExecutorEvent
	if was == "" {
		out = append(out, ExecutorEvent{ExecutorAdded, e})
	}
	if e.State == model.ExecRunning || (e.StartedAt != 0 && was != model.ExecRunning && e.State.Terminal()) {
		out = append(out, ExecutorEvent{ExecutorRunning, e})
	}
	switch {
	case e.State == model.ExecLost:
		out = append(out, ExecutorEvent{ExecutorLost, e})
	case e.State.Terminal():
		out = append(out, ExecutorEvent{ExecutorExited, e})
	}
	return out
}

// deliver hands queued events to the Events channel, so a slow reader
// never holds up the watch.
func (a *App) deliver() {
	defer a.wg.Done()
	defer close(a.events)
	for {
		a.mu.Lock()
		batch := a.pending
		a.pending = nil
		a.mu.Unlock()
		for _, ev := range batch {
			select {
			case a.events <- ev:
			case <-a.closed:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-a.wake:
		case <-a.closed:
			return
		case <-a.done:
			a.mu.Lock()
			n := len(a.pending)
			a.mu.Unlock()
			if n == 0 {
				return
			}
		}
	}
}

// Apps returns every app in the tables with its executors (linearizable
// reads, a page at a time: ListApps).
func (c *Client) Apps(ctx context.Context) ([]api.AppStatus, error) {
	out := []api.AppStatus{}
	err := c.ListApps(ctx, api.ListQuery{}, func(page []api.AppStatus) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// ListApps is ListDrivers for apps: each gets the apps q keeps, with
// their executors, a page at a time.
func (c *Client) ListApps(ctx context.Context, q api.ListQuery, each func([]api.AppStatus) error) error {
	return listPages(ctx, c, api.PathApps, q, func(p api.AppPage) ([]api.AppStatus, string) { return p.Apps, p.Next }, each)
}

// AppStatus returns one app with its executors (linearizable read). An
// id that is not an app ID is an error wrapping api.ErrInvalidRequest, and no
// request is made.
func (c *Client) AppStatus(ctx context.Context, id string) (api.AppStatus, error) {
	var out api.AppStatus
	p, err := appPath(api.V1App.Route, id)
	if err != nil {
		return out, err
	}
	err = call(ctx, c, api.V1App, p, api.NoBody{}, &out)
	return out, err
}

// KillApp ends an app KILLED and kills its executors; killing a killed app
// again succeeds. An id that is not an app ID is refused as AppStatus
// refuses it.
func (c *Client) KillApp(ctx context.Context, id string) error {
	p, err := appPath(api.V1KillApp.Route, id)
	if err != nil {
		return err
	}
	return call(ctx, c, api.V1KillApp, p, api.NoBody{}, nil)
}
