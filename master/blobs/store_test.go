package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// open opens the store in dir with a bound of max bytes on a file and of
// 1 GiB on the store.
func open(t *testing.T, dir string, max int64) *Store {
	t.Helper()
	s, err := Open(dir, max, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// names lists the directory's entries, temp files included.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// assertNothingKept checks that dir holds exactly the files want, and no
// temp file.
func assertNothingKept(t *testing.T, s *Store, dir string, want ...string) {
	t.Helper()
	got := names(t, dir)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("store dir holds %v, want %v", got, want)
	}
	if files, _ := s.Usage(); files != len(want) {
		t.Fatalf("Usage counts %d files, want %d", files, len(want))
	}
}

func TestPutReadBack(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	body := []byte("#!/bin/sh\necho hello\n")
	sum := digest(body)
	info, fresh, err := s.Put(sum, int64(len(body)), bytes.NewReader(body))
	if err != nil || !fresh || info.Size != int64(len(body)) || info.SHA256 != sum {
		t.Fatalf("Put = %+v, %v, %v", info, fresh, err)
	}
	f, got, err := s.File(sum)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if !bytes.Equal(b, body) || got.Size != info.Size {
		t.Fatalf("File read %q (%+v), want %q", b, got, body)
	}
	if files, n := s.Usage(); files != 1 || n != int64(len(body)) {
		t.Fatalf("Usage = %d files, %d bytes", files, n)
	}
	mode, _ := os.Stat(filepath.Join(dir, sum))
	if mode.Mode().Perm() != 0o600 {
		t.Fatalf("stored file mode %v, want 0600", mode.Mode().Perm())
	}
}

// A file held already is not read again, and its stored time restarts.
func TestPutAgainReadsNothing(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	body := []byte("data")
	sum := digest(body)
	first, _, err := s.Put(sum, -1, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	old := first.Stored.Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(s.dir, sum), old, old); err != nil {
		t.Fatal(err)
	}
	info, fresh, err := s.Put(sum, int64(len(body)), errReader{})
	if err != nil || fresh {
		t.Fatalf("second Put = %v, %v; want no error and not fresh", fresh, err)
	}
	if !info.Stored.After(old.Add(30 * time.Minute)) {
		t.Fatalf("stored time %v was not refreshed from %v", info.Stored, old)
	}
	if _, _, err := s.Put(sum, 99, errReader{}); !errors.Is(err, api.ErrInvalidRequest) {
		t.Fatalf("a held file with another declared size: %v, want invalid request", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }

func TestPutRefusals(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 100)
	good := bytes.Repeat([]byte("x"), 100)
	big := bytes.Repeat([]byte("y"), 101)
	for _, tc := range []struct {
		name string
		sum  string
		size int64
		body io.Reader
		want error
		text string
	}{
		{"not hex", "../../etc/passwd", -1, bytes.NewReader(good), api.ErrInvalidRequest, "not a SHA-256"},
		{"upper case", strings.ToUpper(digest(good)), -1, bytes.NewReader(good), api.ErrInvalidRequest, "lowercase"},
		{"digest mismatch", digest([]byte("other")), -1, bytes.NewReader(good), api.ErrInvalidRequest, "hashes to " + digest(good)},
		{"declared oversize", digest(big), 101, errReader{}, api.ErrTooLarge, "bound of 100 bytes"},
		{"oversize while reading", digest(big), -1, bytes.NewReader(big), api.ErrTooLarge, "bound of 100 bytes"},
		{"shorter than declared", digest(good[:50]), 60, bytes.NewReader(good[:50]), api.ErrInvalidRequest, "not the 60 declared"},
		{"interrupted", digest(good), 100, io.MultiReader(bytes.NewReader(good[:40]), &failing{}), api.ErrInvalidRequest, "interrupted after 40 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Put(tc.sum, tc.size, tc.body)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Put: %v, want one line wrapping %v with %q", err, tc.want, tc.text)
			}
			assertNothingKept(t, s, dir)
		})
	}
}

type failing struct{}

