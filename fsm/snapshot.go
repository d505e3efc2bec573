package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/ids"
	"github.com/drover-project/drover/model"
)

// SnapshotVersion is the version of the snapshot format. Restore refuses
// others.
const SnapshotVersion = 1

// snapshotFile is the snapshot format: what Restore decodes, and what
// writeSnapshot writes byte for byte as json.Marshal would.
type snapshotFile struct {
	Version int `json:"version"`
	// Index is the Raft index of the last entry applied to the tables,
	// so that a restored FSM knows where its events resume; 0 in
	// snapshots written before it was kept.
	Index  uint64 `json:"index,omitempty"`
	Tables tables `json:"tables"`
}

// snapshot is a copy of the tables taken by FSM.Snapshot. Nothing in it is
// shared with the live tables, so Persist may read it while Apply goes on.
type snapshot struct {
	t     tables
	index uint64
}

// Persist implements raft.FSMSnapshot: it writes the copy to the sink, row
// by row (see writeSnapshot). On error it cancels the sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.index, &s.t); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot; the copy is left to the garbage
// collector.
func (s *snapshot) Release() {}

// clone returns a deep copy of the tables without the derived per-worker
// index, which snapshots do not hold. Strings are shared: they cannot
// change.
func (t *tables) clone() tables {
	return tables{
		Workers:        cloneRows(t.Workers, (*model.Worker).Clone),
		Drivers:        cloneRows(t.Drivers, cloneDriver),
		WaitingDrivers: slices.Clone(t.WaitingDrivers),
		Tokens:         maps.Clone(t.Tokens),
		NextDriverSeq:  t.NextDriverSeq,
		Apps:           cloneRows(t.Apps, (*model.App).Clone),
		Executors:      cloneRows(t.Executors, (*model.Executor).Clone),
		AppTokens:      maps.Clone(t.AppTokens),
		NextAppSeq:     t.NextAppSeq,
	}
}

// cloneRows returns a copy of a table with every row copied by clone; nil
// for nil.
func cloneRows[V any](m map[string]V, clone func(V) V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = clone(v)
	}
	return out
}

// cloneDriver copies what Apply changes in a driver row in place (its
// state, times, attempt records with their exit codes and failures) and
// shares what it never changes once the row exists: the program (Argv,
// Env, Artifacts, Resources) and each attempt's addresses. It is the copy
// a snapshot and an event hold of a row as of their index, at a fraction
// of the cost and memory of Driver.Clone, whose copies callers may change.
// A nil attempt history (a row restored from a snapshot that had none)
// stays nil, so the copy encodes as the row does and a snapshot restores
// to tables of the same hash.
func cloneDriver(d *model.Driver) *model.Driver {
	c := *d
	c.ExitCode = model.CloneExitCode(d.ExitCode)
	if d.Attempts != nil {
		c.Attempts = make([]model.Attempt, len(d.Attempts))
		for i, a := range d.Attempts {
			a.ExitCode = model.CloneExitCode(a.ExitCode)
			a.Failures = slices.Clone(a.Failures)
			c.Attempts[i] = a
		}
	}
	return &c
}

// writeSnapshot writes the snapshot of t, at index, to w in the bytes
// json.Marshal gives for snapshotFile{SnapshotVersion, index, *t},
// encoding one row at a time, so that the encoding of 100,000 drivers is
// never held whole in memory.
func writeSnapshot(w io.Writer, index uint64, t *tables) error {
	sw := newStreamWriter(w)
	sw.raw(`{"version":`)
	sw.value(SnapshotVersion)
	if index != 0 {
		sw.raw(`,"index":`)
		sw.value(index)
	}
	sw.raw(`,"tables":`)
	sw.tables(t)
	sw.raw(`}`)
	return sw.flush()
}

// streamWriter writes JSON piece by piece: raw text and values, each value
// encoded as json.Marshal would encode it. The first error sticks.
type streamWriter struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func newStreamWriter(w io.Writer) *streamWriter {
	sw := &streamWriter{w: bufio.NewWriterSize(w, 64<<10)}
	sw.enc = json.NewEncoder(&sw.buf)
	return sw
}

func (sw *streamWriter) raw(s string) {
	if sw.err == nil {
		_, sw.err = sw.w.WriteString(s)
	}
}

func (sw *streamWriter) value(v any) {
	if sw.err != nil {
		return
	}
	sw.buf.Reset()
	if sw.err = sw.enc.Encode(v); sw.err == nil {
		// Encode ends every value with a newline that Marshal does not.
		_, sw.err = sw.w.Write(bytes.TrimSuffix(sw.buf.Bytes(), []byte("\n")))
	}
}

