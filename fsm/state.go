package fsm

import (
	"crypto/subtle"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/drover-project/drover/model"
)

// State is the replicated tables (workers, drivers, waitingDrivers, apps,
// executors, the submission-token indexes and the sequence numbers) and
// the queries on them, which return model rows (Nomad's nomad/state,
// Consul's state store). Only the FSM changes the tables, in Apply and
// Restore; everyone else reads them through its State. All methods are
// safe for concurrent use. Readers get the driver and app rows
// themselves, which no entry changes once applied (FSM.ownDriver,
// ownApp), and must not change them; worker and executor rows, which
// Apply changes in place, they get copies of.
type State struct {
	mu sync.RWMutex
	t  tables
}

// WorkerChanged returns a channel that is closed at the next change of
// what the worker should run (a driver attempt or an executor placed on it
// or taken off it), or at the next Restore.
func (s *State) WorkerChanged(worker string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.units(worker).change
}

// Driver returns one driver's row, or false if it is unknown. The row is
// the table's own, which no entry changes (ownDriver): the caller must not
// change it either, and copies it (Driver.Clone) to make a changed one.
func (s *State) Driver(id string) (*model.Driver, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.t.Drivers[id]
	return d, ok
}

// Drivers returns every driver's row, ordered by ID (which orders them by
// submission time, then sequence). The rows are the table's own, as
// Driver's are: a read of the table costs a slice, not a copy of every
// program.
func (s *State) Drivers() []*model.Driver {
	s.mu.RLock()
	out := make([]*model.Driver, 0, len(s.t.Drivers))
	for _, d := range s.t.Drivers {
		out = append(out, d)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *model.Driver) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// WaitingDrivers returns the rows of the drivers in waitingDrivers, in
// queue order; the table's own, as Driver's are.
func (s *State) WaitingDrivers() []*model.Driver {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*model.Driver, 0, len(s.t.WaitingDrivers))
	for _, id := range s.t.WaitingDrivers {
		out = append(out, s.t.Drivers[id])
	}
	return out
}

// Demand is what the scheduler needs of one waiting driver: which attempt
// to place, its cores, memory (MiB) and custom resources, and the worker
// to avoid when another has room: the worker of the attempt before, when
// that attempt was rescheduled after failing there RescheduleAfter times
// in a row; "" for none.
//
// Namespace is the driver's namespace (DefaultNamespace for none) and
// Priority its priority, the namespace's default (Namespace.Priority)
// where it asked for none; 0 for a namespace since deleted. AppCores is
// the driver's DriverSpec.AppCores: what its app will ask for, 0 when
// unknown.
type Demand struct {
	DriverID  string
	Attempt   int
	Cores     int
	MemoryMB  int64
	Resources model.ResourceAmounts
	Avoid     string
	Namespace string
	Priority  int
	AppCores  int
}

// WaitingDemands returns the demands of the drivers in waitingDrivers, in
// queue order: the scheduler's input, without copying whole rows.
func (s *State) WaitingDemands() []Demand {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Demand, len(s.t.WaitingDrivers))
	nss := map[string]*model.Namespace{}
	for i, id := range s.t.WaitingDrivers {
		d := s.t.Drivers[id]
		out[i] = Demand{DriverID: id, Attempt: d.Attempt, Cores: d.Cores, MemoryMB: d.MemoryMB, Resources: maps.Clone(d.Resources),
			Namespace: model.NamespaceOf(d.Namespace), AppCores: d.AppCores}
		n, ok := nss[d.Namespace]
		if !ok {
			n = s.t.namespace(d.Namespace)
			nss[d.Namespace] = n
		}
		if n != nil {
			out[i].Priority = n.Priority(d.Priority)
		}
		if prev := d.AttemptRecord(d.Attempt - 1); prev != nil && prev.Rescheduled {
			out[i].Avoid = prev.WorkerID
		}
	}
	return out
}

// Worker returns a copy of one worker, or false if it is unknown.
func (s *State) Worker(id string) (*model.Worker, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.t.Workers[id]
	if !ok {
		return nil, false
	}
	return w.View(), true
}

