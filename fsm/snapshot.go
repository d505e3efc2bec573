package fsm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"golang.org/x/sync/errgroup"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// The snapshot formats. Persist writes SnapshotVersion; Restore reads it
// and SnapshotVersionJSON, which older masters wrote and which stays
// readable for as long as their snapshots may exist.
const (
	// SnapshotVersionJSON (1) is one JSON object, snapshotFile.
	SnapshotVersionJSON = 1
	// SnapshotVersion (2) is a JSON header line (packHeader) followed by
	// MessagePack frames (see writeSnapshot), which restore decodes on
	// every core; JSON decoding was nine tenths of a restore.
	SnapshotVersion = 2
)

// snapshotFile is the format of SnapshotVersionJSON: what Restore decodes
// of such a snapshot.
type snapshotFile struct {
	Version int `json:"version"`
	// Index is the Raft index of the last entry applied to the tables,
	// so that a restored FSM knows where its events resume; 0 in
	// snapshots written before it was kept.
	Index  uint64 `json:"index,omitempty"`
	Tables tables `json:"tables"`
}

// snapshot is a copy of the tables taken by FSM.Snapshot. What it shares
// with the live tables (the driver and app rows) no entry changes, so
// Persist may read it while Apply goes on.
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

// clone returns a copy of the tables without the derived per-worker
// index, which snapshots do not hold. Strings are shared: they cannot
// change. So are the driver and app rows, which Apply never changes once
// their entry is applied (FSM.ownDriver, FSM.ownApp); worker and executor
// rows are copied.
func (t *tables) clone() tables {
	return tables{
		Workers:        cloneRows(t.Workers, (*model.Worker).Clone),
		Drivers:        maps.Clone(t.Drivers),
		WaitingDrivers: slices.Clone(t.WaitingDrivers),
		Tokens:         maps.Clone(t.Tokens),
		NextDriverSeq:  t.NextDriverSeq,
		Apps:           maps.Clone(t.Apps),
		Executors:      cloneRows(t.Executors, (*model.Executor).Clone),
		AppTokens:      maps.Clone(t.AppTokens),
		NextAppSeq:     t.NextAppSeq,
		Namespaces:     maps.Clone(t.Namespaces),
		ACLTokens:      maps.Clone(t.ACLTokens),
		Preemptions:    maps.Clone(t.Preemptions),
		// Schedule rows are replaced, never changed in place.
		Schedules: maps.Clone(t.Schedules),
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
// an entry changes in place of a row an earlier entry made (FSM.ownDriver),
// at a fraction of the cost and memory of Driver.Clone, whose copies
// callers may change.
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

// packHeader is the first line of a SnapshotVersion snapshot, in JSON so
// that Restore tells the formats apart by the version, the first field of
// both.
type packHeader struct {
	Version int `json:"version"`
	// Index is snapshotFile's.
	Index uint64 `json:"index,omitempty"`
}

// packHandle encodes the frames: MessagePack, with the json tags of the
// rows (go-msgpack reads them), so a field keeps one name in log entries,
// the API and snapshots, and unknown fields are ignored as in JSON. Map
// keys are sorted, so the same tables always give the same bytes.
var packHandle = newPackHandle(false)

// newPackHandle returns packHandle's settings, also writing codec.Raw
// values as they are when raw.
func newPackHandle(raw bool) *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.Canonical = true
	h.Raw = raw
	return h
}

// A frame of driver rows closes at packFrameRows rows or once it holds
// packFrameBytes, so that snapshot and restore have frames to share among
// their cores and never hold one much larger than a row.
const (
	packFrameRows  = 2048
	packFrameBytes = 4 << 20
)

// writeSnapshot writes the snapshot of t, at index, to w as SnapshotVersion:
// the header line, then frames, each a uvarint byte length and that many
// bytes of MessagePack, and last an empty frame. The first frame holds
// every table but the drivers (tables with Drivers nil); each of the
// others holds driver rows back to back, in ID order. Frames of rows are
// encoded on every core, a few at a time, and written in order, so that
// the encoding of 100,000 drivers is never held whole in memory.
func writeSnapshot(w io.Writer, index uint64, t *tables) error {
	head, err := json.Marshal(packHeader{Version: SnapshotVersion, Index: index})
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(append(head, '\n')); err != nil {
		return err
	}
	rest := *t
	rest.Drivers = nil
	first, err := encodeFrames(func(add func(any) error) error { return add(&rest) })
	if err != nil {
		return err
	}
	if err := writeFrames(bw, first); err != nil {
		return err
	}
	// Each batch of rows becomes one frame, or more when its rows are
	// large; results come back in the order the batches went out.
	ids := sortedKeys(t.Drivers)
	workers := runtime.GOMAXPROCS(0)
	results := make(chan chan framesOrError, workers)
	go func() {
		defer close(results)
		for len(ids) > 0 {
			batch := ids[:min(len(ids), packFrameRows)]
			ids = ids[len(batch):]
			res := make(chan framesOrError, 1)
			results <- res
			go func() {
				frames, err := encodeFrames(func(add func(any) error) error {
					for _, id := range batch {
						if err := add(t.Drivers[id]); err != nil {
							return err
						}
					}
					return nil
				})
				res <- framesOrError{frames, err}
			}()
		}
	}()
	for res := range results {
		r := <-res
		if err == nil {
			err = r.err
		}
		if err == nil {
			err = writeFrames(bw, r.frames)
		}
		// On error the rest is drained, so no encoder is left blocked.
	}
	if err != nil {
		return err
	}
	if err := writeFrames(bw, [][]byte{nil}); err != nil {
		return err
	}
	return bw.Flush()
}

// framesOrError is what encodeFrames gives for one batch.
type framesOrError struct {
	frames [][]byte
	err    error
}

// encodeFrames encodes what fill adds, value after value, into frames of
// at most about packFrameBytes (a value is never split).
func encodeFrames(fill func(add func(any) error) error) ([][]byte, error) {
	var frames [][]byte
	// Room for a frame of rows of the usual size, so that encoding does
	// not copy the frame as it grows.
	frame := make([]byte, 0, 2<<20)
	enc := codec.NewEncoderBytes(&frame, packHandle)
	err := fill(func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		if len(frame) >= packFrameBytes {
			frames = append(frames, frame)
			frame = make([]byte, 0, 2<<20)
			enc.ResetBytes(&frame)
		}
		return nil
	})
	if len(frame) > 0 {
		frames = append(frames, frame)
	}
	return frames, err
}