func (sw *streamWriter) flush() error {
	if sw.err != nil {
		return sw.err
	}
	return sw.w.Flush()
}

// tables writes t as json.Marshal would, field by field in the order of
// the struct. TestSnapshotBytes holds the two to the same bytes.
func (sw *streamWriter) tables(t *tables) {
	sw.raw(`{"workers":`)
	writeRows(sw, t.Workers)
	sw.raw(`,"drivers":`)
	writeRows(sw, t.Drivers)
	sw.raw(`,"waiting_drivers":`)
	sw.value(t.WaitingDrivers)
	sw.raw(`,"tokens":`)
	writeRows(sw, t.Tokens)
	sw.raw(`,"next_driver_seq":`)
	sw.value(t.NextDriverSeq)
	sw.raw(`,"apps":`)
	writeRows(sw, t.Apps)
	sw.raw(`,"executors":`)
	writeRows(sw, t.Executors)
	sw.raw(`,"app_tokens":`)
	writeRows(sw, t.AppTokens)
	sw.raw(`,"next_app_seq":`)
	sw.value(t.NextAppSeq)
	sw.raw(`}`)
}

// writeRows writes a table as json.Marshal writes a map: keys in order,
// null for nil.
func writeRows[V any](sw *streamWriter, m map[string]V) {
	if m == nil {
		sw.raw("null")
		return
	}
	sw.raw("{")
	for i, k := range sortedKeys(m) {
		if i > 0 {
			sw.raw(",")
		}
		sw.value(k)
		sw.raw(":")
		sw.value(m[k])
	}
	sw.raw("}")
}

// decodeSnapshot parses and checks a snapshot: the version, and that every
// cross-reference (queue entries, tokens, placements) points at a row, so a
// corrupt snapshot is refused instead of installed. Derived columns (used
// cores and memory) are recomputed, not trusted.
func decodeSnapshot(r io.Reader) (tables, uint64, error) {
	t, index, err := decodeSnapshotFile(r)
	if err != nil {
		return tables{}, 0, fmt.Errorf("restore snapshot: %w", err)
	}
	return t, index, nil
}

// decodeSnapshotFile is decodeSnapshot without the prefix on its errors.
// Unknown fields are ignored, as in log entries (DESIGN.md), so that a
// master takes a snapshot a newer one sent it with fields it adds; data
// after the snapshot is refused.
func decodeSnapshotFile(r io.Reader) (tables, uint64, error) {
	var s snapshotFile
	dec := json.NewDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return tables{}, 0, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return tables{}, 0, errors.New("invalid JSON: trailing data after the snapshot")
	}
	if s.Version != SnapshotVersion {
		return tables{}, 0, fmt.Errorf("version %d, want %d", s.Version, SnapshotVersion)
	}
	t := s.Tables
	t.on = map[string]*workerUnits{}
	if t.Workers == nil {
		t.Workers = map[string]*model.Worker{}
	}
	if t.Drivers == nil {
		t.Drivers = map[string]*model.Driver{}
	}
	if t.Tokens == nil {
		t.Tokens = map[string]string{}
	}
	// Snapshots taken before applications existed have no app tables.
	if t.Apps == nil {
		t.Apps = map[string]*model.App{}
	}
	if t.Executors == nil {
		t.Executors = map[string]*model.Executor{}
	}
	if t.AppTokens == nil {
		t.AppTokens = map[string]string{}
	}
	for id, w := range t.Workers {
		if w == nil || w.ID != id {
			return tables{}, 0, fmt.Errorf("worker row %q is inconsistent", id)
		}
		w.CoresUsed, w.MemoryUsedMB, w.ResourcesUsed = 0, 0, nil
		if err := model.CheckResourceOffer(w.Resources); err != nil {
			return tables{}, 0, fmt.Errorf("worker %s: %v", id, err)
		}
	}
	for id, d := range t.Drivers {
		if d == nil || d.ID != id {
			return tables{}, 0, fmt.Errorf("driver row %q is inconsistent", id)
		}
		if d.WorkerID != "" && !d.State.Terminal() {
			w, ok := t.Workers[d.WorkerID]
			if !ok {
				return tables{}, 0, fmt.Errorf("driver %s is placed on unknown worker %s", id, d.WorkerID)
			}
			w.CoresUsed += d.Cores
			w.MemoryUsedMB += d.MemoryMB
			if rec := d.CurrentAttempt(); rec != nil {
				if err := holdOnce(w, rec.Resources); err != nil {
					return tables{}, 0, fmt.Errorf("driver %s: %v", id, err)
				}
			}
			t.units(w.ID).drivers[id] = struct{}{}
		}
	}
	seen := map[string]bool{}
	for _, id := range t.WaitingDrivers {
		d, ok := t.Drivers[id]
		if !ok || seen[id] || d.WorkerID != "" || d.State.Terminal() {
			return tables{}, 0, fmt.Errorf("waiting driver %q is inconsistent", id)
		}
		seen[id] = true
	}
	for tok, id := range t.Tokens {
		if _, ok := t.Drivers[id]; !ok {
			return tables{}, 0, fmt.Errorf("token %q names unknown driver %s", tok, id)
		}
	}
	if err := checkApps(&t); err != nil {
		return tables{}, 0, fmt.Errorf("%w", err)
	}
	if err := checkSequences(&t); err != nil {
		return tables{}, 0, fmt.Errorf("%w", err)
	}
	return t, s.Index, nil
}