func (*failing) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// A write in progress is a temp file until its digest is checked; a crash
// leaves it behind, and the next Open removes it and keeps the rest.
func TestReopenServesSameFileAndDropsTemps(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	body := bytes.Repeat([]byte("abc"), 1000)
	sum := digest(body)
	if _, _, err := s.Put(sum, int64(len(body)), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan error)
	go func() {
		_, _, err := s.Put(digest([]byte("never finished")), -1, pr)
		done <- err
	}()
	if _, err := pw.Write([]byte("never")); err != nil {
		t.Fatal(err)
	}
	// The bytes are in a temp file now, unnamed until verified. A crash
	// would leave such a file behind: make one that stays.
	var temp string
	for _, n := range names(t, dir) {
		if strings.HasPrefix(n, tempPrefix) {
			temp = n
		}
	}
	if temp == "" {
		t.Fatalf("no temp file while a write is under way: %v", names(t, dir))
	}
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"crashed"), []byte("never"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw.CloseWithError(io.ErrUnexpectedEOF)
	if err := <-done; !errors.Is(err, api.ErrInvalidRequest) {
		t.Fatalf("interrupted Put: %v", err)
	}

	s2 := open(t, dir, 1<<20)
	assertNothingKept(t, s2, dir, sum)
	f, info, err := s2.File(sum)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if !bytes.Equal(b, body) || info.Size != int64(len(body)) {
		t.Fatal("the reopened store serves other bytes")
	}
	list, err := s2.List()
	if err != nil || len(list) != 1 || list[0].SHA256 != sum || list[0].Size != int64(len(body)) {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestDeleteKeepsWhatIsNewer(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	body := []byte("gone soon")
	sum := digest(body)
	info, _, err := s.Put(sum, -1, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Delete(sum, info.Stored); ok || err != nil {
		t.Fatalf("Delete of a file stored at the cutoff = %v, %v; want kept", ok, err)
	}
	if ok, err := s.Delete(sum, info.Stored.Add(time.Second)); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	assertNothingKept(t, s, dir)
	if _, err := s.Stat(sum); !errors.Is(err, api.ErrUnknownBlob) {
		t.Fatalf("Stat after Delete: %v, want unknown blob", err)
	}
	if ok, err := s.Delete(sum, time.Now()); ok || err != nil {
		t.Fatalf("Delete of a missing file = %v, %v", ok, err)
	}
	if _, _, err := s.File(sum); !errors.Is(err, api.ErrUnknownBlob) {
		t.Fatalf("File after Delete: %v", err)
	}
}

// An empty file is a file like any other.
func TestPutEmpty(t *testing.T) {
	s := open(t, t.TempDir(), 1)
	sum := digest(nil)
	if info, fresh, err := s.Put(sum, 0, bytes.NewReader(nil)); err != nil || !fresh || info.Size != 0 {
		t.Fatalf("Put of an empty file = %+v, %v, %v", info, fresh, err)
	}
	if info, err := s.Stat(sum); err != nil || info.Size != 0 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
}

func TestOpenRefusesNoBound(t *testing.T) {
	if _, err := Open(t.TempDir(), 0, 1); err == nil {
		t.Fatal("Open with a bound of 0 on a file succeeded")
	}
	if _, err := Open(t.TempDir(), 1, 0); err == nil {
		t.Fatal("Open with a bound of 0 on the store succeeded")
	}
}

// The store holds at most its bound in bytes, counting the writes in
// progress: a file that would pass it is refused 507 naming the bound,
// before its bytes are read when its declared size says so, while they
// are read otherwise, and leaves no temp file; at the bound exactly it is
// taken; a deletion makes room again.
func TestPutBoundsTheStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	put := func(body []byte, declared bool, r io.Reader) error {
		size := int64(-1)
		if declared {
			size = int64(len(body))
		}
		if r == nil {
			r = bytes.NewReader(body)
		}
		_, _, err := s.Put(digest(body), size, r)
		return err
	}
	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, api.ErrNoStorage) || !strings.Contains(err.Error(), "--max-upload-store of 100 bytes") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: %v, want one line wrapping ErrNoStorage naming the bound", what, err)
		}
	}
	a := bytes.Repeat([]byte("a"), 60)
	if err := put(a, true, nil); err != nil {
		t.Fatal(err)
	}
	// A write in progress holds its declared length.
	b := bytes.Repeat([]byte("b"), 30)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- put(b, true, pr) }()
	if _, err := pw.Write(b[:10]); err != nil {
		t.Fatal(err)
	}
	c := bytes.Repeat([]byte("c"), 11)
	err = put(c, true, errReader{})
	full("a declared file past the bound while another is written", err)
	if !strings.Contains(err.Error(), "(60 stored, 30 being written)") {
		t.Fatalf("the refusal does not say what the store holds: %v", err)
	}
	full("a file without a length past the bound while another is written", put(c, false, nil))
	if _, err := pw.Write(b[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	assertNothingKept(t, s, dir, sortedNames(digest(a), digest(b))...)

	full("a declared file one byte past the bound", put(c, true, errReader{}))
	full("a file without a length one byte past the bound", put(c, false, nil))
	assertNothingKept(t, s, dir, sortedNames(digest(a), digest(b))...)
	if _, n := s.Usage(); n != 90 {
		t.Fatalf("Usage counts %d bytes after the refusals, want 90", n)
	}
	// A file held already needs no room.
	if _, _, err := s.Put(digest(a), 60, errReader{}); err != nil {
		t.Fatalf("a file held already, at the bound: %v", err)
	}
	if err := put(c[:10], false, nil); err != nil {
		t.Fatalf("a file that fills the store to its bound: %v", err)
	}
	if ok, err := s.Delete(digest(a), time.Now().Add(time.Hour)); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if err := put(c, true, nil); err != nil {
		t.Fatalf("a file after a deletion made room: %v", err)
	}
}

// sortedNames is names in the order a directory lists them.
func sortedNames(names ...string) []string {
	slices.Sort(names)
	return names
}

// A master restarted counts the files its store holds against the bound
// again: after a reopen, a store filled to 100 bytes by files kept from
// before refuses one byte more and takes a file once one is deleted.
func TestReopenedStoreKeepsItsBound(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte("a"), 60), bytes.Repeat([]byte("b"), 40)
	for _, body := range [][]byte{a, b} {
		if _, _, err := s.Put(digest(body), int64(len(body)), bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = Open(dir, 100, 100); err != nil {
		t.Fatal(err)
	}
	c := []byte("c")
	if _, _, err := s.Put(digest(c), 1, bytes.NewReader(c)); !errors.Is(err, api.ErrNoStorage) {
		t.Fatalf("one byte past the bound after a reopen: %v, want ErrNoStorage", err)
	}
	if ok, err := s.Delete(digest(b), time.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	if _, _, err := s.Put(digest(c), 1, bytes.NewReader(c)); err != nil {
		t.Fatalf("after a deletion: %v", err)
	}
}
