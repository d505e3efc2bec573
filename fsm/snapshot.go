package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/ids"
	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// SnapshotVersion is the version of the snapshot format. Restore refuses
// others.
const SnapshotVersion = 1

type snapshotFile struct {
	Version int    `json:"version"`
	Tables  tables `json:"tables"`
}

type snapshot struct{ data []byte }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

func encodeSnapshot(t *tables) ([]byte, error) {
	return json.Marshal(snapshotFile{Version: SnapshotVersion, Tables: *t})
}

// decodeSnapshot parses and checks a snapshot: the version, and that every
// cross-reference (queue entries, tokens, placements) points at a row, so a
// corrupt snapshot is refused instead of installed. Derived columns (used
// cores and memory) are recomputed, not trusted.
func decodeSnapshot(r io.Reader) (tables, error) {
	var s snapshotFile
	if err := strictjson.Decode(r, &s); err != nil {
		return tables{}, fmt.Errorf("restore snapshot: %w", err)
	}
	if s.Version != SnapshotVersion {
		return tables{}, fmt.Errorf("restore snapshot: version %d, want %d", s.Version, SnapshotVersion)
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
			return tables{}, fmt.Errorf("restore snapshot: worker row %q is inconsistent", id)
		}
		w.CoresUsed, w.MemoryUsedMB = 0, 0
	}
	for id, d := range t.Drivers {
		if d == nil || d.ID != id {
			return tables{}, fmt.Errorf("restore snapshot: driver row %q is inconsistent", id)
		}
		if d.WorkerID != "" && !d.State.Terminal() {
			w, ok := t.Workers[d.WorkerID]
			if !ok {
				return tables{}, fmt.Errorf("restore snapshot: driver %s is placed on unknown worker %s", id, d.WorkerID)
			}
			w.CoresUsed += d.Cores
			w.MemoryUsedMB += d.MemoryMB
			t.units(w.ID).drivers[id] = struct{}{}
		}
	}
	seen := map[string]bool{}
	for _, id := range t.WaitingDrivers {
		d, ok := t.Drivers[id]
		if !ok || seen[id] || d.WorkerID != "" || d.State.Terminal() {
			return tables{}, fmt.Errorf("restore snapshot: waiting driver %q is inconsistent", id)
		}
		seen[id] = true
	}
	for tok, id := range t.Tokens {
		if _, ok := t.Drivers[id]; !ok {
			return tables{}, fmt.Errorf("restore snapshot: token %q names unknown driver %s", tok, id)
		}
	}
	if err := checkApps(&t); err != nil {
		return tables{}, fmt.Errorf("restore snapshot: %w", err)
	}
	if err := checkSequences(&t); err != nil {
		return tables{}, fmt.Errorf("restore snapshot: %w", err)
	}
	return t, nil
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

func hashTables(t *tables) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
