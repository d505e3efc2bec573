package fsm

// The golden tests hold the log and the snapshots to the bytes that masters
// already wrote. testdata/golden keeps, once and for all, every command type
// encoded in both entry formats, snapshots of both versions, and the tables
// and results they give. Every later build must decode those bytes to the
// same tables, and encode the same values to the same bytes: a change to a
// payload's shape that moved a field, renamed a tag or changed a codec
// setting fails here before it reaches a log. The files are written once
// with -update-golden and never rewritten to make a test pass.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

var updateGolden = flag.Bool("update-golden", false, "write testdata/golden anew (only when adding a command type or a snapshot version)")

// goldenDir holds the golden files: log/NNN-FORMAT-TYPE (one log entry,
// raw bytes), tables.json (the tables after the whole log, as a
// SnapshotVersionJSON snapshot), results.json (what each entry's apply
// returned), snapshot-v1 and snapshot-v2 (the tables after the log in each
// snapshot version). When command types are added, the log grows and the
// top-level tables and snapshots are written anew; the ones before move,
// unchanged, to at-NNN/ (NNN: the log's length then), and go on being
// checked against the first NNN entries, so the bytes of every snapshot
// ever written stay readable.
var goldenDir = filepath.Join("testdata", "golden")

// goldenResult is one entry's apply result as results.json keeps it: the
// error's text, or the value as JSON.
type goldenResult struct {
	Index uint64          `json:"index"`
	Type  string          `json:"type"`
	Error string          `json:"error,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// formatNames name the entry formats in golden file names.
var formatNames = map[byte]string{FormatJSON: "json", FormatPack: "pack"}

// TestWriteGolden writes testdata/golden when run with -update-golden:
// scenario's log (every command type, refused and stale entries included)
// in both formats, and what it gives.
func TestWriteGolden(t *testing.T) {
	if !*updateGolden {
		t.Skip("run with -update-golden to write testdata/golden; the golden files are never rewritten to make a test pass")
	}
	logDir := filepath.Join(goldenDir, "log")
	// The at-NNN eras are kept: they are what older masters wrote.
	for _, name := range []string{"log", "tables.json", "results.json", "snapshot-v1", "snapshot-v2"} {
		if err := os.RemoveAll(filepath.Join(goldenDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, e := range scenario(t) {
		ct, p, err := Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range []byte{FormatJSON, FormatPack} {
			b, err := EncodeAs(format, p)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%03d-%s-%s", i+1, formatNames[format], ct)
			if err := os.WriteFile(filepath.Join(logDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries := goldenLog(t, FormatJSON)
	f, results := applyGolden(t, entries)
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(goldenDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tables.json", tablesJSON(t, f))
	write("results.json", results)
	write("snapshot-v1", tablesJSON(t, f))
	write("snapshot-v2", snapshotBytes(t, f))
}

// goldenLog reads the golden log entries of one format, in index order.
func goldenLog(t *testing.T, format byte) [][]byte {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(goldenDir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var entries [][]byte
	for _, de := range des {
		if strings.Split(de.Name(), "-")[1] != formatNames[format] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(goldenDir, "log", de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
	}
	if len(entries) == 0 {
		t.Fatalf("no golden %s entries", formatNames[format])
	}
	return entries
}

// applyGolden applies entries to a new FSM and returns it with the
// results.json of what each apply returned.
func applyGolden(t *testing.T, entries [][]byte) (*FSM, []byte) {
	t.Helper()
	f := New()
	var results []goldenResult
	for i, e := range entries {
		index := uint64(i + 1)
		ct, _, err := Decode(e)
		if err != nil {
			t.Fatalf("entry %d: %v", index, err)
		}
		r := goldenResult{Index: index, Type: ct.String()}
		switch v := f.ApplyCommand(index, e).(type) {
		case error:
			r.Error = v.Error()
		case nil:
		default:
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("entry %d's result: %v", index, err)
			}
			r.Value = b
		}
		results = append(results, r)
	}
	select {
	case <-f.Halted():
		t.Fatalf("the golden log halted the FSM: %v", f.Err())
	default:
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return f, append(b, '\n')
}

// tablesJSON is f's tables as a SnapshotVersionJSON snapshot, indented:
// the form tables.json and snapshot-v1 keep.
func tablesJSON(t *testing.T, f *FSM) []byte {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.MarshalIndent(snapshotFile{Version: SnapshotVersionJSON, Index: f.index, Tables: *f.t}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameBytes fails with the first line where got and want differ.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			t.Fatalf("%s differs from the golden file at line %d:\n got  %.300q\n want %.300q", what, i+1, g[i], w[i])
		}
	}
	t.Fatalf("%s differs from the golden file: %d bytes, want %d", what, len(got), len(want))
}

// TestGoldenLogGivesTheSameTables: the golden log, in each format,
// applies to the golden tables with the golden results.
func TestGoldenLogGivesTheSameTables(t *testing.T) {
	for _, format := range []byte{FormatJSON, FormatPack} {
		t.Run(formatNames[format], func(t *testing.T) {
			f, results := applyGolden(t, goldenLog(t, format))
			sameBytes(t, "the tables", tablesJSON(t, f), readGolden(t, "tables.json"))
			sameBytes(t, "the results", results, readGolden(t, "results.json"))
		})
	}
}

// TestGoldenEntriesEncodeTheSame: every golden entry decodes to a payload
// that this build encodes to the same bytes, so entries written from now
// on are those older masters read.
func TestGoldenEntriesEncodeTheSame(t *testing.T) {
	des, err := os.ReadDir(filepath.Join(goldenDir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[model.CommandType]int{}
	for _, de := range des {
		b := readGolden(t, filepath.Join("log", de.Name()))
		ct, p, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", de.Name(), err)
		}
		if !strings.HasSuffix(de.Name(), "-"+ct.String()) {
			t.Fatalf("%s decodes as a %s", de.Name(), ct)
		}
		again, err := EncodeAs(b[0], p)
		if err != nil {
			t.Fatalf("%s: %v", de.Name(), err)
		}
		sameBytes(t, de.Name(), again, b)
		seen[ct]++
	}
	// Every command type of the log is in the golden log, in both formats.
	for ct := model.CommandType(0); ct < 0x80; ct++ {
		if registered(ct) != nil && seen[ct] < 2 {
			t.Errorf("command type %s has %d golden entries, want one in each format at least", ct, seen[ct])
		}
	}
}

// TestGoldenSnapshotsRestoreTheSameTables: a snapshot of each version
// restores to the golden tables, and today's snapshot of them is the
// golden SnapshotVersion bytes; so for each earlier era (at-NNN), whose
// tables are also those of the golden log's first NNN entries.
func TestGoldenSnapshotsRestoreTheSameTables(t *testing.T) {
	eras, err := filepath.Glob(filepath.Join(goldenDir, "at-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(eras) == 0 {
		t.Fatal("no earlier era of golden snapshots (at-NNN)")
	}
	dirs := []string{"."}
	for _, e := range eras {
		dirs = append(dirs, filepath.Base(e))
	}
	for _, dir := range dirs {
		want := readGolden(t, filepath.Join(dir, "tables.json"))
		if n, ok := strings.CutPrefix(dir, "at-"); ok {
			var length int
			if _, err := fmt.Sscanf(n, "%d", &length); err != nil {
				t.Fatalf("era %s: %v", dir, err)
			}
			f, _ := applyGolden(t, goldenLog(t, FormatJSON)[:length])
			sameBytes(t, dir+": the tables of the log's first "+n+" entries", tablesJSON(t, f), want)
		}
		for _, name := range []string{"snapshot-v1", "snapshot-v2"} {
			t.Run(dir+"/"+name, func(t *testing.T) {
				f := New()
				if err := f.Restore(io.NopCloser(bytes.NewReader(readGolden(t, filepath.Join(dir, name))))); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "the restored tables", tablesJSON(t, f), want)
				sameBytes(t, "the snapshot of the restored tables", snapshotBytes(t, f), readGolden(t, filepath.Join(dir, "snapshot-v2")))
			})
		}
	}
}

// TestGoldenFilesAreComplete: the golden log holds each entry in both
// formats, numbered without a gap, so a lost file cannot shorten the log
// the other tests replay.
func TestGoldenFilesAreComplete(t *testing.T) {
	des, err := os.ReadDir(filepath.Join(goldenDir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[string][]string{}
	for _, de := range des {
		parts := strings.SplitN(de.Name(), "-", 3)
		byIndex[parts[0]] = append(byIndex[parts[0]], parts[1])
	}
	for i := 1; i <= len(byIndex); i++ {
		formats := byIndex[fmt.Sprintf("%03d", i)]
		slices.Sort(formats)
		if !slices.Equal(formats, []string{"json", "pack"}) {
			t.Fatalf("entry %d has formats %v, want json and pack", i, formats)
		}
	}
	if len(byIndex) < 50 {
		t.Fatalf("%d golden entries, want the whole scenario", len(byIndex))
	}
}
