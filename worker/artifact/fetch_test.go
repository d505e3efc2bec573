package artifact

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
)

const script = "#!/bin/sh\necho hello\n"

func TestStagesVerifiedFileAndCachesIt(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.sh", []byte(script))
	plain := srv.serve("/data.txt", []byte("some data\n"))
	s := newStager(t, nil)
	a := normalized(t, url+"?checksum=sha256:"+sum([]byte(script)))
	dir, st := mustStage(t, s, a, normalized(t, plain))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "data.txt -rw-r--r--", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.sh")); string(b) != script {
		t.Fatalf("app.sh = %q", b)
	}
	if st.Fetched != 2 {
		t.Fatalf("fetched %d, want 2", st.Fetched)
	}
	// The program owns its copy: changing it leaves the cache alone.
	if err := os.WriteFile(filepath.Join(dir, "app.sh"), []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A checksum makes the artifact a cache hit; a URL without one is
	// fetched each time it is staged.
	dir2, st2 := mustStage(t, s, a, normalized(t, plain))
	if b, _ := os.ReadFile(filepath.Join(dir2, "app.sh")); string(b) != script {
		t.Fatalf("second app.sh = %q", b)
	}
	if n, m := srv.count("/app.sh"), srv.count("/data.txt"); n != 1 || m != 2 || st2.Fetched != 1 {
		t.Fatalf("requests: app.sh %d (want 1), data.txt %d (want 2); fetched %d", n, m, st2.Fetched)
	}
}

func TestModes(t *testing.T) {
	srv := newServer(t)
	elf := srv.serve("/tool", []byte("\x7fELF\x02\x01\x01"))
	s := newStager(t, nil)
	up := model.Artifact{Upload: sum([]byte("x")), Name: "conf", Mode: 0o600}
	up, err := model.NormalizeArtifact(up)
	if err != nil {
		t.Fatal(err)
	}
	s.Blobs = blobs{up.Upload: []byte("x")}
	dir, _ := mustStage(t, s, normalized(t, elf), up)
	if got, want := listing(t, dir), []string{"conf -rw-------", "spec.json -rw-------", "tool -rwxr-xr-x"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
}

func TestChecksumMismatch(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.sh", []byte(script))
	s := newStager(t, nil)
	wrong := sum([]byte("something else"))
	assertFails(t, s, "fetch "+url+": checksum mismatch: want "+wrong+", got "+sum([]byte(script)),
		normalized(t, url+"?checksum=sha256:"+wrong))
	assertNoEntry(t, s.Cache)
	if n := srv.count("/app.sh"); n != 1 {
		t.Fatalf("%d requests: a mismatch is not retried", n)
	}
}

// 5xx, 408 and 429 are tried again, each failed try told to OnRetry
// with its pause; any other status ends the fetch at its first answer.
func TestRetriesServerErrorsOnly(t *testing.T) {
	srv := newServer(t)
	statuses := []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout}
	url := srv.on("/app.sh", func(w http.ResponseWriter, r *http.Request) {
		if n := srv.count("/app.sh"); n <= len(statuses) {
			w.WriteHeader(statuses[n-1])
			return
		}
		w.Write([]byte(script))
	})
	var logged pauses
	var mu sync.Mutex
	var told []string
	s := newStager(t, func(s *Stager) {
		s.Log = slog.New(&logged)
		s.OnRetry = func(r Retry) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, r.String())
		}
	})
	dir, _ := mustStage(t, s, normalized(t, url))
	if b, _ := os.ReadFile(filepath.Join(dir, "app.sh")); string(b) != script {
		t.Fatalf("app.sh = %q", b)
	}
	if n := srv.count("/app.sh"); n != 5 {
		t.Fatalf("%d requests, want 5", n)
	}
	// The pause before each retry doubles from RetryBase (10 ms).
	if got, want := logged.all(), []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("paused %v before the retries, want %v", got, want)
	}
	want := []string{
		"fetching " + url + ": 500 Internal Server Error, try 1, next in 10ms",
		"fetching " + url + ": 503 Service Unavailable, try 2, next in 20ms",
		"fetching " + url + ": 429 Too Many Requests, try 3, next in 40ms",
		"fetching " + url + ": 408 Request Timeout, try 4, next in 80ms",
	}
	if !slices.Equal(told, want) {
		t.Fatalf("OnRetry was told\n%s\nwant\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}

	told = nil
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusGone, http.StatusBadRequest, http.StatusUnauthorized} {
		p := "/" + strconv.Itoa(status)
		url := srv.on(p, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
		assertFails(t, s, fmt.Sprintf("fetch %s: %d %s", url, status, http.StatusText(status)), normalized(t, url))
		if n := srv.count(p); n != 1 {
			t.Fatalf("%d: %d requests, want 1 (no retry)", status, n)
		}
	}
	if len(told) != 0 {
		t.Fatalf("OnRetry told of a failure that is not retried: %q", told)
	}
}

// A redirection to a scheme other than http and https ends the fetch at
// once, naming it, rather than being retried as a failed connection
// until the deadline.
func TestRedirectToAnotherSchemeIsNotRetried(t *testing.T) {
	srv := newServer(t)
	url := srv.on("/app.sh", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://files.example/app.sh", http.StatusFound)
	})
	s := newStager(t, func(s *Stager) { s.Limits.Timeout = 5 * time.Second })
	assertFails(t, s, "fetch "+url+": redirected to a scheme other than http and https: ftp://files.example/app.sh", normalized(t, url))
	if n := srv.count("/app.sh"); n != 1 {
		t.Fatalf("%d requests, want 1 (no retry)", n)
	}
}

