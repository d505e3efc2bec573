package artifact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
)

// Environment of the helper process that TestMain runs instead of the
// tests: it stages the artifact normalized from envHelperSource into
// envHelperDir through the cache in envHelperCache, logging to stderr.
const (
	envHelperDir    = "ARTIFACT_TEST_DIR"
	envHelperCache  = "ARTIFACT_TEST_CACHE"
	envHelperSource = "ARTIFACT_TEST_SOURCE"
)

// failSafe bounds every wait on another process; no test relies on it
// for ordering.
const failSafe = 30 * time.Second

func helperStage() int {
	c, err := OpenCache(os.Getenv(envHelperCache))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a, err := model.NormalizeArtifact(model.Artifact{Source: os.Getenv(envHelperSource)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := &Stager{Cache: c, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	st, err := s.Stage(context.Background(), os.Getenv(envHelperDir), []model.Artifact{a})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st.Release()
	return 0
}

// helper is a process staging one artifact, as a runner does.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startHelper(t *testing.T, cache, dir, source string) *helper {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envHelperCache+"="+cache, envHelperDir+"="+dir, envHelperSource+"="+source)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-h.done
		cmd.Wait()
	})
	return h
}

// await waits for a line of the helper's log that contains s.
func (h *helper) await(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case l := <-h.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-deadline:
			t.Fatalf("the helper never logged %q", s)
		}
	}
}

func (h *helper) wait(t *testing.T) {
	t.Helper()
	<-h.done
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("staging process: %v", err)
	}
}

// Two processes staging the same artifact at once make one request: the
// second waits for the first's download and takes it, with a checksum and
// without.
func TestConcurrentProcessesFetchOnce(t *testing.T) {
	for _, checksum := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum=%v", checksum), func(t *testing.T) {
			srv := newServer(t)
			arrived := make(chan struct{}, 10)
			release := make(chan struct{})
			source := srv.on("/app.sh", func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-release
				w.Write([]byte(script))
			})
			if checksum {
				source += "?checksum=sha256:" + sum([]byte(script))
			}
			cache := filepath.Join(t.TempDir(), "cache")
			dirs := []string{unitDir(t), unitDir(t)}
			first := startHelper(t, cache, dirs[0], source)
			select {
			case <-arrived:
			case <-time.After(failSafe):
				t.Fatal("the first process never asked the server")
			}
			second := startHelper(t, cache, dirs[1], source)
			second.await(t, "waiting for another process's download")
			close(release)
			first.wait(t)
			second.wait(t)
			if n := srv.count("/app.sh"); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
			for _, d := range dirs {
				if b, err := os.ReadFile(filepath.Join(d, "app.sh")); err != nil || string(b) != script {
					t.Fatalf("%s: app.sh = %q, %v", d, b, err)
				}
			}
		})
	}
}

// A later staging of a URL without a checksum fetches it again: only a
// download in flight is shared.
func TestURLWithoutChecksumIsFetchedEachTime(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.sh", []byte(script))
	s := newStager(t, nil)
	for range 3 {
		mustStage(t, s, normalized(t, url))
	}
	if n := srv.count("/app.sh"); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

// entries lists the cache's entries.
func entries(t *testing.T, c *Cache) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(c.Dir(), entriesDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// Trim evicts the least recently used entries, never one a live staging
// pins, and a use makes an entry recent again.
func TestTrimEvictsLeastRecentlyUsedUnpinned(t *testing.T) {
	srv := newServer(t)
	s := newStager(t, nil)
	var as []model.Artifact
	var sums []string
	for i, name := range []string{"a", "b", "c", "d"} {
		body := []byte(strings.Repeat(name, 100))
		as = append(as, normalized(t, srv.serve("/"+name, body)+"?checksum=sha256:"+sum(body)))
		sums = append(sums, sum(body))
		_, st := mustStage(t, s, as[i])
		// Uses a second apart, so their order does not hang on the
		// clock's resolution.
		old := time.Now().Add(time.Duration(i-10) * time.Second)
		os.Chtimes(filepath.Join(s.Cache.Dir(), entriesDir, sums[i]), old, old)
		if name != "b" {
			st.Release()
		}
	}
	// "a" is used again, so "c" is now the least recently used unpinned.
	_, st := mustStage(t, s, as[0])
	st.Release()
	res, err := s.Cache.Trim(250)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TrimResult{Removed: 2, Freed: 200, Kept: 200, Pinned: 100}); res != want {
		t.Fatalf("trim = %+v, want %+v", res, want)
	}
	want := []string{sums[0], sums[1]}
	slices.Sort(want)
	if got := entries(t, s.Cache); !slices.Equal(got, want) {
		t.Fatalf("kept %v, want a (recent) and b (pinned): %v", got, want)
	}
	if _, err := s.Cache.Trim(0); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, s.Cache); !slices.Equal(got, []string{sums[1]}) {
		t.Fatalf("trim to 0 kept %v, want only the pinned b", got)
	}
}

