package leader

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

func worker(id string, cores int, mem int64, state model.WorkerState) *model.Worker {
	return &model.Worker{ID: id, Cores: cores, MemoryMB: mem, State: state}
}

func waiting(id string, cores int, mem int64) *model.Driver {
	return &model.Driver{ID: id, DriverSpec: model.DriverSpec{Cores: cores, MemoryMB: mem}, State: model.DriverSubmitted, Attempt: 1}
}

func demands(ds ...*model.Driver) []fsm.Demand {
	out := make([]fsm.Demand, len(ds))
	for i, d := range ds {
		out[i] = fsm.Demand{DriverID: d.ID, Attempt: d.Attempt, Cores: d.Cores, MemoryMB: d.MemoryMB}
	}
	return out
}

func TestPlanSpreadsAndRespectsResources(t *testing.T) {
	ws := []*model.Worker{
		worker("w1", 4, 4096, model.WorkerAlive),
		worker("w2", 4, 4096, model.WorkerAlive),
		worker("w3", 64, 65536, model.WorkerDead),
	}
	ds := []*model.Driver{
		waiting("d1", 2, 1024), waiting("d2", 2, 1024), waiting("big", 8, 1024),
		waiting("d3", 2, 1024), waiting("d4", 2, 1024), waiting("d5", 1, 512),
	}
	ps := plan(demands(ds...), ws, nil)
	got := map[string]string{}
	for _, p := range ps {
		got[p.DriverID] = p.WorkerID
	}
	if got["d1"] == got["d2"] {
		t.Errorf("d1 and d2 both on %s: placement should spread", got["d1"])
	}
	if _, ok := got["big"]; ok {
		t.Error("an 8-core driver was placed on 4-core workers")
	}
	if len(got) != 4 || got["d5"] != "" {
		t.Errorf("placements %v: want d1-d4 placed and d5 left waiting (all cores used)", got)
	}
	for _, w := range got {
		if w == "w3" {
			t.Error("a driver was placed on a DEAD worker")
		}
	}
}

// The most free cores and the most free memory on different workers: a
// driver that needs more than either worker alone offers waits (it used to
// crash the leader's scheduler), and the next one is still placed.
func TestPlanSkipsDriverThatFitsNoSingleWorker(t *testing.T) {
	ws := []*model.Worker{
		worker("cores", 8, 256, model.WorkerAlive),
		worker("memory", 1, 8192, model.WorkerAlive),
	}
	ps := plan(demands(waiting("both", 2, 1024), waiting("small", 1, 128)), ws, nil)
	if len(ps) != 1 || ps[0].DriverID != "small" {
		t.Fatalf("placements %+v: want only small placed", ps)
	}
}

func app(id string, maxCores, cpe int, mem int64, limit int) *model.App {
	return &model.App{ID: id, ExecutorSpec: model.ExecutorSpec{MaxCores: maxCores, CoresPerExecutor: cpe, MemoryPerExecutorMB: mem, ExecutorLimit: limit},
		State: model.AppWaiting}
}

// perWorker counts planned executors per worker for one app.
func perWorker(ps []model.ExecutorPlacement, appID string) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		if p.AppID == appID {
			out[p.WorkerID]++
		}
	}
	return out
}

func threeWorkers() []*model.Worker {
	return []*model.Worker{
		worker("w1", 4, 4096, model.WorkerAlive),
		worker("w2", 4, 4096, model.WorkerAlive),
		worker("w3", 4, 4096, model.WorkerAlive),
	}
}

