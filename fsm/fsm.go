// Package fsm holds Drover's replicated tables (workers, drivers,
// waitingDrivers, apps, executors and the submission-token indexes) and the hashicorp/raft FSM
// that changes them. Apply is deterministic: every time, ID and placement
// arrives inside the command, so every master that applies the same log holds
// the same tables.
package fsm

import (
	"crypto/subtle"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/master/events"
	"github.com/drover-project/drover/model"
)

// SubmitResult is what Apply returns for a SubmitDriver: the driver's ID and
// whether the token was already known (so no new driver was made).
type SubmitResult struct {
	DriverID string
	Existing bool
}

// SubmitDriversResult is what Apply returns for a SubmitDrivers: one
// outcome per submission, in the order of the batch.
type SubmitDriversResult struct {
	Outcomes []SubmitOutcome
}

// SubmitOutcome is what became of one submission of a SubmitDrivers: the
// SubmitResult a SubmitDriver of its own would have returned, or, when
// that SubmitDriver would have been refused, Err, its refusal.
type SubmitOutcome struct {
	SubmitResult
	Err error
}

// PlaceResult lists the placements of a PlaceDrivers command that applied.
type PlaceResult struct {
	Applied []model.Placement
}

// RegisterAppResult is what Apply returns for a RegisterApp: the app's ID
// and whether the token was already known (so no new app was made).
type RegisterAppResult struct {
	AppID    string
	Existing bool
}

// PlaceExecutorsResult lists the placements of a PlaceExecutors command that
// applied.
type PlaceExecutorsResult struct {
	Applied []model.ExecutorPlacement
}

// FSM is the replicated state machine. The zero value is not usable; use New.
// All methods are safe for concurrent use. Readers get the driver and app
// rows themselves, which no entry changes once applied (ownDriver, ownApp),
// and must not change them; worker and executor rows, which Apply changes
// in place, they get copies of.
type FSM struct {
	mu     sync.RWMutex
	t      tables
	index  uint64 // last applied Raft index
	change chan struct{}
	// halted is closed, and err set, when Apply meets an entry it cannot
	// decode; from then on nothing changes the tables.
	halted chan struct{}
	err    error
	// touched is the rows the entry being applied changed; events holds
	// the recent changes for subscribers.
	touched map[rowKey]struct{}
	events  *events.Buffer
	// owned and ownedApps are the driver and app rows the entry being
	// applied made or copied (see ownDriver, ownApp): the only ones it
	// may change in place.
	owned     map[*model.Driver]struct{}
	ownedApps map[*model.App]struct{}
	// intern shares the strings, argvs and environments of the rows
	// (see interner).
	intern interner
}

// tables is everything a snapshot holds.
type tables struct {
	Workers        map[string]*model.Worker `json:"workers"`
	Drivers        map[string]*model.Driver `json:"drivers"`
	WaitingDrivers []string                 `json:"waiting_drivers"`
	Tokens         map[string]string        `json:"tokens"`
	// NextDriverSeq is one more than the highest driver sequence number
	// seen, so a new leader continues Spark's driver-<time>-<seq> numbering.
	NextDriverSeq int                   `json:"next_driver_seq"`
	Apps          map[string]*model.App `json:"apps"`
	// Executors is keyed by ExecutorKey.
	Executors map[string]*model.Executor `json:"executors"`
	// AppTokens maps registration tokens to app IDs, as Tokens does for
	// drivers.
	AppTokens  map[string]string `json:"app_tokens"`
	NextAppSeq int               `json:"next_app_seq"`

	// on indexes, per worker, the unfinished drivers placed there and the
	// live executors (by ExecutorKey), so a worker's desired set costs
	// what is on it rather than a walk of every row. Derived: kept by
	// Apply, rebuilt on Restore, not in snapshots or the state hash.
	on map[string]*workerUnits
	// live is what has not ended (liveRows). Derived like on.
	live liveRows
	// driverIDs is every driver's ID, sorted, so that a page of drivers
	// (DriverPage) starts at its cursor with a binary search and reads
	// only the rows it returns or passes over. Derived like on.
	driverIDs []string
}