// Free evicts the least recently used unpinned entries until it has
// freed what it was asked for, whatever the cache's size.
func TestFreeEvictsUntilEnoughIsFreed(t *testing.T) {
	srv := newServer(t)
	s := newStager(t, nil)
	var sums []string
	for i, name := range []string{"a", "b", "c", "d"} {
		body := []byte(strings.Repeat(name, 100))
		a := normalized(t, srv.serve("/"+name, body)+"?checksum=sha256:"+sum(body))
		sums = append(sums, sum(body))
		_, st := mustStage(t, s, a)
		old := time.Now().Add(time.Duration(i-10) * time.Second)
		os.Chtimes(filepath.Join(s.Cache.Dir(), entriesDir, sums[i]), old, old)
		if name != "a" {
			st.Release()
		}
	}
	// "a", the oldest, is pinned: "b" and "c" go, "d" stays.
	res, err := s.Cache.Free(context.Background(), 150)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TrimResult{Removed: 2, Freed: 200, Kept: 200, Pinned: 100}); res != want {
		t.Fatalf("free = %+v, want %+v", res, want)
	}
	want := []string{sums[0], sums[3]}
	slices.Sort(want)
	if got := entries(t, s.Cache); !slices.Equal(got, want) {
		t.Fatalf("kept %v, want a (pinned) and d (recent): %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := s.Cache.Free(ctx, 1); !errors.Is(err, context.Canceled) || res.Removed != 0 {
		t.Fatalf("free with an ended context = %+v, %v", res, err)
	}
}

// Trim removes what a process that died while downloading left behind,
// but not the download of a live one.
func TestTrimSweepsLeftovers(t *testing.T) {
	s := newStager(t, nil)
	c := s.Cache
	dead := filepath.Join(c.Dir(), tmpDir, "sha256-dead.123")
	live := filepath.Join(c.Dir(), tmpDir, "sha256-live.456")
	staleLock := filepath.Join(c.Dir(), locksDir, "sha256-dead")
	for _, p := range []string{dead, live, staleLock} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := lockKey(context.Background(), filepath.Join(c.Dir(), locksDir, "sha256-live"), func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer l.unlock()
	if _, err := c.Trim(0); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{dead: false, staleLock: false, live: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists = %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// A cache entry whose bytes were changed on disk is not staged: its digest
// is checked again at each use, and a mismatch removes it and fetches the
// artifact anew. The same holds for a URL without a checksum that another
// process's download put in the cache.
func TestTamperedEntryIsFetchedAgain(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.sh", []byte(script))
	s := newStager(t, nil)
	a := normalized(t, url+"?checksum=sha256:"+sum([]byte(script)))
	mustStage(t, s, a)
	entry := s.Cache.entryPath(sum([]byte(script)))
	tampered := strings.Replace(script, "hello", "pwned", 1)
	if err := os.Chmod(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, st := mustStage(t, s, a)
	if b, _ := os.ReadFile(filepath.Join(dir, "app.sh")); string(b) != script {
		t.Fatalf("staged %q from a tampered entry; want the artifact's own bytes", b)
	}
	if n := srv.count("/app.sh"); n != 2 || st.Fetched != 1 {
		t.Fatalf("requests %d, fetched %d; want the tampered entry fetched again (2 requests, 1 fetched)", n, st.Fetched)
	}
	if b, _ := os.ReadFile(entry); string(b) != script {
		t.Fatalf("cache entry holds %q after the refetch", b)
	}
}