func TestPlanExecutorsSpreadOutVersusConsolidate(t *testing.T) {
	a := app("app-20261129120000-0000", 6, 1, 512, -1)
	spread := perWorker(planExecutors([]*model.App{a}, [][]*model.Executor{nil}, threeWorkers(), true, 0, nil), a.ID)
	if len(spread) != 3 || spread["w1"] != 2 || spread["w2"] != 2 || spread["w3"] != 2 {
		t.Errorf("spread out: %v, want 2 executors on each of 3 workers", spread)
	}
	packed := perWorker(planExecutors([]*model.App{a}, [][]*model.Executor{nil}, threeWorkers(), false, 0, nil), a.ID)
	if len(packed) != 2 || packed["w1"]+packed["w2"]+packed["w3"] != 6 || max(packed["w1"], packed["w2"], packed["w3"]) != 4 {
		t.Errorf("consolidated: %v, want one worker full (4) and the other 2 on a second", packed)
	}
}

func TestPlanExecutorsCapsAndIDs(t *testing.T) {
	t.Run("max cores", func(t *testing.T) {
		a := app("app-20261129120000-0000", 5, 2, 512, -1)
		ps := planExecutors([]*model.App{a}, [][]*model.Executor{nil}, threeWorkers(), true, 0, nil)
		if len(ps) != 2 {
			t.Fatalf("placements %v: max 5 cores at 2 per executor allows 2", ps)
		}
		if ps[0].ExecutorID != 0 || ps[1].ExecutorID != 1 {
			t.Errorf("executor IDs %d, %d: want 0, 1", ps[0].ExecutorID, ps[1].ExecutorID)
		}
	})
	t.Run("executor limit counts live executors", func(t *testing.T) {
		a := app("app-20261129120000-0000", 0, 1, 512, 3)
		a.NextExecutorID = 2
		live := []*model.Executor{{ID: 0, State: model.ExecFailed}, {ID: 1, State: model.ExecRunning}}
		ps := planExecutors([]*model.App{a}, [][]*model.Executor{live}, threeWorkers(), true, 1_000_000, nil)
		if len(ps) != 2 || ps[0].ExecutorID != 2 || ps[1].ExecutorID != 3 {
			t.Errorf("placements %v: limit 3 with 1 live allows 2 more, IDs from 2", ps)
		}
	})
	t.Run("memory per executor", func(t *testing.T) {
		ws := threeWorkers()
		ws[1].MemoryMB = 8192
		a := app("app-20261129120000-0000", 0, 1, 3000, -1)
		got := perWorker(planExecutors([]*model.App{a}, [][]*model.Executor{nil}, ws, true, 0, nil), a.ID)
		if got["w1"] != 1 || got["w2"] != 2 || got["w3"] != 1 {
			t.Errorf("placements %v: 3000 MiB executors fit once in 4096 MiB and twice in 8192 MiB", got)
		}
	})
	t.Run("unplaceable and finished apps wait, dead workers get nothing", func(t *testing.T) {
		ws := threeWorkers()
		ws[0].State = model.WorkerDead
		big := app("app-20261129120000-0000", 0, 1, 1<<20, -1)
		done := app("app-20261129120000-0001", 0, 1, 512, -1)
		done.State = model.AppFinished
		fifo := app("app-20261129120000-0002", 0, 1, 512, -1)
		ps := planExecutors([]*model.App{big, done, fifo}, make([][]*model.Executor, 3), ws, true, 0, nil)
		got := perWorker(ps, fifo.ID)
		if len(ps) != 8 || got["w2"] != 4 || got["w3"] != 4 {
			t.Errorf("placements %v: want all 8 free cores of w2 and w3 for the third app only", ps)
		}
	})
	t.Run("FIFO: the first app takes what it can", func(t *testing.T) {
		first := app("app-20261129120000-0000", 0, 2, 512, -1)
		second := app("app-20261129120000-0001", 0, 1, 512, -1)
		ps := planExecutors([]*model.App{first, second}, make([][]*model.Executor, 2), threeWorkers(), true, 0, nil)
		if n := len(perWorker(ps, second.ID)); n != 0 || len(ps) != 6 {
			t.Errorf("placements %v: the first app should take all 12 cores in 6 executors", ps)
		}
	})
}

