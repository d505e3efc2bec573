package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// DBFile is the name, in the work dir, of the worker's own record of the
// driver attempts and executors it started (bbolt). It is what lets a
// restarted worker find, adopt or report what the previous one left
// running, as the design's "Workers reconcile" asks, in the manner of
// Nomad's client state database.
const DBFile = "worker.db"

// dbLockTimeout bounds the wait for the database's file lock: a second
// worker on the same work dir fails after it instead of hanging.
const dbLockTimeout = time.Second

// attemptsBucket holds every record, executors' too: the name predates
// them.
var attemptsBucket = []byte("attempts")

// removedBucket holds a tombstone for each unit whose directory the
// work-dir cleanup removed, for tombstoneTTL. A unit's directory is what
// keeps a stale assignment of it from running it again (see
// Worker.start); once cleanup has removed it, the tombstone does, and it
// lets the log endpoint say when and why the files went.
var removedBucket = []byte("removed")

// tombstoneTTL is how long a tombstone is kept. A stale assignment comes
// from a leader that had not yet applied the unit's final report, within
// a request timeout and a leader lease of the acknowledgement that let
// cleanup at the directory; a day is far beyond that, and costs some
// tens of bytes per unit.
const tombstoneTTL = 24 * time.Hour

// tombstone says when and why the cleanup removed a unit's directory.
type tombstone struct {
	// At is the removal time, Unix seconds.
	At int64 `json:"at"`
	// Reason is reasonTTL or reasonLowDisk.
	Reason cleanupReason `json:"reason"`
}

// record is what the worker keeps on disk about one unit it started, from
// just before its runner starts until the leader has acknowledged its final
// report. A driver attempt's record is exactly what workers wrote before
// they ran executors, so a record from an older worker is adopted as is.
type record struct {
	// Kind is "executor" for an executor; empty for a driver attempt.
	Kind string `json:"kind,omitempty"`
	// DriverID and Attempt name a driver attempt.
	DriverID string `json:"driver_id,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	// AppID and ExecutorID name an executor.
	AppID      string `json:"app_id,omitempty"`
	ExecutorID int    `json:"executor_id,omitempty"`
	Dir        string `json:"dir"`
	// RunnerPID is the runner's process ID; 0 while it is being started.
	RunnerPID int `json:"runner_pid,omitempty"`
	// RunnerStart is the runner's start time as procid.Start reads it (clock
	// ticks after boot), so that a PID reused by another process is not
	// mistaken for the runner.
	RunnerStart uint64 `json:"runner_start,omitempty"`
}

func newRecord(k unitKey, dir string, pid int, start uint64) record {
	r := record{Kind: k.kind.info().record, Dir: dir, RunnerPID: pid, RunnerStart: start}
	if k.kind == kindExecutor {
		r.AppID, r.ExecutorID = k.id, k.n
	} else {
		r.DriverID, r.Attempt = k.id, k.n
	}
	return r
}

// key is the unit r records; false for a kind this worker does not know.
func (r record) key() (unitKey, bool) {
	kind, ok := kindOfRecord(r.Kind)
	if kind == kindExecutor {
		return executorKey(r.AppID, r.ExecutorID), ok
	}
	return attemptKey(r.DriverID, r.Attempt), ok
}

// dbKey is ID/N, as before executors: driver and app IDs never match the
// same pattern, and only valid keys are recorded, so no two units share one.
func (k unitKey) dbKey() []byte {
	return []byte(k.id + "/" + strconv.Itoa(k.n))
}

// store is the worker's bbolt database.
type store struct {
	db *bbolt.DB
}

// openStore opens (or creates) the database at path. It fails after
// dbLockTimeout when another process holds it.
func openStore(path string) (*store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: dbLockTimeout})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked: another worker uses this work dir", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{attemptsBucket, removedBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &store{db: db}, nil
}

// put writes r, replacing the record of the same unit.
func (s *store) put(r record) error {
	k, ok := r.key()
	if !ok {
		return fmt.Errorf("record of unknown kind %q", r.Kind)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(attemptsBucket).Put(k.dbKey(), v)
	})
}

// has says whether k has a record; an unreadable record counts as one.
func (s *store) has(k unitKey) bool {
	found := true
	_ = s.db.View(func(tx *bbolt.Tx) error {
		found = tx.Bucket(attemptsBucket).Get(k.dbKey()) != nil
		return nil
	})
	return found
}

// remove deletes the records of keys; a missing one is no error.
func (s *store) remove(keys []unitKey) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(attemptsBucket)
		for _, k := range keys {
			if err := b.Delete(k.dbKey()); err != nil {
				return err
			}
		}
		return nil
	})
}

// all returns every record, in key order.
func (s *store) all() ([]record, error) {
	var out []record
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(attemptsBucket).ForEach(func(k, v []byte) error {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// bury records that the cleanup removed k's directory.
func (s *store) bury(k unitKey, t tombstone) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(removedBucket).Put(k.dbKey(), v)
	})
}

// tombstone returns k's tombstone, false when there is none or it is
// unreadable.
func (s *store) tombstone(k unitKey) (tombstone, bool) {
	var t tombstone
	found := false
	_ = s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(removedBucket).Get(k.dbKey()); v != nil {
			found = json.Unmarshal(v, &t) == nil
		}
		return nil
	})
	return t, found
}

// prune deletes the tombstones made before cutoff, writing (and syncing)
// only when there are some.
func (s *store) prune(cutoff time.Time) error {
	var old [][]byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(removedBucket).ForEach(func(k, v []byte) error {
			var t tombstone
			if json.Unmarshal(v, &t) != nil || t.At < cutoff.Unix() {
				old = append(old, slices.Clone(k))
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(removedBucket)
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *store) close() error { return s.db.Close() }