// workerUnits is what one worker should run.
type workerUnits struct {
	drivers   map[string]struct{}
	executors map[string]struct{}
	// change is closed, and replaced, whenever the sets change, so a
	// heartbeat held for this worker wakes for its own news only.
	change chan struct{}
}

// units returns the index entry of a worker, creating it.
func (t *tables) units(worker string) *workerUnits {
	u, ok := t.on[worker]
	if !ok {
		u = &workerUnits{drivers: map[string]struct{}{}, executors: map[string]struct{}{}, change: make(chan struct{})}
		t.on[worker] = u
	}
	return u
}

func (u *workerUnits) addDriver(id string)     { u.drivers[id] = struct{}{}; u.touch() }
func (u *workerUnits) removeDriver(id string)  { delete(u.drivers, id); u.touch() }
func (u *workerUnits) addExecutor(k string)    { u.executors[k] = struct{}{}; u.touch() }
func (u *workerUnits) removeExecutor(k string) { delete(u.executors, k); u.touch() }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (u *workerUnits) touch() {
	close(u.change)
	u.change = make(chan struct{})
}

// WorkerChanged returns a channel that is closed at the next change of
// what the worker should run (a driver attempt or an executor placed on it
// or taken off it), or at the next Restore.
func (f *FSM) WorkerChanged(worker string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t.units(worker).change
}

func newTables() tables {
	return tables{
		Workers: map[string]*model.Worker{},
		Drivers: map[string]*model.Driver{},
		Tokens:  map[string]string{},

		Apps:      map[string]*model.App{},
		Executors: map[string]*model.Executor{},
		AppTokens: map[string]string{},
		on:        map[string]*workerUnits{},
		live:      newLiveRows(),
	}
}

// New returns an FSM with empty tables that holds DefaultEventBuffer
// events of at most DefaultEventBufferBytes.
func New() *FSM {
	return NewBuffered(events.Bounds{Events: DefaultEventBuffer, Bytes: DefaultEventBufferBytes})
}

// NewBuffered returns an FSM with empty tables whose buffer of recent
// events for subscribers holds what b allows.
func NewBuffered(b events.Bounds) *FSM {
	return &FSM{t: newTables(), change: make(chan struct{}), halted: make(chan struct{}), events: events.New(b),
		owned: map[*model.Driver]struct{}{}, ownedApps: map[*model.App]struct{}{}}
}

// Apply implements raft.FSM. It returns what the apply function registered
// for the entry's type returns: nil, an error, or for the types of Returns
// (SubmitDriver and the like) their result, which Returns.Commit hands
// back typed. A command that
// fails validation changes nothing but the applied index: every replica
// refuses it alike. An entry of an unknown type flagged with
// IgnoreUnknownTypeFlag is skipped the same way.
//
// An entry that cannot be decoded (see Decode) is never skipped, since a
// replica that skipped what its peers applied would diverge without a
// trace: Apply halts the FSM instead and returns the error that Err returns
// from then on. Every later Apply changes nothing and returns that error,
// so the tables and Index stay those of the last entry before it.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	t, payload, err := Decode(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if err != nil {
		f.err = fmt.Errorf("halted at Raft index %d: cannot decode the entry with %s: %w", l.Index, typeByte(l.Data), err)
		close(f.halted)
		return f.err
	}
	f.index = l.Index
	defer f.notify()
	if payload == nil {
		return nil
	}
	res := registered(t).apply(f, payload)
	f.recount()
	f.publish(l.Index)
	clear(f.owned)
	clear(f.ownedApps)
	return res
}