// A connection refused is retried until the deadline, which the error
// names with the last cause.
func TestRetriesConnectionErrorsUntilDeadline(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.sh", []byte(script))
	srv.Close()
	s := newStager(t, func(s *Stager) { s.Limits.Timeout = 300 * time.Millisecond })
	dir, _, err := stage(t, s, normalized(t, url))
	if err == nil || !errors.Is(err, ErrTimedOut) ||
		!strings.HasPrefix(err.Error(), "fetch "+url+": timed out after 300ms (") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	assertUnchanged(t, dir)
}

func TestStallTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t)
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	silent := srv.on("/silent", hang)
	halfway := srv.on("/halfway", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write(make([]byte, 50))
		w.(http.Flusher).Flush()
		hang(w, r)
	})
	// Slower than the stall timeout in all (1 s against 0.5 s), but
	// never silent that long: the gaps are 40 ms, with room for a loaded
	// machine's scheduling delays.
	steady := srv.on("/steady", func(w http.ResponseWriter, r *http.Request) {
		for range 25 {
			w.Write([]byte(script[:2]))
			w.(http.Flusher).Flush()
			time.Sleep(40 * time.Millisecond)
		}
	})
	s := newStager(t, func(s *Stager) {
		s.Limits.StallTimeout = 100 * time.Millisecond
		s.Limits.Timeout = time.Second
	})
	mustStage(t, newStager(t, func(ns *Stager) { ns.Limits.StallTimeout, ns.Limits.Timeout = 500*time.Millisecond, 10*time.Second }), normalized(t, steady))
	if n := srv.count("/steady"); n != 1 {
		t.Fatalf("a steady download was tried %d times", n)
	}
	for _, url := range []string{silent, halfway} {
		start := time.Now()
		dir, _, err := stage(t, s, normalized(t, url))
		want := "fetch " + url + ": timed out after 1s ("
		if err == nil || !errors.Is(err, ErrTimedOut) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "last: timed out: no data for 100ms") {
			t.Fatalf("err = %v, want %s... last: timed out: no data for 100ms", err, want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("took %s", took)
		}
		assertUnchanged(t, dir)
		assertNoEntry(t, s.Cache)
	}
}