// writeFrames writes each frame with its length; an empty one ends the
// snapshot.
func writeFrames(w *bufio.Writer, frames [][]byte) error {
	for _, f := range frames {
		if _, err := w.Write(binary.AppendUvarint(nil, uint64(len(f)))); err != nil {
			return err
		}
		if _, err := w.Write(f); err != nil {
			return err
		}
	}
	return nil
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
	if len(t.Namespaces) > 0 {
		sw.raw(`,"namespaces":`)
		writeRows(sw, t.Namespaces)
	}
	if len(t.ACLTokens) > 0 {
		sw.raw(`,"acl_tokens":`)
		writeRows(sw, t.ACLTokens)
	}
	if len(t.Preemptions) > 0 {
		sw.raw(`,"preemptions":`)
		writeRows(sw, t.Preemptions)
	}
	if len(t.Schedules) > 0 {
		sw.raw(`,"schedules":`)
		writeRows(sw, t.Schedules)
	}
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

// decodeSnapshot parses and checks a snapshot of either version: the
// version, and that every cross-reference (queue entries, tokens,
// placements) points at a row, so a corrupt snapshot is refused instead of
// installed. Derived columns (used cores and memory) are recomputed, not
// trusted.
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
	br := bufio.NewReaderSize(r, 64<<10)
	var t tables
	var index uint64
	var err error
	if packed(br) {
		t, index, err = decodePacked(br)
	} else {
		t, index, err = decodeJSON(br)
	}
	if err != nil {
		return tables{}, 0, err
	}
	if err := checkTables(&t); err != nil {
		return tables{}, 0, err
	}
	t.shareIDs()
	return t, index, nil
}

