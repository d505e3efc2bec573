// Package fsm holds Drover's replicated tables (workers, drivers,
// waitingDrivers and the submission-token index) and the hashicorp/raft FSM
// that changes them. Apply is deterministic: every time, ID and placement
// arrives inside the command, so every master that applies the same log holds
// the same tables.
package fsm

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
)

// Errors returned by Apply, wrapped with the offending ID. Callers map them
// to HTTP status codes with errors.Is.
var (
	ErrUnknownDriver  = errors.New("unknown driver")
	ErrUnknownWorker  = errors.New("unknown worker")
	ErrDriverEnded    = errors.New("driver already ended")
	ErrDuplicateID    = errors.New("duplicate ID")
	ErrInvalidCommand = errors.New("invalid command")
)

// SubmitResult is what Apply returns for a SubmitDriver: the driver's ID and
// whether the token was already known (so no new driver was made).
type SubmitResult struct {
	DriverID string
	Existing bool
}

// PlaceResult lists the placements of a PlaceDrivers command that applied.
type PlaceResult struct {
	Applied []Placement
}

// FSM is the replicated state machine. The zero value is not usable; use New.
// All methods are safe for concurrent use; readers get copies.
type FSM struct {
	mu     sync.RWMutex
	t      tables
	index  uint64 // last applied Raft index
	change chan struct{}
}

// tables is everything a snapshot holds.
type tables struct {
	Workers        map[string]*Worker `json:"workers"`
	Drivers        map[string]*Driver `json:"drivers"`
	WaitingDrivers []string           `json:"waiting_drivers"`
	Tokens         map[string]string  `json:"tokens"`
	// NextDriverSeq is one more than the highest driver sequence number
	// seen, so a new leader continues Spark's driver-<time>-<seq> numbering.
	NextDriverSeq int `json:"next_driver_seq"`
}

func newTables() tables {
	return tables{
		Workers: map[string]*Worker{},
		Drivers: map[string]*Driver{},
		Tokens:  map[string]string{},
	}
}

// New returns an FSM with empty tables.
func New() *FSM {
	return &FSM{t: newTables(), change: make(chan struct{})}
}

// Apply implements raft.FSM. It returns a SubmitResult, PlaceResult, nil, or
// an error; a command that fails validation changes nothing.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	t, payload, err := Decode(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = l.Index
	defer f.notify()
	if err != nil {
		return err
	}
	return f.apply(t, payload)
}

// ApplyCommand decodes and applies one encoded command outside Raft, at the
// given index. Tests and tools use it to replay a log.
func (f *FSM) ApplyCommand(index uint64, data []byte) any {
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
}

func (f *FSM) apply(t CommandType, payload any) any {
	switch t {
	case CmdRegisterWorker:
		return f.applyRegisterWorker(payload.(*RegisterWorker))
	case CmdSubmitDriver:
		return f.applySubmitDriver(payload.(*SubmitDriver))
	case CmdPlaceDrivers:
		return f.applyPlaceDrivers(payload.(*PlaceDrivers))
	case CmdReportAttempts:
		return f.applyReportAttempts(payload.(*ReportAttempts))
	case CmdKillDriver:
		return f.applyKillDriver(payload.(*KillDriver))
	case CmdWorkerLost:
		return f.applyWorkerLost(payload.(*WorkerLost))
	case CmdDecommissionWorker:
		return f.applyDecommissionWorker(payload.(*DecommissionWorker))
	}
	return fmt.Errorf("%w: type %s", ErrInvalidCommand, t)
}

// notify wakes everyone waiting in Changed. Called with f.mu held.
func (f *FSM) notify() {
	close(f.change)
	f.change = make(chan struct{})
}

// Changed returns a channel that is closed at the next Apply or Restore.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.change
}

// Index is the Raft index of the last applied entry.
func (f *FSM) Index() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// Driver returns a copy of one driver, or false if it is unknown.
func (f *FSM) Driver(id string) (*Driver, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.t.Drivers[id]
	if !ok {
		return nil, false
	}
	return d.clone(), true
}

// Drivers returns copies of all drivers, ordered by ID (which orders them by
// submission time, then sequence).
func (f *FSM) Drivers() []*Driver {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Driver, 0, len(f.t.Drivers))
	for _, d := range f.t.Drivers {
		out = append(out, d.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WaitingDrivers returns copies of the drivers in waitingDrivers, in queue
// order.
func (f *FSM) WaitingDrivers() []*Driver {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Driver, 0, len(f.t.WaitingDrivers))
	for _, id := range f.t.WaitingDrivers {
		out = append(out, f.t.Drivers[id].clone())
	}
	return out
}

// Worker returns a copy of one worker, or false if it is unknown.
func (f *FSM) Worker(id string) (*Worker, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.t.Workers[id]
	if !ok {
		return nil, false
	}
	c := *w
	return &c, true
}

// Workers returns copies of all workers, ordered by ID.
func (f *FSM) Workers() []*Worker {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Worker, 0, len(f.t.Workers))
	for _, w := range f.t.Workers {
		c := *w
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DriversOn returns copies of the unfinished drivers whose current attempt is
// placed on the worker: the set the worker should be running.
func (f *FSM) DriversOn(workerID string) []*Driver {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Driver
	for _, d := range f.t.Drivers {
		if d.WorkerID == workerID && !d.State.Terminal() {
			out = append(out, d.clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DriverByToken returns the ID of the driver made for a submission token.
func (f *FSM) DriverByToken(token string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.t.Tokens[token]
	return id, ok
}

// NextDriverSeq is the next free driver sequence number.
func (f *FSM) NextDriverSeq() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.t.NextDriverSeq
}

// Snapshot implements raft.FSM. Raft calls it from the goroutine that calls
// Apply, so encoding here gives a point-in-time copy without blocking
// readers for the write to disk.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := encodeSnapshot(&f.t)
	if err != nil {
		return nil, err
	}
	return &snapshot{data: b}, nil
}

// Restore implements raft.FSM: it replaces every table with the snapshot's.
// On a malformed snapshot it returns an error and keeps the current tables.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = t
	f.notify()
	return nil
}

// StateHash returns a digest of all tables, equal on two masters exactly when
// their tables are equal.
func (f *FSM) StateHash() (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return hashTables(&f.t)
}