func TestPlanExecutorsWaitsAfterAnExit(t *testing.T) {
	a := app("app-20261129120000-0000", 0, 1, 512, -1)
	a.NextExecutorID = 1
	exited := []*model.Executor{{ID: 0, State: model.ExecExited, EndedAt: 10_000}}
	if ps := planExecutors([]*model.App{a}, [][]*model.Executor{exited}, threeWorkers(), true, 10_500, nil); len(ps) != 0 {
		t.Errorf("placed %v half a second after an executor exited", ps)
	}
	if ps := planExecutors([]*model.App{a}, [][]*model.Executor{exited}, threeWorkers(), true, 11_000, nil); len(ps) == 0 {
		t.Error("placed nothing a second after an executor exited")
	}
	lost := []*model.Executor{{ID: 0, State: model.ExecLost, EndedAt: 10_000}}
	if ps := planExecutors([]*model.App{a}, [][]*model.Executor{lost}, threeWorkers(), true, 10_100, nil); len(ps) == 0 {
		t.Error("a LOST executor's replacement waited")
	}
}

func TestPlanBatchesAndStopsWhenFull(t *testing.T) {
	var ds []*model.Driver
	for i := 0; i < placeBatch+100; i++ {
		ds = append(ds, waiting(fmt.Sprintf("d%d", i), 1, 1))
	}
	big := []*model.Worker{worker("w1", 100000, 1<<30, model.WorkerAlive)}
	if ps := plan(demands(ds...), big, nil); len(ps) != placeBatch {
		t.Errorf("%d placements, want a batch of %d", len(ps), placeBatch)
	}
	full := worker("w1", 4, 4096, model.WorkerAlive)
	full.CoresUsed = 4
	if ps := plan(demands(ds...), []*model.Worker{full}, nil); len(ps) != 0 {
		t.Errorf("placed %d drivers on a full worker", len(ps))
	}
	small := []*model.Worker{worker("w1", 3, 4096, model.WorkerAlive)}
	if ps := plan(demands(waiting("big", 8, 1), waiting("a", 1, 1), waiting("b", 2, 1), waiting("c", 1, 1)), small, nil); len(ps) != 2 ||
		ps[0].DriverID != "a" || ps[1].DriverID != "b" {
		t.Errorf("placements %v: want a and b behind the unplaceable one, then full", ps)
	}
}

// Of equally free workers, the one with the lowest ID takes a driver,
// whatever order the workers come in.
func TestPlanBreaksTiesByWorkerID(t *testing.T) {
	ws := []*model.Worker{worker("w3", 4, 4096, model.WorkerAlive), worker("w1", 4, 4096, model.WorkerAlive), worker("w2", 4, 4096, model.WorkerAlive)}
	ps := plan(demands(waiting("a", 1, 1), waiting("b", 1, 1), waiting("c", 1, 1), waiting("d", 1, 1)), ws, nil)
	var got []string
	for _, p := range ps {
		got = append(got, p.DriverID+"@"+p.WorkerID)
	}
	if want := "a@w1 b@w2 c@w3 d@w1"; strings.Join(got, " ") != want {
		t.Errorf("placements %v, want %s", got, want)
	}
}

// Placements holding many addresses end a batch by their size, long
// before placeBatch, so an entry never nears fsm.MaxCommandSize.
func TestPlanBoundsABatchByItsSize(t *testing.T) {
	addrs := make([]string, model.MaxResourceAddresses)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("%060d", i)
	}
	var ws []*model.Worker
	var ds []fsm.Demand
	for i := range 100 {
		ws = append(ws, gpuWorker(fmt.Sprintf("w%03d", i), addrs...))
		ds = append(ds, fsm.Demand{DriverID: fmt.Sprintf("d%03d", i), Attempt: 1, Cores: 1, MemoryMB: 128,
			Resources: model.ResourceAmounts{"gpu": model.MaxResourceAddresses}})
	}
	ps := plan(ds, ws, nil)
	size := 0
	for _, p := range ps {
		size += placementBytes(p)
	}
	if len(ps) == 0 || len(ps) == len(ds) || size < placeBytes || size-placementBytes(ps[len(ps)-1]) >= placeBytes {
		t.Fatalf("%d placements of %d bytes: want a batch cut by its first placement past %d bytes", len(ps), size, placeBytes)
	}
	enc, err := json.Marshal(model.PlaceDrivers{Placements: ps})
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > size || len(enc) > fsm.MaxCommandSize/2 {
		t.Errorf("the batch encodes to %d bytes: the estimate %d must not fall short, nor the entry near %d", len(enc), size, fsm.MaxCommandSize)
	}
}