// packed reports whether the snapshot br begins is a SnapshotVersion one:
// a JSON object whose first field is "version" with that value. Anything
// else is left to the JSON decoder, whose errors say what is wrong.
func packed(br *bufio.Reader) bool {
	start, _ := br.Peek(64)
	dec := json.NewDecoder(bytes.NewReader(start))
	var version int
	for _, want := range []any{json.Delim('{'), "version", &version} {
		if p, ok := want.(*int); ok {
			if dec.Decode(p) != nil {
				return false
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != want {
			return false
		}
	}
	return version == SnapshotVersion
}

// decodeJSON decodes a SnapshotVersionJSON snapshot.
func decodeJSON(r io.Reader) (tables, uint64, error) {
	var s snapshotFile
	dec := json.NewDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return tables{}, 0, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return tables{}, 0, errors.New("invalid JSON: trailing data after the snapshot")
	}
	if s.Version != SnapshotVersionJSON {
		return tables{}, 0, fmt.Errorf("version %d, want %d or %d", s.Version, SnapshotVersionJSON, SnapshotVersion)
	}
	var in interner
	for _, d := range s.Tables.Drivers {
		if d != nil {
			in.shareDriver(d, s.Tables.Workers)
		}
	}
	return s.Tables, s.Index, nil
}

// maxHeaderLine bounds the header line of a SnapshotVersion snapshot.
const maxHeaderLine = 4 << 10

// decodePacked decodes a SnapshotVersion snapshot (see writeSnapshot). The
// frames of driver rows are decoded on every core while the next are read.
func decodePacked(br *bufio.Reader) (tables, uint64, error) {
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) > maxHeaderLine {
		return tables{}, 0, errors.New("invalid header line")
	}
	var h packHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return tables{}, 0, fmt.Errorf("invalid header line: %w", err)
	}
	first, err := readFrame(br)
	if err != nil || len(first) == 0 {
		return tables{}, 0, errors.New("invalid frames: the tables frame is missing")
	}
	var t tables
	dec := codec.NewDecoderBytes(first, packHandle)
	if err := dec.Decode(&t); err != nil || dec.NumBytesRead() != len(first) {
		return tables{}, 0, errors.New("invalid frames: the tables frame is not one set of tables")
	}
	if t.Drivers != nil {
		return tables{}, 0, errors.New("invalid frames: driver rows in the tables frame")
	}
	t.Drivers = map[string]*model.Driver{}

	frames := make(chan []byte, runtime.GOMAXPROCS(0))
	decoded := make(chan []*model.Driver, runtime.GOMAXPROCS(0))
	g, ctx := errgroup.WithContext(context.Background())
	g.Go(func() error {
		defer close(frames)
		for {
			f, err := readFrame(br)
			if err != nil {
				return err
			}
			if len(f) == 0 {
				break
			}
			select {
			case frames <- f:
			case <-ctx.Done():
				return nil
			}
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			return errors.New("invalid frames: trailing data after the snapshot")
		}
		return nil
	})
	var decoders sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		decoders.Add(1)
		g.Go(func() error {
			defer decoders.Done()
			// Each decoder shares the strings of the rows it decodes
			// through an interner of its own, on its own core.
			var in interner
			for f := range frames {
				rows, err := decodeRows(f)
				if err != nil {
					return err
				}
				for _, d := range rows {
					if d != nil {
						in.shareDriver(d, t.Workers)
					}
				}
				select {
				case decoded <- rows:
				case <-ctx.Done():
					return nil
				}
			}
			return nil
		})
	}
	go func() {
		decoders.Wait()
		close(decoded)
	}()
	var bad error
	for rows := range decoded {
		for _, d := range rows {
			switch {
			case bad != nil:
			case d == nil:
				bad = errors.New("invalid frames: a null driver row")
			case t.Drivers[d.ID] != nil:
				bad = fmt.Errorf("invalid frames: driver row %q appears twice", d.ID)
			default:
				t.Drivers[d.ID] = d
			}
		}
	}
	if err := g.Wait(); err != nil {
		return tables{}, 0, err
	}
	if bad != nil {
		return tables{}, 0, bad
	}
	return t, h.Index, nil
}