func TestTooLarge(t *testing.T) {
	srv := newServer(t)
	big := bytes.Repeat([]byte("x"), 2000)
	// It announces its size, then sends nothing: only a check of
	// Content-Length before reading refuses it at once.
	announced := srv.on("/announced", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	chunked := srv.on("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for range 4 {
			w.Write(big[:500])
			w.(http.Flusher).Flush()
		}
	})
	file := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(file, big, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStager(t, func(s *Stager) { s.Limits.MaxSize = 1000 })
	for _, url := range []string{announced, chunked, "file://" + file} {
		assertFails(t, s, "fetch "+url+": too large: more than 1000 B", normalized(t, url))
	}
	if a, c := srv.count("/announced"), srv.count("/chunked"); a != 1 || c != 1 {
		t.Fatalf("requests %d, %d: too large is not retried", a, c)
	}
	assertNoEntry(t, s.Cache)
}

// A body cut off half-way is retried and never becomes an entry.
func TestCutOffBodyLeavesNoEntry(t *testing.T) {
	srv := newServer(t)
	url := srv.on("/app.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write(make([]byte, 500))
		// Returning with the body short closes the connection.
	})
	s := newStager(t, func(s *Stager) { s.Limits.Timeout = 300 * time.Millisecond })
	dir, _, err := stage(t, s, normalized(t, url))
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("err = %v", err)
	}
	if n := srv.count("/app.tar.gz"); n < 2 {
		t.Fatalf("%d requests: a cut-off body is retried", n)
	}
	assertUnchanged(t, dir)
	assertNoEntry(t, s.Cache)
}

func TestFileURL(t *testing.T) {
	src := filepath.Join(t.TempDir(), "app.sh")
	if err := os.WriteFile(src, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, normalized(t, "file://"+src+"?checksum=sha256:"+sum([]byte(script))))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	other := "file://" + src + "?checksum=sha256:" + sum([]byte("x"))
	assertFails(t, s, "fetch file://"+src+": checksum mismatch: want "+sum([]byte("x"))+", got "+sum([]byte(script)), normalized(t, other))
	assertFails(t, s, "fetch file:///nonexistent/app.sh: no such file or directory", normalized(t, "file:///nonexistent/app.sh"))
	assertFails(t, s, "fetch file://"+filepath.Dir(src)+"/: not a regular file",
		normalized(t, "file://"+filepath.Dir(src)+"/?archive=tar"))
}

// blobs is a store of uploads in memory.
type blobs map[string][]byte

func (b blobs) OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error) {
	body, ok := b[sum]
	if !ok {
		return nil, fmt.Errorf("%w %s: no master holds it", api.ErrUnknownBlob, sum)
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

// flaky fails with client.ErrNoMaster until its count runs out.
type flaky struct {
	blobs
	fails int
}

func (f *flaky) OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error) {
	if f.fails > 0 {
		f.fails--
		return nil, fmt.Errorf("%w: m1: connection refused", client.ErrNoMaster)
	}
	return f.blobs.OpenBlob(ctx, sum)
}

func TestUploads(t *testing.T) {
	good := []byte(script)
	up := func(sum string) model.Artifact {
		a, err := model.NormalizeArtifact(model.Artifact{Upload: sum, Name: "app.sh"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	s := newStager(t, func(s *Stager) { s.Blobs = &flaky{blobs: blobs{sum(good): good, sum([]byte("x")): good}, fails: 2} })
	dir, _ := mustStage(t, s, up(sum(good)))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	other := sum([]byte("other"))
	assertFails(t, s, "fetch upload:"+other+" (app.sh): no master holds it", up(other))
	// A master that serves other bytes than it was asked for.
	assertFails(t, s, "fetch upload:"+sum([]byte("x"))+" (app.sh): checksum mismatch: want "+sum([]byte("x"))+", got "+sum(good), up(sum([]byte("x"))))
}

// A stop (ctx cancelled) ends a staging at once, whatever it waits for.
func TestCancelEndsStaging(t *testing.T) {
	srv := newServer(t)
	arrived := make(chan struct{})
	url := srv.on("/app.sh", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	s := newStager(t, nil)
	dir := unitDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		st, err := s.Stage(ctx, dir, []model.Artifact{normalized(t, url)})
		st.Release()
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertUnchanged(t, dir)
	assertNoEntry(t, s.Cache)
}

// A server that labels a .tar.gz as gzip-encoded (a common mistake) still
// gives the bytes as stored, which the checksum names.
func TestKeepsContentEncodedBytes(t *testing.T) {
	srv := newServer(t)
	tgz := tarGz(t, tarEntry{name: "app.sh", body: script, mode: 0o755})
	url := srv.on("/app.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(tgz)
	})
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, normalized(t, url+"?checksum=sha256:"+sum(tgz)))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
}

// A server whose certificate the worker does not trust fails the fetch at
// once, naming the cause, rather than being tried again until the
// deadline.
func TestUntrustedCertificateIsNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(script)) }))
	t.Cleanup(srv.Close)
	s := newStager(t, func(s *Stager) { s.Limits.Timeout = time.Minute })
	_, _, err := stage(t, s, normalized(t, srv.URL+"/app.sh"))
	if err == nil || errors.Is(err, ErrTimedOut) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err = %v, want the certificate error at once", err)
	}
}

