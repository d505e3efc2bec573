package service

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// fakeRaft stands for Core.Apply: it records each command it is given,
// encoded as Raft would take it, and lets the test hold the first one.
type fakeRaft struct {
	mu       sync.Mutex
	commands []model.CommandType
	batches  [][]string // the workers of each command, in order
	hold     chan struct{}
	held     chan struct{}
	err      error
}

func (f *fakeRaft) apply(payload model.Command) (any, error) {
	if _, err := fsm.Encode(payload); err != nil {
		return nil, err
	}
	f.mu.Lock()
	first := len(f.commands) == 0
	f.commands = append(f.commands, payload.CommandType())
	var workers []string
	switch p := payload.(type) {
	case *model.ReportAttempts:
		workers = []string{p.WorkerID}
	case *model.ReportBatch:
		for _, r := range p.Reports {
			workers = append(workers, r.WorkerID)
		}
	}
	f.batches = append(f.batches, workers)
	f.mu.Unlock()
	if first && f.hold != nil {
		close(f.held)
		<-f.hold
	}
	return nil, f.err
}

// queued is how many reports wait for the commit in flight.
func (b *reportBatcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Reports that arrive while one commits go together in one ReportBatch,
// each in its arrival order with its own worker, and every caller returns
// once its own reports are committed.
func TestReportsArrivingDuringACommitShareOneEntry(t *testing.T) {
	f := &fakeRaft{hold: make(chan struct{}), held: make(chan struct{})}
	b := &reportBatcher{apply: f.apply}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	wg.Go(func() { errs[0] = b.commit(model.ReportAttempts{WorkerID: "w0"}) })
	<-f.held
	for i := 1; i < len(errs); i++ {
		// One at a time, so the queue's order is known.
		wg.Go(func() { errs[i] = b.commit(model.ReportAttempts{WorkerID: fmt.Sprintf("w%d", i)}) })
		for b.queued() < i {
			runtime.Gosched()
		}
	}
	close(f.hold)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("w%d: %v", i, err)
		}
	}
	want := [][]string{{"w0"}, {"w1", "w2", "w3", "w4", "w5"}}
	if !slices.Equal(f.commands, []model.CommandType{model.CmdReportAttempts, model.CmdReportBatch}) ||
		!slices.EqualFunc(f.batches, want, slices.Equal) {
		t.Fatalf("commands %v of workers %v, want ReportAttempts then one ReportBatch of %v", f.commands, f.batches, want)
	}
}

// A failed commit fails every heartbeat whose reports it carried, so each
// worker resends them.
func TestAFailedBatchFailsEachOfItsReports(t *testing.T) {
	unavailable := errors.New("not committed")
	f := &fakeRaft{hold: make(chan struct{}), held: make(chan struct{}), err: unavailable}
	b := &reportBatcher{apply: f.apply}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = b.commit(model.ReportAttempts{WorkerID: fmt.Sprintf("w%d", i)}) })
		if i == 0 {
			<-f.held
		}
	}
	for b.queued() < len(errs)-1 {
		runtime.Gosched()
	}
	close(f.hold)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, unavailable) {
			t.Fatalf("w%d: %v, want the commit's error", i, err)
		}
	}
}

// A batch too large for one entry is split until each part fits, and no
// worker's reports are refused for it.
func TestAnOversizedBatchIsSplit(t *testing.T) {
	f := &fakeRaft{hold: make(chan struct{}), held: make(chan struct{})}
	b := &reportBatcher{apply: f.apply}
	// Four workers' reports of some 30% of an entry each (about 1.1 KB
	// a report): all four are too large together, two fit.
	reason := strings.Repeat("x", 1000)
	big := make([]model.AttemptReport, fsm.MaxCommandSize*3/10/1100)
	for i := range big {
		big[i] = model.AttemptReport{DriverID: "driver-20261129120000-0001", Attempt: 1, State: model.DriverFailed, Reason: reason}
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	wg.Go(func() { errs[0] = b.commit(model.ReportAttempts{WorkerID: "w0"}) })
	<-f.held
	for i := 1; i < len(errs); i++ {
		wg.Go(func() { errs[i] = b.commit(model.ReportAttempts{WorkerID: fmt.Sprintf("w%d", i), Reports: big}) })
		for b.queued() < i {
			runtime.Gosched()
		}
	}
	close(f.hold)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("w%d: %v", i, err)
		}
	}
	want := [][]string{{"w0"}, {"w1", "w2"}, {"w3", "w4"}}
	if !slices.EqualFunc(f.batches, want, slices.Equal) {
		t.Fatalf("committed batches %v, want %v", f.batches, want)
	}
}
