package service

import (
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

func waiting(id string, cores int, mem int64) *model.Driver {
	return &model.Driver{ID: id, DriverSpec: model.DriverSpec{Cores: cores, MemoryMB: mem}, State: model.DriverSubmitted, Attempt: 1}
}

func alive(id string, cores int, mem int64) *model.Worker {
	return &model.Worker{ID: id, Cores: cores, MemoryMB: mem, State: model.WorkerAlive}
}

func TestExplainWaiting(t *testing.T) {
	ws := []*model.Worker{alive("w1", 4, 4096), {ID: "w2", Cores: 64, MemoryMB: 1 << 20, State: model.WorkerDead}}
	ds := explainWaiting([]*model.Driver{waiting("huge", 100, 1024), waiting("ok", 1, 512)}, ws)
	if !strings.Contains(ds[0].Message, api.ReasonUnplaceable) || !strings.Contains(ds[0].Message, "4 cores") {
		t.Errorf("huge: %q", ds[0].Message)
	}
	if strings.Contains(ds[1].Message, api.ReasonUnplaceable) {
		t.Errorf("ok: %q", ds[1].Message)
	}
	if ds := explainWaiting([]*model.Driver{waiting("x", 1, 1)}, nil); ds[0].Message != "waiting: no ALIVE worker" {
		t.Errorf("no workers: %q", ds[0].Message)
	}
}

func TestExplainApp(t *testing.T) {
	ws := []*model.Worker{alive("w1", 4, 4096)}
	s := explainApp(api.AppStatus{App: &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 8192, ExecutorLimit: -1}, State: model.AppWaiting}}, ws)
	if !strings.Contains(s.Message, api.ReasonUnplaceable) || !strings.Contains(s.Message, "8192 MiB per executor") {
		t.Errorf("message %q", s.Message)
	}
	running := api.AppStatus{App: &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 8192, ExecutorLimit: -1}, State: model.AppWaiting},
		Executors: []*model.Executor{{ID: 0, State: model.ExecRunning}}}
	if s := explainApp(running, ws); s.Message != "" {
		t.Errorf("an app with a live executor got %q", s.Message)
	}
}

// A resource no ALIVE worker offers enough of makes a driver unplaceable,
// as too many cores do; one whose addresses are held waits for them.
func TestExplainWaitingForResources(t *testing.T) {
	w := alive("w1", 4, 4096)
	w.Resources = model.Resources{"gpu": {"0", "1"}}
	w.ResourcesUsed = model.Resources{"gpu": {"0", "1"}}
	ask := func(rs model.ResourceAmounts) *model.Driver { d := waiting("d", 1, 1); d.Resources = rs; return d }
	ds := explainWaiting([]*model.Driver{ask(model.ResourceAmounts{"gpu": 3}), ask(model.ResourceAmounts{"tpu": 1}), ask(model.ResourceAmounts{"gpu": 1})}, []*model.Worker{w})
	if m := ds[0].Message; !strings.Contains(m, api.ReasonUnplaceable) || !strings.Contains(m, "gpu=3") || !strings.Contains(m, "4 cores, 4096 MiB, gpu=2") {
		t.Errorf("gpu=3: %q", m)
	}
	if m := ds[1].Message; !strings.Contains(m, api.ReasonUnplaceable) || !strings.Contains(m, "tpu=0") {
		t.Errorf("tpu=1: %q", m)
	}
	if m := ds[2].Message; m != waitReasonFree {
		t.Errorf("gpu=1 with both held: %q, want %q", m, waitReasonFree)
	}
}

// The reasons are the answer's, never the tables': the rows a read is
// given are the tables' own (fsm.State.Drivers, App), so a waiting driver
// or app gets a copy with its message, which shares the program, and the
// row it came from keeps its own message.
func TestExplainLeavesTheRowsAlone(t *testing.T) {
	d := waiting("d", 100, 1)
	d.Env = map[string]string{"K": "v"}
	ds := explainWaiting([]*model.Driver{d}, []*model.Worker{alive("w1", 4, 4096)})
	if d.Message != "" || ds[0] == d || ds[0].Message == "" || ds[0].Env["K"] != "v" {
		t.Fatalf("explaining a waiting driver: row message %q, answer %+v", d.Message, ds[0])
	}
	a := &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 100, MemoryPerExecutorMB: 1, ExecutorLimit: -1}, State: model.AppWaiting}
	s := explainApp(api.AppStatus{App: a}, []*model.Worker{alive("w1", 4, 4096)})
	if a.Message != "" || s.App == a || s.Message == "" {
		t.Fatalf("explaining a waiting app: row message %q, answer %+v", a.Message, s.App)
	}
}