// checkSequences checks that the next driver and app sequence numbers lie
// past every ID in the tables, so that a leader never makes an ID twice.
func checkSequences(t *tables) error {
	if t.NextDriverSeq < 0 || t.NextDriverSeq > ids.MaxSeq+1 || t.NextAppSeq < 0 || t.NextAppSeq > ids.MaxSeq+1 {
		return fmt.Errorf("next sequence numbers %d (drivers) and %d (apps) are out of range", t.NextDriverSeq, t.NextAppSeq)
	}
	for id := range t.Drivers {
		if seq, err := idSeq(ids.Driver, id); err != nil || seq >= t.NextDriverSeq {
			return fmt.Errorf("driver %s is not before the next driver sequence number %d", id, t.NextDriverSeq)
		}
	}
	for id := range t.Apps {
		if seq, err := idSeq(ids.App, id); err != nil || seq >= t.NextAppSeq {
			return fmt.Errorf("app %s is not before the next app sequence number %d", id, t.NextAppSeq)
		}
	}
	return nil
}

// checkApps checks the app and executor rows and recomputes the cores and
// memory their live executors use.
func checkApps(t *tables) error {
	for id, a := range t.Apps {
		if a == nil || a.ID != id || a.FirstExecutorID < 0 || a.FirstExecutorID > a.NextExecutorID || a.NextExecutorID > maxExecutorID {
			return fmt.Errorf("app row %q is inconsistent", id)
		}
		a.CoresGranted = 0
	}
	for key, e := range t.Executors {
		if e == nil || key != model.ExecutorKey(e.AppID, e.ID) {
			return fmt.Errorf("executor row %q is inconsistent", key)
		}
		a, ok := t.Apps[e.AppID]
		if !ok || e.ID < a.FirstExecutorID || e.ID >= a.NextExecutorID {
			return fmt.Errorf("executor %s belongs to no app, or has an ID the app never gave", key)
		}
		if e.State.Terminal() {
			continue
		}
		w, ok := t.Workers[e.WorkerID]
		if !ok || a.State.Terminal() {
			return fmt.Errorf("live executor %s is on unknown worker %q or of a finished app", key, e.WorkerID)
		}
		w.CoresUsed += e.Cores
		w.MemoryUsedMB += e.MemoryMB
		if err := holdOnce(w, e.Resources); err != nil {
			return fmt.Errorf("executor %s: %v", key, err)
		}
		a.CoresGranted += e.Cores
		t.units(w.ID).executors[key] = struct{}{}
	}
	for tok, id := range t.AppTokens {
		if _, ok := t.Apps[id]; !ok {
			return fmt.Errorf("token %q names unknown app %s", tok, id)
		}
	}
	return nil
}

// holdOnce adds the addresses a restored unit holds to its worker's
// books, refusing one that another unit holds already: a snapshot that
// gives one GPU to two attempts would have both run on it.
func holdOnce(w *model.Worker, held model.Resources) error {
	for name, addrs := range held {
		for i, a := range addrs {
			if slices.Contains(w.ResourcesUsed[name], a) || slices.Contains(addrs[:i], a) {
				return fmt.Errorf("address %s of %s on worker %s is held twice", a, name, w.ID)
			}
		}
	}
	w.ResourcesUsed.Hold(held)
	return nil
}

// hashTables digests the tables as they appear in a snapshot.
func hashTables(t *tables) (string, error) {
	h := sha256.New()
	sw := newStreamWriter(h)
	sw.tables(t)
	if err := sw.flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