// IsInstance reports whether worker id is registered by the process whose
// instance (model.Worker.Instance) is instance: false for an unknown
// worker. It is the one way out of the FSM for the instance, which no
// copy of a row carries (model.Worker.View), and it compares in constant
// time, as for any secret.
func (s *State) IsInstance(id, instance string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.t.Workers[id]
	return ok && subtle.ConstantTimeCompare([]byte(w.Instance), []byte(instance)) == 1
}

// Workers returns copies of all workers, ordered by ID, without their
// instances (model.Worker.View).
func (s *State) Workers() []*model.Worker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*model.Worker, 0, len(s.t.Workers))
	for _, w := range s.t.Workers {
		out = append(out, w.View())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AttemptsOn returns the current attempt of every unfinished driver placed
// on the worker, ordered by driver ID: the attempts it should run, named
// only, for a held heartbeat that compares them with what the worker runs
// on every change without copying a row.
func (s *State) AttemptsOn(workerID string) []model.AttemptRef {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []model.AttemptRef
	if u, ok := s.t.on[workerID]; ok {
		out = make([]model.AttemptRef, 0, len(u.drivers))
		for id := range u.drivers {
			out = append(out, model.AttemptRef{DriverID: id, Attempt: s.t.Drivers[id].Attempt})
		}
	}
	slices.SortFunc(out, func(a, b model.AttemptRef) int { return strings.Compare(a.DriverID, b.DriverID) })
	return out
}

// DriversOn returns the drivers whose attempts AttemptsOn names, in the
// same order: the rows of those whose current attempt known does not name
// in full, the others as refs in kept. The rows are the table's own, as
// Driver's are: a heartbeat answer built from them costs its encoding,
// not a deep copy of every driver on the worker.
func (s *State) DriversOn(workerID string, known []model.AttemptRef) (full []*model.Driver, kept []model.AttemptRef) {
	has := make(map[model.AttemptRef]bool, len(known))
	for _, k := range known {
		has[k] = true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if u, ok := s.t.on[workerID]; ok {
		for id := range u.drivers {
			d := s.t.Drivers[id]
			if ref := (model.AttemptRef{DriverID: id, Attempt: d.Attempt}); has[ref] {
				kept = append(kept, ref)
				continue
			}
			full = append(full, d)
		}
	}
	slices.SortFunc(full, func(a, b *model.Driver) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(kept, func(a, b model.AttemptRef) int { return strings.Compare(a.DriverID, b.DriverID) })
	return full, kept
}

// DriverByToken returns the ID of the driver made for a submission token.
func (s *State) DriverByToken(token string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.t.Tokens[token]
	return id, ok
}

// NextDriverSeq is the next free driver sequence number.
func (s *State) NextDriverSeq() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.t.NextDriverSeq
}

// StateHash returns a digest of all tables, equal on two masters exactly when
// their tables are equal.
func (s *State) StateHash() (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return hashTables(&s.t)
}

// App returns one app's row with copies of its executors in ID order, or
// false if the app is unknown. The app's row is the table's own, which no
// entry changes (ownApp): the caller must not change it either.
func (s *State) App(id string) (*model.App, []*model.Executor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.t.Apps[id]
	if !ok {
		return nil, nil, false
	}
	return a, s.t.executorClones(id), true
}

// Apps returns every app's row ordered by ID (so by registration time,
// then sequence: the order Spark's waitingApps keeps), each with copies of
// its executors. The rows are the table's own, as App's are.
func (s *State) Apps() ([]*model.App, [][]*model.Executor) { return s.apps(false) }

// LiveApps is Apps without the finished ones: what the scheduler and the
// app liveness watch need on every change, without copying the retained
// history.
func (s *State) LiveApps() ([]*model.App, [][]*model.Executor) { return s.apps(true) }

func (s *State) apps(liveOnly bool) ([]*model.App, [][]*model.Executor) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var apps []*model.App
	var execs [][]*model.Executor
	for _, id := range s.t.appIDs() {
		if a := s.t.Apps[id]; !liveOnly || !a.State.Terminal() {
			apps = append(apps, a)
			execs = append(execs, s.t.executorClones(id))
		}
	}
	return apps, execs
}

// ExecutorsOn returns copies of the live executors placed on the worker,
// each with its app's row (the table's own, as App's is): the set the
// worker should be running.
func (s *State) ExecutorsOn(workerID string) ([]*model.Executor, []*model.App) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var es []*model.Executor
	if u, ok := s.t.on[workerID]; ok {
		for key := range u.executors {
			es = append(es, s.t.Executors[key].Clone())
		}
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].AppID != es[j].AppID {
			return es[i].AppID < es[j].AppID
		}
		return es[i].ID < es[j].ID
	})
	apps := make([]*model.App, len(es))
	for i, e := range es {
		apps[i] = s.t.Apps[e.AppID]
	}
	return es, apps
}

