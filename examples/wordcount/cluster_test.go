package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain doubles as the executor program of the subprocess tests: the
// driver under test runs os.Executable(), which is this test binary.
func TestMain(m *testing.M) {
	if os.Getenv("WORDCOUNT_TEST_EXECUTOR") == "1" {
		os.Exit(run(context.Background(), os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// goCluster runs executors as goroutines of the test. With manual set,
// launch only reports the driver's URL on launched, and the test starts
// the executors with startAll once it has set the stage.
type goCluster struct {
	n, slots int
	manual   bool
	launched chan string
	evs      chan execEvent // unbuffered: a send returns once the driver has it
	doneCh   chan struct{}
	finished chan error
	stop     chan struct{}
	logf     func(string, ...any)

	mu      sync.Mutex
	url     string
	cancels map[int]context.CancelFunc
	ended   bool
	wg      sync.WaitGroup
}

func newGoCluster(t testing.TB, n, slots int, manual bool) *goCluster {
	return &goCluster{
		n: n, slots: slots, manual: manual,
		launched: make(chan string, 1),
		evs:      make(chan execEvent),
		doneCh:   make(chan struct{}),
		finished: make(chan error, 1),
		stop:     make(chan struct{}),
		logf:     t.Logf,
		cancels:  map[int]context.CancelFunc{},
	}
}

func (c *goCluster) launch(ctx context.Context, spec appSpec) error {
	c.mu.Lock()
	c.url = spec.Env[envDriver]
	c.mu.Unlock()
	c.launched <- c.url
	if !c.manual {
		c.startAll()
	}
	return nil
}

func (c *goCluster) startAll() {
	for id := range c.n {
		c.start(id)
	}
}

// start runs executor id; when it returns, the cluster reports it EXITED,
// or KILLED if kill stopped it, as Drover would.
func (c *goCluster) start(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancels[id] = cancel
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg := executorConfig{
		Driver: c.url, ID: id, Slots: c.slots, Patience: 5 * time.Second,
		HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		Logf: c.logf,
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer tr.CloseIdleConnections()
		err := runExecutor(ctx, cfg)
		ev := execEvent{Executor: id, Ended: true, State: "EXITED"}
		if ctx.Err() != nil {
			ev.State = "KILLED"
		}
		if err != nil {
			ev.State, ev.Message = "FAILED", err.Error()
		}
		cancel()
		select {
		case c.evs <- ev:
		case <-c.stop:
		}
	}()
}

// kill stops executor id at once, as a SIGKILL would: whatever it holds
// is never reported.
func (c *goCluster) kill(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.cancels[id]; ok {
		cancel()
	}
}

func (c *goCluster) events() <-chan execEvent { return c.evs }
func (c *goCluster) done() <-chan struct{}    { return c.doneCh }
func (c *goCluster) why() string              { return "ended by the test" }

// finish ends the application: its executors are killed, as Drover does.
func (c *goCluster) finish(ctx context.Context, err error) error {
	c.finished <- err
	c.end()
	return nil
}

func (c *goCluster) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	for _, cancel := range c.cancels {
		cancel()
	}
	close(c.doneCh)
}

func (c *goCluster) close() {
	c.end()
	close(c.stop)
	c.wg.Wait()
}

// procCluster runs executors as subprocesses: this test binary in the
// executor role (see TestMain), with the environment a Drover worker gives.
type procCluster struct {
	n, cores int
	evs      chan execEvent
	doneCh   chan struct{}
	stop     chan struct{}
	t        *testing.T

	mu    sync.Mutex
	procs map[int]*exec.Cmd
	ended bool
	wg    sync.WaitGroup
}

func newProcCluster(t *testing.T, n, cores int) *procCluster {
	return &procCluster{
		n: n, cores: cores, t: t,
		evs:    make(chan execEvent),
		doneCh: make(chan struct{}),
		stop:   make(chan struct{}),
		procs:  map[int]*exec.Cmd{},
	}
}

func (c *procCluster) launch(ctx context.Context, spec appSpec) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.n {
		cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
		cmd.Env = append(os.Environ(), "WORDCOUNT_TEST_EXECUTOR=1",
			"DROVER_EXECUTOR_ID="+strconv.Itoa(id), "DROVER_EXECUTOR_CORES="+strconv.Itoa(c.cores))
		for k, v := range spec.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		c.procs[id] = cmd
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			err := cmd.Wait()
			ev := execEvent{Executor: id, Ended: true, State: "EXITED"}
			if err != nil {
				ev.State, ev.Message = "FAILED", err.Error()
			}
			if s := stderr.String(); s != "" {
				c.t.Logf("executor %d stderr: %s", id, s)
			}
			select {
			case c.evs <- ev:
			case <-c.stop:
			}
		}()
	}
	return nil
}

// kill sends SIGKILL to executor id: it never reports what it holds.
func (c *procCluster) kill(id int) {
	c.mu.Lock()
	cmd := c.procs[id]
	c.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		panic(fmt.Sprintf("kill executor %d: %v", id, err))
	}
}

func (c *procCluster) events() <-chan execEvent { return c.evs }
func (c *procCluster) done() <-chan struct{}    { return c.doneCh }
func (c *procCluster) why() string              { return "ended by the test" }

func (c *procCluster) finish(ctx context.Context, err error) error {
	c.end()
	return nil
}

func (c *procCluster) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	for _, cmd := range c.procs {
		_ = cmd.Process.Kill() // may have exited already
	}
	close(c.doneCh)
}

func (c *procCluster) close() {
	c.end()
	close(c.stop)
	c.wg.Wait()
}