// ownDriver returns a driver row that the entry being applied may change
// in place: the row of d's ID if the entry made or copied it already,
// otherwise a copy (cloneDriver) that replaces it in the drivers table.
// Once an entry is applied its rows do not change any more: a later entry
// that changes one changes a copy. So the events of an entry, a snapshot
// and readers can hold the rows themselves rather than copies of them: a
// row costs memory twice only while an event holds a version of it that a
// later entry has replaced. Every change to a driver row goes through it.
// Called with f.mu held.
func (f *FSM) ownDriver(d *model.Driver) *model.Driver {
	return own(f.t.Drivers, f.owned, d.ID, cloneDriver)
}

// ownApp is ownDriver for the app with ID id, which must exist. Every
// change to an app row goes through it, and the app's program (argv,
// environment, artifacts, resources per executor) is never changed in
// place, so the copy shares it. Called with f.mu held.
func (f *FSM) ownApp(id string) *model.App {
	return own(f.t.Apps, f.ownedApps, id, func(a *model.App) *model.App {
		c := *a
		return &c
	})
}

// own returns the row of table under id that the entry being applied may
// change in place: the row itself when owned holds it, otherwise a copy
// made by clone, which replaces it in table and joins owned. The ID, not
// a row, names it, so a caller holding a row that an earlier change in
// the same entry replaced gets the copy that change made.
func own[R any](table map[string]*R, owned map[*R]struct{}, id string, clone func(*R) *R) *R {
	r := table[id]
	if _, ok := owned[r]; ok {
		return r
	}
	c := clone(r)
	table[id] = c
	owned[c] = struct{}{}
	return c
}

// typeByte describes the type byte of an entry Decode refused, naming the
// command when the entry's format version and type are known.
func typeByte(b []byte) string {
	if len(b) < 2 {
		return "no type byte"
	}
	s := fmt.Sprintf("type byte 0x%02x", b[1])
	t := model.CommandType(b[1]) &^ IgnoreUnknownTypeFlag
	switch {
	case b[0] != FormatJSON && b[0] != FormatPack:
		return s + " (unknown format version)"
	case registered(t) == nil:
		return s + " (unknown type)"
	case t != model.CommandType(b[1]):
		return s + " (" + t.String() + ", flagged ignorable)"
	}
	return s + " (" + t.String() + ")"
}

// Halted returns a channel that is closed when Apply meets a committed
// entry it cannot decode: an unknown format version, an unknown type
// without IgnoreUnknownTypeFlag, or a payload that does not decode. The
// master then has to stop, since it can no longer follow the log; Err says
// why. Readers keep answering from the tables as they were before that
// entry.
func (f *FSM) Halted() <-chan struct{} { return f.halted }

// Err returns why the FSM halted, naming the entry's Raft index, its type
// byte and the decoding error (which wraps ErrMalformed); nil while it has
// not halted.
func (f *FSM) Err() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.err
}

