package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-project/drover/model"
)

// marshalled is the snapshot of f's tables in SnapshotVersionJSON, as
// older masters wrote it (json.Marshal's bytes).
func marshalled(t *testing.T, f *FSM) []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(snapshotFile{Version: SnapshotVersionJSON, Index: f.index, Tables: *f.t})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// StateHash digests the tables' JSON, and both snapshot versions restore
// to the same tables (the same hash, the same index), on tables with rows
// of every kind, on empty ones, on ones restored from a snapshot whose rows
// have no attempt history, and on ones with more drivers than one frame
// holds. Persist writes the same bytes for the same tables.
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
		"several frames": restoreBytes(t, baseOf(t, benchSizes{workers: 8, drivers: 3*packFrameRows + 5, waiting: 100, apps: 3}).data),
	} {
		f.mu.RLock()
		tablesJSON, err := json.Marshal(f.t)
		index := f.index
		f.mu.RUnlock()
		if err != nil {
			t.Fatal(err)
		}
		h := hashOf(t, f)
		if sum := sha256.Sum256(tablesJSON); h != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: StateHash is not the digest of the tables' JSON", name)
		}
		packed := snapshotBytes(t, f)
		if again := snapshotBytes(t, f); !bytes.Equal(packed, again) {
			t.Errorf("%s: two snapshots of the same tables differ", name)
		}
		for version, data := range map[string][]byte{"packed": packed, "JSON": marshalled(t, f)} {
			g := restoreBytes(t, data)
			if hashOf(t, g) != h || g.index != index {
				t.Errorf("%s: the %s snapshot restores to other tables (index %d, want %d)", name, version, g.index, index)
			}
			checkWorkerIndex(t, g)
		}
	}
}

// The snapshots in testdata/fuzz/FuzzRestore that a master wrote (not the
// hand-made ones) restore; the JSON ones (as masters wrote them before
// SnapshotVersion) give the same JSON again, the packed ones the same
// bytes.
func TestCommittedSnapshotsRoundTrip(t *testing.T) {
	names := slices.Clone(jsonSnapshots)
	for name := range packedStates(t) {
		names = append(names, name)
	}
	for _, name := range names {
		data := string(committedSnapshot(t, name))
		f := New()
		if err := f.Restore(io.NopCloser(strings.NewReader(data))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again := marshalled(t, f)
		if strings.HasPrefix(name, packedPrefix) {
			again = snapshotBytes(t, f)
		}
		if string(again) != data {
			t.Errorf("%s: restored and snapshot again, the bytes differ", name)
		}
	}
}

// committedSnapshot is the snapshot in testdata/fuzz/FuzzRestore/name.
func committedSnapshot(t *testing.T, name string) []byte {
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
	return []byte(data)
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
		want := snapshotBytes(t, f)

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

// A packed snapshot that is cut short anywhere (the whole file, or one
// frame inside), has bytes after its end, or frames that are not what
// writeSnapshot writes, is refused, and the
// tables stay as they were.
func TestPackedSnapshotRefusals(t *testing.T) {
	f := replay(t, scenario(t)[:driverScenarioLen])
	good := snapshotBytes(t, f)
	nl := bytes.IndexByte(good, '\n')
	frame := func(v ...any) []byte {
		var b []byte
		enc := codec.NewEncoderBytes(&b, packHandle)
		for _, x := range v {
			if err := enc.Encode(x); err != nil {
				t.Fatal(err)
			}
		}
		return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
	}
	head := good[:nl+1]
	tablesFrame := frame(&tables{})
	d := &model.Driver{ID: "driver-20261129120000-0000", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, State: model.DriverFinished, Attempt: 1}
	cases := map[string][]byte{
		"trailing byte":            append(slices.Clone(good), 0),
		"no tables frame":          append(slices.Clone(head), 0),
		"drivers in tables frame":  slices.Concat(head, frame(&tables{Drivers: map[string]*model.Driver{d.ID: d}}), []byte{0}),
		"driver row twice":         slices.Concat(head, tablesFrame, frame(d), frame(d), []byte{0}),
		"null driver row":          slices.Concat(head, tablesFrame, frame(nil), []byte{0}),
		"frame of garbage":         slices.Concat(head, tablesFrame, []byte{3, 0xc1, 0xc1, 0xc1}, []byte{0}),
		"frame longer than data":   slices.Concat(head, tablesFrame, binary.AppendUvarint(nil, 1<<40), []byte{1, 2, 3}),
		"header without a newline": []byte(`{"version":2,"index":3}`),
	}
	for cut := range len(good) {
		cases[fmt.Sprintf("cut at %d", cut)] = good[:cut]
	}
	// Frames cut short inside, with their lengths and the end marker kept
	// right: the codec reports a value cut short as an end of input.
	body := func(framed []byte) []byte {
		_, k := binary.Uvarint(framed)
		return framed[k:]
	}
	cutFrames := map[string][]byte{
		"tables": body(frame(&tables{Workers: map[string]*model.Worker{"w1": {ID: "w1", Cores: 1, MemoryMB: 1, State: model.WorkerAlive}}})),
		"row":    body(frame(d)),
	}
	for kind, whole := range cutFrames {
		for cut := 1; cut < len(whole); cut++ {
			framed := slices.Concat(binary.AppendUvarint(nil, uint64(cut)), whole[:cut])
			if kind == "row" {
				framed = slices.Concat(tablesFrame, framed)
			}
			cases[fmt.Sprintf("%s frame cut at %d", kind, cut)] = slices.Concat(head, framed, []byte{0})
		}
	}
	cases["two sets of tables in one frame"] = slices.Concat(head, frame(&tables{}, &tables{}), []byte{0})
	want := hashOf(t, f)
	for name, data := range cases {
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
			t.Errorf("%s: restored", name)
		}
		if hashOf(t, f) != want {
			t.Fatalf("%s: a refused snapshot changed the tables", name)
		}
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(good))); err != nil {
		t.Fatalf("the snapshot itself: %v", err)
	}
}