func gpuWorker(id string, gpus ...string) *model.Worker {
	w := worker(id, 8, 8192, model.WorkerAlive)
	w.Resources = model.Resources{"gpu": gpus}
	return w
}

// Drivers that ask for GPUs go where free GPUs are, each taking the first
// free addresses; one that asks for more than any worker has free waits,
// and so does one asking for a resource no worker offers.
func TestPlanPlacesByCustomResources(t *testing.T) {
	w1 := gpuWorker("w1", "0", "1")
	w1.ResourcesUsed = model.Resources{"gpu": {"0"}}
	ws := []*model.Worker{w1, worker("w2", 16, 16384, model.WorkerAlive)}
	ask := func(id string, rs model.ResourceAmounts) fsm.Demand {
		return fsm.Demand{DriverID: id, Attempt: 1, Cores: 1, MemoryMB: 128, Resources: rs}
	}
	ps := plan([]fsm.Demand{
		ask("a", model.ResourceAmounts{"gpu": 1}), ask("b", model.ResourceAmounts{"gpu": 1}),
		ask("fpga", model.ResourceAmounts{"fpga": 1}), ask("plain", nil),
	}, ws, nil)
	if len(ps) != 2 || ps[0].DriverID != "a" || ps[0].WorkerID != "w1" || ps[0].Resources.String() != "gpu=1" ||
		ps[1].DriverID != "plain" || ps[1].WorkerID != "w2" || ps[1].Resources != nil {
		t.Fatalf("placements %+v: want a on w1 holding gpu 1 (0 is held), plain on the larger w2, b and fpga waiting", ps)
	}
}

// A rescheduled driver avoids its last worker when another has room, and
// goes back to it when none has.
func TestPlanAvoidsTheReschedulingWorker(t *testing.T) {
	ws := func() []*model.Worker {
		return []*model.Worker{worker("w1", 8, 8192, model.WorkerAlive), worker("w2", 2, 1024, model.WorkerAlive)}
	}
	d := fsm.Demand{DriverID: "d", Attempt: 2, Cores: 1, MemoryMB: 128, Avoid: "w1"}
	if ps := plan([]fsm.Demand{d}, ws(), nil); len(ps) != 1 || ps[0].WorkerID != "w2" {
		t.Fatalf("placements %+v, want d on w2 though w1 has more room", ps)
	}
	d.Cores = 4
	if ps := plan([]fsm.Demand{d}, ws(), nil); len(ps) != 1 || ps[0].WorkerID != "w1" {
		t.Fatalf("placements %+v, want d back on w1, the only worker with room", ps)
	}
}

// Executors that ask for GPUs take distinct addresses and stop when the
// GPUs run out, cores to spare.
func TestPlanExecutorsByCustomResources(t *testing.T) {
	a := app("a", 0, 1, 128, -1)
	a.ResourcesPerExecutor = model.ResourceAmounts{"gpu": 2}
	ps := planExecutors([]*model.App{a}, [][]*model.Executor{nil}, []*model.Worker{gpuWorker("w1", "0", "1", "2", "3", "4")}, true, 0, nil)
	if len(ps) != 2 || ps[0].Resources.String() != "gpu=0,1" || ps[1].Resources.String() != "gpu=2,3" {
		t.Fatalf("placements %+v, want two executors holding gpu 0,1 and 2,3", ps)
	}
}