// ApplyCommand decodes and applies one encoded command outside Raft, at the
// given index. Tests and tools use it to replay a log.
func (f *FSM) ApplyCommand(index uint64, data []byte) any {
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
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

// Driver returns one driver's row, or false if it is unknown. The row is
// the table's own, which no entry changes (ownDriver): the caller must not
// change it either, and copies it (Driver.Clone) to make a changed one.
func (f *FSM) Driver(id string) (*model.Driver, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.t.Drivers[id]
	return d, ok
}

// Drivers returns every driver's row, ordered by ID (which orders them by
// submission time, then sequence). The rows are the table's own, as
// Driver's are: a read of the table costs a slice, not a copy of every
// program.
func (f *FSM) Drivers() []*model.Driver {
	f.mu.RLock()
	out := make([]*model.Driver, 0, len(f.t.Drivers))
	for _, d := range f.t.Drivers {
		out = append(out, d)
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *model.Driver) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// WaitingDrivers returns the rows of the drivers in waitingDrivers, in
// queue order; the table's own, as Driver's are.
func (f *FSM) WaitingDrivers() []*model.Driver {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*model.Driver, 0, len(f.t.WaitingDrivers))
	for _, id := range f.t.WaitingDrivers {
		out = append(out, f.t.Drivers[id])
	}
	return out
}

// Demand is what the scheduler needs of one waiting driver: which attempt
// to place, its cores, memory (MiB) and custom resources, and the worker
// to avoid when another has room: the worker of the attempt before, when
// that attempt was rescheduled after failing there RescheduleAfter times
// in a row; "" for none.
type Demand struct {
	DriverID  string
	Attempt   int
	Cores     int
	MemoryMB  int64
	Resources model.ResourceAmounts
	Avoid     string
}

// WaitingDemands returns the demands of the drivers in waitingDrivers, in
// queue order: the scheduler's input, without copying whole rows.
func (f *FSM) WaitingDemands() []Demand {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Demand, len(f.t.WaitingDrivers))
	for i, id := range f.t.WaitingDrivers {
		d := f.t.Drivers[id]
		out[i] = Demand{DriverID: id, Attempt: d.Attempt, Cores: d.Cores, MemoryMB: d.MemoryMB, Resources: maps.Clone(d.Resources)}
		if prev := d.AttemptRecord(d.Attempt - 1); prev != nil && prev.Rescheduled {
			out[i].Avoid = prev.WorkerID
		}
	}
	return out
}

