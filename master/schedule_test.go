package master

import (
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
)

func worker(id string, cores int, mem int64, state fsm.WorkerState) *fsm.Worker {
	return &fsm.Worker{ID: id, Cores: cores, MemoryMB: mem, State: state}
}

func waiting(id string, cores int, mem int64) *fsm.Driver {
	return &fsm.Driver{ID: id, Cores: cores, MemoryMB: mem, State: fsm.DriverSubmitted, Attempt: 1}
}

func TestPlanSpreadsAndRespectsResources(t *testing.T) {
	ws := []*fsm.Worker{
		worker("w1", 4, 4096, fsm.WorkerAlive),
		worker("w2", 4, 4096, fsm.WorkerAlive),
		worker("w3", 64, 65536, fsm.WorkerDead),
	}
	ds := []*fsm.Driver{
		waiting("d1", 2, 1024), waiting("d2", 2, 1024), waiting("big", 8, 1024),
		waiting("d3", 2, 1024), waiting("d4", 2, 1024), waiting("d5", 1, 512),
	}
	ps := plan(ds, ws)
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

func TestExplainWaiting(t *testing.T) {
	ws := []*fsm.Worker{worker("w1", 4, 4096, fsm.WorkerAlive), worker("w2", 64, 1<<20, fsm.WorkerDead)}
	ds := explainWaiting([]*fsm.Driver{waiting("huge", 100, 1024), waiting("ok", 1, 512)}, ws)
	if !strings.Contains(ds[0].Message, api.ReasonUnplaceable) || !strings.Contains(ds[0].Message, "4 cores") {
		t.Errorf("huge: %q", ds[0].Message)
	}
	if strings.Contains(ds[1].Message, api.ReasonUnplaceable) {
		t.Errorf("ok: %q", ds[1].Message)
	}
	if ds := explainWaiting([]*fsm.Driver{waiting("x", 1, 1)}, nil); ds[0].Message != "waiting: no ALIVE worker" {
		t.Errorf("no workers: %q", ds[0].Message)
	}
}