// readFrame reads one frame. The buffer grows as bytes arrive, so a
// length that the data does not back allocates nothing like it.
func readFrame(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, errors.New("invalid frames: the snapshot ends before its last frame")
	}
	var buf bytes.Buffer
	if m, err := io.CopyN(&buf, br, int64(min(n, math.MaxInt64))); err != nil || uint64(m) != n {
		return nil, errors.New("invalid frames: the snapshot ends inside a frame")
	}
	return buf.Bytes(), nil
}

// decodeRows decodes a frame of driver rows. The codec reports a value cut
// short as io.EOF too, so the frame's end is told by the bytes read, and
// any error before it refuses the frame.
func decodeRows(frame []byte) ([]*model.Driver, error) {
	dec := codec.NewDecoderBytes(frame, packHandle)
	var rows []*model.Driver
	for dec.NumBytesRead() < len(frame) {
		var d *model.Driver
		if err := dec.Decode(&d); err != nil {
			return nil, fmt.Errorf("invalid frame: %v", err)
		}
		rows = append(rows, d)
	}
	return rows, nil
}

// checkTables fills in the tables a snapshot left out and checks their
// rows (see decodeSnapshot).
func checkTables(t *tables) error {
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
			return fmt.Errorf("worker row %q is inconsistent", id)
		}
		w.CoresUsed, w.MemoryUsedMB, w.ResourcesUsed = 0, 0, nil
		if err := model.CheckResourceOffer(w.Resources); err != nil {
			return fmt.Errorf("worker %s: %v", id, err)
		}
	}
	for id, d := range t.Drivers {
		if d == nil || d.ID != id {
			return fmt.Errorf("driver row %q is inconsistent", id)
		}
		if d.WorkerID != "" && !d.State.Terminal() {
			w, ok := t.Workers[d.WorkerID]
			if !ok {
				return fmt.Errorf("driver %s is placed on unknown worker %s", id, d.WorkerID)
			}
			w.CoresUsed += d.Cores
			w.MemoryUsedMB += d.MemoryMB
			if rec := d.CurrentAttempt(); rec != nil {
				if err := holdOnce(w, rec.Resources); err != nil {
					return fmt.Errorf("driver %s: %v", id, err)
				}
			}
			t.units(w.ID).drivers[id] = struct{}{}
		}
	}
	seen := map[string]bool{}
	for _, id := range t.WaitingDrivers {
		d, ok := t.Drivers[id]
		if !ok || seen[id] || d.WorkerID != "" || d.State.Terminal() {
			return fmt.Errorf("waiting driver %q is inconsistent", id)
		}
		seen[id] = true
	}
	for tok, id := range t.Tokens {
		d, ok := t.Drivers[id]
		if !ok {
			return fmt.Errorf("token %q names unknown driver %s", tok, id)
		}
		// Removing a driver drops the token its row names: one the row
		// does not name would outlive it.
		if d.Token != tok {
			return fmt.Errorf("token %q names driver %s, whose token is %q", tok, id, d.Token)
		}
	}
	if err := checkApps(t); err != nil {
		return err
	}
	if err := checkSequences(t); err != nil {
		return err
	}
	if err := checkNamespaces(t); err != nil {
		return err
	}
	if err := checkSchedules(t); err != nil {
		return err
	}
	t.countLive()
	t.countUse()
	return nil
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
		a, ok := t.Apps[id]
		if !ok {
			return fmt.Errorf("token %q names unknown app %s", tok, id)
		}
		if a.Token != tok {
			return fmt.Errorf("token %q names app %s, whose token is %q", tok, id, a.Token)
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
