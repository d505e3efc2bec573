package artifact

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-project/drover/model"
)

// TestMain lets the test binary stand in for a runner process that stages
// (see stageInProcess), and checks that no goroutine outlives the tests.
func TestMain(m *testing.M) {
	if os.Getenv(envHelperDir) != "" {
		os.Exit(helperStage())
	}
	goleak.VerifyTestMain(m)
}

// newStager returns a stager on a fresh cache with test timings; tune,
// when not nil, adjusts it.
func newStager(t *testing.T, tune func(*Stager)) *Stager {
	t.Helper()
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Stager{
		Cache:     c,
		Limits:    Limits{Timeout: 10 * time.Second, StallTimeout: 5 * time.Second},
		RetryBase: 10 * time.Millisecond,
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tune != nil {
		tune(s)
	}
	t.Cleanup(s.httpClient().CloseIdleConnections)
	return s
}

// normalized is the artifact a submission of source becomes.
func normalized(t *testing.T, source string) model.Artifact {
	t.Helper()
	a, err := model.NormalizeArtifact(model.Artifact{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// unitDir makes a unit directory holding a spec, as the worker leaves it.
func unitDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "attempt-1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listing is every path under dir, relative, with a type mark: "/" for a
// directory, "@TARGET" for a symlink, and the mode for a file.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			rel += "/"
		case fi.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			rel += "@" + to
		default:
			rel += " " + fi.Mode().Perm().String()
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertUnchanged fails unless dir holds only the spec a unit directory
// starts with, and its parent only dir.
func assertUnchanged(t *testing.T, dir string) {
	t.Helper()
	if got := listing(t, dir); !slices.Equal(got, []string{"spec.json -rw-------"}) {
		t.Fatalf("a failed staging left %v", got)
	}
	if des, _ := os.ReadDir(filepath.Dir(dir)); len(des) != 1 {
		t.Fatalf("a failed staging wrote beside the unit's directory: %v", des)
	}
}

// assertNoEntry fails if the cache holds an entry or a download in
// flight.
func assertNoEntry(t *testing.T, c *Cache) {
	t.Helper()
	for _, d := range []string{entriesDir, tmpDir} {
		if des, _ := os.ReadDir(filepath.Join(c.Dir(), d)); len(des) > 0 {
			t.Fatalf("cache %s holds %s", d, des[0].Name())
		}
	}
}

// server serves files by path and counts requests per path; a handler in
// handle overrides a path.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	files  map[string][]byte
	handle map[string]http.HandlerFunc
	hits   map[string]int
}

func newServer(t *testing.T) *server {
	s := &server{files: map[string][]byte{}, handle: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		h := s.handle[r.URL.Path]
		body, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		switch {
		case h != nil:
			h(w, r)
		case ok:
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(p string, b []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = b
	return s.URL + p
}

func (s *server) on(p string, h http.HandlerFunc) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle[p] = h
	return s.URL + p
}

func (s *server) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[p]
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body string
	mode       int64
	// kind is a tar type flag; zero means a regular file.
	kind     byte
	linkname string
}

// tarGz is tarOf, gzipped.
func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(tarOf(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarOf is an uncompressed tar archive of entries.
func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: e.kind, Linkname: e.linkname, ModTime: time.Unix(1700000000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil && h.Size > 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipEntry is one entry of a test zip; a mode with fs.ModeSymlink makes
// body the link's target.
type zipEntry struct {
	name, body string
	mode       fs.FileMode
}

func zipOf(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		if strings.HasSuffix(e.name, "/") {
			mode |= fs.ModeDir
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// stage stages as into a fresh unit directory and returns it.
func stage(t *testing.T, s *Stager, as ...model.Artifact) (string, *Staged, error) {
	t.Helper()
	dir := unitDir(t)
	st, err := s.Stage(context.Background(), dir, as)
	t.Cleanup(st.Release)
	return dir, st, err
}

// mustStage is stage that fails the test on an error.
func mustStage(t *testing.T, s *Stager, as ...model.Artifact) (string, *Staged) {
	t.Helper()
	dir, st, err := stage(t, s, as...)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

// assertFails fails unless staging as fails with exactly want, leaving
// the unit directory and the cache as they were.
func assertFails(t *testing.T, s *Stager, want string, as ...model.Artifact) {
	t.Helper()
	dir, _, err := stage(t, s, as...)
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	assertUnchanged(t, dir)
}