// An https artifact from a server whose certificate the worker's client
// trusts is fetched, verified and staged with its mode.
func TestHTTPSWithTrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/app.sh" || r.TLS == nil {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(script))
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := NewHTTPClient("127.0.0.1")
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
	s := newStager(t, func(s *Stager) { s.HTTP = c })
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("server URL %s", srv.URL)
	}
	dir, st := mustStage(t, s, normalized(t, srv.URL+"/app.sh?checksum=sha256:"+sum([]byte(script))))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.sh")); string(b) != script || st.Fetched != 1 {
		t.Fatalf("app.sh = %q, fetched %d", b, st.Fetched)
	}
}

// pauses is a log handler that keeps the pause of each retry a stager
// logs.
type pauses struct {
	mu  sync.Mutex
	got []time.Duration
}

func (p *pauses) Enabled(context.Context, slog.Level) bool { return true }

func (p *pauses) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "pause" {
			p.mu.Lock()
			p.got = append(p.got, a.Value.Duration())
			p.mu.Unlock()
		}
		return true
	})
	return nil
}

func (p *pauses) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *pauses) WithGroup(string) slog.Handler      { return p }

func (p *pauses) all() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// The pause between tries doubles from the default base, 1 s, and stays
// at 30 s once it gets there, as docs/artifacts.md says.
func TestRetryPauseDoublesToItsCap(t *testing.T) {
	var got []time.Duration
	for p, i := DefaultRetryBase, 0; i < 8; p, i = nextPause(p), i+1 {
		got = append(got, p)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
}

// With Scratch and Owner, as a root runner stages for a program run as
// another user: the tree is built in the scratch directory, never in the
// unit's, and every staged entry (files, directories, an archive's
// symlink) belongs to the owner when it appears in the unit's directory.
func TestStagesAsTheOwnerThroughScratch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	srv := newServer(t)
	file := srv.serve("/app.sh", []byte(script))
	arch := srv.serve("/lib.tgz", tarGz(t, tarEntry{name: "lib/a.jar", body: "a"}, tarEntry{name: "lib/current", kind: tar.TypeSymlink, linkname: "a.jar"}))
	scratch := t.TempDir()
	owner := Owner{UID: 65534, GID: 65533}
	s := newStager(t, func(s *Stager) { s.Scratch, s.Owner = scratch, &owner })
	dir, _ := mustStage(t, s, normalized(t, file), normalized(t, arch))
	if got, want := listing(t, dir), []string{"app.sh -rwxr-xr-x", "lib/", "lib/a.jar -rw-r--r--", "lib/current@a.jar", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	for _, rel := range []string{"app.sh", "lib", "lib/a.jar", "lib/current"} {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != owner.UID || int(st.Gid) != owner.GID {
			t.Errorf("%s is owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, owner.UID, owner.GID)
		}
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "spec.json")); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the staging gave away a file it did not stage")
	}
	if des, _ := os.ReadDir(scratch); len(des) != 0 {
		t.Fatalf("the staging left %s in its scratch directory", des[0].Name())
	}
}
