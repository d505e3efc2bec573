// Package fsm holds Drover's replicated tables (workers, drivers,
// waitingDrivers, apps, executors and the submission-token indexes) and the hashicorp/raft FSM
// that changes them. Apply is deterministic: every time, ID and placement
// arrives inside the command, so every master that applies the same log holds
// the same tables.
package fsm

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/fsm/events"
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
// All methods are safe for concurrent use. It holds the codec, the
// dispatch of entries to their apply functions, the apply functions,
// snapshots, restores and the halt; the tables and their queries are its
// State.
type FSM struct {
	// state is the tables and their queries. mu and t are its lock and
	// tables, which Apply and Restore change under the write lock; mu
	// guards the fields below too.
	state  *State
	mu     *sync.RWMutex
	t      *tables
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
	// Namespaces holds the namespaces an operator applied, by name;
	// DefaultNamespace without a row is model.ImplicitDefault. ACLTokens
	// holds the ACL tokens by accessor. Both are absent from snapshots
	// of tables that have none, as they were before namespaces existed.
	Namespaces map[string]*model.Namespace `json:"namespaces,omitempty"`
	ACLTokens  map[string]*model.ACLToken  `json:"acl_tokens,omitempty"`
	// Preemptions counts each namespace's preemptions, by name; absent
	// from snapshots of tables without any, as before preemption
	// existed.
	Preemptions map[string]Preemptions `json:"preemptions,omitempty"`
	// Schedules holds the schedules by name; absent from snapshots of
	// tables without any, as before schedules existed.
	Schedules map[string]*model.Schedule `json:"schedules,omitempty"`

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
	// use is each namespace's use (nsUsage), and tokenByHash each ACL
	// token's accessor by its secret's hash. Derived like on.
	use         nsUsage
	tokenByHash map[string]string
	// pending is what the entry being applied added to each namespace's
	// use before recount charges it; empty between entries.
	pending pending
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
		use:       newNSUsage(),

		tokenByHash: map[string]string{},
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
	s := &State{t: newTables()}
	return &FSM{state: s, mu: &s.mu, t: &s.t, change: make(chan struct{}), halted: make(chan struct{}), events: events.New(b),
		owned: map[*model.Driver]struct{}{}, ownedApps: map[*model.App]struct{}{}}
}

// State returns the tables' queries (Nomad's state store): every read of
// the tables goes through it, and only Apply and Restore change them.
func (f *FSM) State() *State { return f.state }

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
	clear(f.t.pending)
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

// HashAt returns the digest of all tables (State.StateHash) and the Raft
// index of the last entry they include, read under one lock. Raft's own
// applied index (raft.Raft.AppliedIndex) moves when it hands an entry to
// Apply, before the tables show it, so a hash paired with that index may
// be of the tables one or more entries earlier; two masters compared that
// way can differ at the "same" index while their logs agree.
func (f *FSM) HashAt() (hash string, index uint64, err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	hash, err = hashTables(f.t)
	return hash, f.index, err
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
	*f.t = t
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

func (t *tables) executorClones(appID string) []*model.Executor {
	es := t.executorsOf(appID)
	out := make([]*model.Executor, len(es))
	for i, e := range es {
		out[i] = e.Clone()
	}
	return out
}