// AppByToken returns the ID of the app registered with a token.
func (s *State) AppByToken(token string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.t.AppTokens[token]
	return id, ok
}

// NextAppSeq is the next free app sequence number.
func (s *State) NextAppSeq() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.t.NextAppSeq
}

// Completed returns the IDs of finished drivers and finished apps, each
// list oldest first (by the time they ended, then ID), for retention.
func (s *State) Completed() (drivers, apps []string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	type ended struct {
		id string
		at int64
	}
	byAge := func(es []ended) []string {
		sort.Slice(es, func(i, j int) bool {
			if es[i].at != es[j].at {
				return es[i].at < es[j].at
			}
			return es[i].id < es[j].id
		})
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.id
		}
		return out
	}
	var ds, as []ended
	for id, d := range s.t.Drivers {
		if d.State.Terminal() {
			ds = append(ds, ended{id, d.UpdatedAt})
		}
	}
	for id, a := range s.t.Apps {
		if a.State.Terminal() {
			as = append(as, ended{id, a.EndedAt})
		}
	}
	return byAge(ds), byAge(as)
}

// Census is the number of rows of each table by state, and the length of
// waitingDrivers. Finished rows count only while retention keeps them.
type Census struct {
	Drivers   map[model.DriverState]int
	Apps      map[model.ApplicationState]int
	Executors map[model.ExecutorState]int
	Workers   map[model.WorkerState]int
	Waiting   int
}

// Census counts the rows of every table by state, for metrics. It walks
// the maps under the read lock without copying a row, so a scrape every
// few seconds costs a pass over the tables rather than a copy of every
// driver with its argv, environment and attempts.
func (s *State) Census() Census {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := Census{
		Drivers:   map[model.DriverState]int{},
		Apps:      map[model.ApplicationState]int{},
		Executors: map[model.ExecutorState]int{},
		Workers:   map[model.WorkerState]int{},
		Waiting:   len(s.t.WaitingDrivers),
	}
	for _, d := range s.t.Drivers {
		c.Drivers[d.State]++
	}
	for _, a := range s.t.Apps {
		c.Apps[a.State]++
	}
	for _, e := range s.t.Executors {
		c.Executors[e.State]++
	}
	for _, w := range s.t.Workers {
		c.Workers[w.State]++
	}
	return c
}

// QueuedAt returns when an attempt of a driver began to wait for a
// placement, in Unix milliseconds of the leaders' clocks: the submission
// for the first attempt, the end of the attempt before it for a relaunch
// (Apply stamps it when it relaunches). It is false when the driver, or
// that attempt's record, is gone. Reading one attempt by number, rather
// than the current one, keeps the answer right when the driver has moved
// on since its placement.
func (s *State) QueuedAt(driverID string, attempt int) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.t.Drivers[driverID]
	if !ok || attempt < 1 {
		return 0, false
	}
	if attempt == 1 {
		return d.SubmittedAt, true
	}
	rec := d.AttemptRecord(attempt - 1)
	if rec == nil || rec.EndedAt == 0 {
		return 0, false
	}
	return rec.EndedAt, true
}
