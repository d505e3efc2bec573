package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// marshalled is the snapshot of f's tables as json.Marshal writes it, the
// encoding snapshots had before Persist wrote them row by row.
func marshalled(t *testing.T, f *FSM) []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(snapshotFile{Version: SnapshotVersion, Index: f.index, Tables: f.t})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Persist writes the bytes json.Marshal gives for the whole snapshot, and
// StateHash digests the tables' part of them, on tables with rows of every
// kind, on empty ones, and on ones restored from a snapshot whose rows have
// no attempt history.
func TestSnapshotBytes(t *testing.T) {
	entries, _ := fuzzBase(t)
	sc := scenario(t)
	noHistory := New()
	if err := noHistory.Restore(io.NopCloser(strings.NewReader(`{"version":1,"tables":{"drivers":{"driver-20261129120000-0001":` +
		`{"id":"driver-20261129120000-0001","argv":["x"],"cores":1,"memory_mb":1,"state":"SUBMITTED","attempt":1,"attempts":null}},` +
		`"waiting_drivers":["driver-20261129120000-0001"],"next_driver_seq":2}}`))); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*FSM{
		"empty": New(), "fuzzLog": replay(t, entries), "scenario": replay(t, sc),
		"scenario, drivers only": replay(t, sc[:driverScenarioLen]), "no attempt history": noHistory,
	} {
		want := marshalled(t, f)
		if got := snapshotBytes(t, f); !bytes.Equal(got, want) {
			t.Errorf("%s: Persist wrote\n%s\njson.Marshal gives\n%s", name, got, want)
		}
		f.mu.RLock()
		tablesJSON, err := json.Marshal(f.t)
		f.mu.RUnlock()
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(tablesJSON); hashOf(t, f) != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: StateHash is not the digest of the tables' JSON", name)
		}
	}
}

// The snapshots in testdata/fuzz/FuzzRestore that a master wrote (not the
// hand-made ones) restore, and snapshot again to the same bytes.
func TestCommittedSnapshotsRoundTrip(t *testing.T) {
	for _, name := range []string{"empty", "base-after-04", "base-after-14", "base-after-20", "base-after-32", "scenario", "scenario-drivers-only"} {
		file, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzRestore", name))
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(file)), "go test fuzz v1\n[]byte(")
		if !ok {
			t.Fatalf("%s is not a go test fuzz v1 file of one []byte", name)
		}
		data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f := New()
		if err := f.Restore(io.NopCloser(strings.NewReader(data))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := snapshotBytes(t, f); string(got) != data {
			t.Errorf("%s: restored and snapshot again, the bytes differ", name)
		}
	}
}

// A snapshot holds the tables of the moment Snapshot returned, whatever is
// applied while or before Persist writes it. The entries after the cut
// change rows that exist at the cut (attempt records, the queue's array,
// worker use, app and executor rows). Under -race the concurrent half also
// shows that Persist reads nothing that Apply writes.
func TestSnapshotIsolatedFromLaterApplies(t *testing.T) {
	entries := scenario(t)
	for _, cut := range []int{8, 21, 30} {
		f := replay(t, entries[:cut])
		want := marshalled(t, f)

		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range entries[cut:] {
			f.ApplyCommand(uint64(cut+1+i), e)
		}
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.Bytes(), want) {
			t.Fatalf("cut %d: entries applied after Snapshot, before Persist, changed the snapshot", cut)
		}

		f = replay(t, entries[:cut])
		if snap, err = f.Snapshot(); err != nil {
			t.Fatal(err)
		}
		sink.Reset()
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for i, e := range entries[cut:] {
				f.ApplyCommand(uint64(cut+1+i), e)
			}
		}()
		var perr error
		go func() {
			defer wg.Done()
			<-start
			perr = snap.Persist(&sink)
		}()
		close(start)
		wg.Wait()
		if perr != nil || !bytes.Equal(sink.Bytes(), want) {
			t.Fatalf("cut %d: Persist beside Apply: %v, or the bytes differ", cut, perr)
		}
	}
}

// failingSink takes n bytes, then fails every write.
type failingSink struct {
	n                int
	canceled, closed bool
}

var errDiskFull = errors.New("disk full")

func (s *failingSink) Write(p []byte) (int, error) {
	if len(p) > s.n {
		k := s.n
		s.n = 0
		return k, errDiskFull
	}
	s.n -= len(p)
	return len(p), nil
}
func (*failingSink) ID() string      { return "failing" }
func (s *failingSink) Cancel() error { s.canceled = true; return nil }
func (s *failingSink) Close() error  { s.closed = true; return nil }

// A write that fails cancels the sink, so Raft discards the partial file.
func TestPersistCancelsOnWriteError(t *testing.T) {
	f := replay(t, scenario(t))
	for _, n := range []int{0, 100, len(snapshotBytes(t, f)) - 1} {
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &failingSink{n: n}
		if err := snap.Persist(sink); !errors.Is(err, errDiskFull) || !sink.canceled || sink.closed {
			t.Fatalf("after %d bytes: Persist %v, canceled %v, closed %v; want the write error, canceled, not closed", n, err, sink.canceled, sink.closed)
		}
	}
}