// Worker returns a copy of one worker, or false if it is unknown.
func (f *FSM) Worker(id string) (*model.Worker, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.t.Workers[id]
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
func (f *FSM) IsInstance(id, instance string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.t.Workers[id]
	return ok && subtle.ConstantTimeCompare([]byte(w.Instance), []byte(instance)) == 1
}

// Workers returns copies of all workers, ordered by ID, without their
// instances (model.Worker.View).
func (f *FSM) Workers() []*model.Worker {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*model.Worker, 0, len(f.t.Workers))
	for _, w := range f.t.Workers {
		out = append(out, w.View())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AttemptsOn returns the current attempt of every unfinished driver placed
// on the worker, ordered by driver ID: the attempts it should run, named
// only, for a held heartbeat that compares them with what the worker runs
// on every change without copying a row.
func (f *FSM) AttemptsOn(workerID string) []model.AttemptRef {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []model.AttemptRef
	if u, ok := f.t.on[workerID]; ok {
		out = make([]model.AttemptRef, 0, len(u.drivers))
		for id := range u.drivers {
			out = append(out, model.AttemptRef{DriverID: id, Attempt: f.t.Drivers[id].Attempt})
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
func (f *FSM) DriversOn(workerID string, known []model.AttemptRef) (full []*model.Driver, kept []model.AttemptRef) {
	has := make(map[model.AttemptRef]bool, len(known))
	for _, k := range known {
		has[k] = true
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if u, ok := f.t.on[workerID]; ok {
		for id := range u.drivers {
			d := f.t.Drivers[id]
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
// Apply, so no entry applies while it runs and the copy it returns is of
// one point in the log. It only copies the tables, under the read lock:
// Apply waits for the copy, readers do not. Driver and app rows are
// shared, not copied, since no entry changes a row that an earlier one
// made (see ownDriver, ownApp); worker and executor rows are copied (deep
// copies, sharing nothing that Apply changes). The encoding and the write, the bulk of the cost,
// happen in Persist, which Raft runs in another goroutine while Apply goes
// on; the copy's memory is held until then.
//
// Once the FSM has halted it returns an error: Raft would label the
// snapshot with the index of the last entry it handed to Apply, past
// entries that were not applied.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.err != nil {
		return nil, fmt.Errorf("no snapshot: %w", f.err)
	}
	return &snapshot{t: f.t.clone(), index: f.index}, nil
}

// Restore implements raft.FSM: it replaces every table with the snapshot's.
// On a malformed snapshot it returns an error and keeps the current tables,
// and so it does once the FSM has halted: a halted master is on its way
// out, and its tables stay the prefix of the log it applied.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, index, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return fmt.Errorf("no restore: %w", f.err)
	}
	for _, u := range f.t.on {
		close(u.change)
	}
	f.t = t
	// A fresh interner: the old one's values are the old tables'.
	f.intern = interner{}
	if index != 0 {
		// Older snapshots do not say; the next Apply does.
		f.index = index
	}
	// Nothing before the snapshot can be replayed: subscribers resume
	// with a reset.
	f.events.Reset(index)
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

// App returns one app's row with copies of its executors in ID order, or
// false if the app is unknown. The app's row is the table's own, which no
// entry changes (ownApp): the caller must not change it either.
func (f *FSM) App(id string) (*model.App, []*model.Executor, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.t.Apps[id]
	if !ok {
		return nil, nil, false
	}
	return a, f.executorClones(id), true
}

func (f *FSM) executorClones(appID string) []*model.Executor {
	es := f.executorsOf(appID)
	out := make([]*model.Executor, len(es))
	for i, e := range es {
		out[i] = e.Clone()
	}
	return out
}

// Apps returns every app's row ordered by ID (so by registration time,
// then sequence: the order Spark's waitingApps keeps), each with copies of
// its executors. The rows are the table's own, as App's are.
func (f *FSM) Apps() ([]*model.App, [][]*model.Executor) { return f.apps(false) }

// LiveApps is Apps without the finished ones: what the scheduler and the
// app liveness watch need on every change, without copying the retained
// history.
func (f *FSM) LiveApps() ([]*model.App, [][]*model.Executor) { return f.apps(true) }

func (f *FSM) apps(liveOnly bool) ([]*model.App, [][]*model.Executor) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var apps []*model.App
	var execs [][]*model.Executor
	for _, id := range f.appIDs() {
		if a := f.t.Apps[id]; !liveOnly || !a.State.Terminal() {
			apps = append(apps, a)
			execs = append(execs, f.executorClones(id))
		}
	}
	return apps, execs
}

// ExecutorsOn returns copies of the live executors placed on the worker,
// each with its app's row (the table's own, as App's is): the set the
// worker should be running.
func (f *FSM) ExecutorsOn(workerID string) ([]*model.Executor, []*model.App) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var es []*model.Executor
	if u, ok := f.t.on[workerID]; ok {
		for key := range u.executors {
			es = append(es, f.t.Executors[key].Clone())
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
		apps[i] = f.t.Apps[e.AppID]
	}
	return es, apps
}

// AppByToken returns the ID of the app registered with a token.
func (f *FSM) AppByToken(token string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.t.AppTokens[token]
	return id, ok
}

// NextAppSeq is the next free app sequence number.
func (f *FSM) NextAppSeq() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.t.NextAppSeq
}

// Completed returns the IDs of finished drivers and finished apps, each
// list oldest first (by the time they ended, then ID), for retention.
func (f *FSM) Completed() (drivers, apps []string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
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
	for id, d := range f.t.Drivers {
		if d.State.Terminal() {
			ds = append(ds, ended{id, d.UpdatedAt})
		}
	}
	for id, a := range f.t.Apps {
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
func (f *FSM) Census() Census {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := Census{
		Drivers:   map[model.DriverState]int{},
		Apps:      map[model.ApplicationState]int{},
		Executors: map[model.ExecutorState]int{},
		Workers:   map[model.WorkerState]int{},
		Waiting:   len(f.t.WaitingDrivers),
	}
	for _, d := range f.t.Drivers {
		c.Drivers[d.State]++
	}
	for _, a := range f.t.Apps {
		c.Apps[a.State]++
	}
	for _, e := range f.t.Executors {
		c.Executors[e.State]++
	}
	for _, w := range f.t.Workers {
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
func (f *FSM) QueuedAt(driverID string, attempt int) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.t.Drivers[driverID]
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
