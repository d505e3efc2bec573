package blobsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/blobs"
)

type counts struct{ pulled, deleted atomic.Int32 }

func (c *counts) BlobPulled()  { c.pulled.Add(1) }
func (c *counts) BlobDeleted() { c.deleted.Add(1) }

// replicas returns a Replicas over a fresh store in dir, with cfg's
// functions defaulted to: no voters, nothing live, current tables; the
// grace is cfg's (0: none).
func replicas(t *testing.T, dir string, cfg Config) (*Replicas, *counts) {
	t.Helper()
	return replicasLogging(t, dir, 1<<30, cfg, io.Discard)
}

// replicasLogging is replicas with a bound of storeMax bytes on the store
// and the log going to log.
func replicasLogging(t *testing.T, dir string, storeMax int64, cfg Config, log io.Writer) (*Replicas, *counts) {
	t.Helper()
	store, err := blobs.Open(dir, 1<<20, storeMax)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Self == "" {
		cfg.Self = "m1"
	}
	cfg.Scheme = "http"
	if cfg.Voters == nil {
		cfg.Voters = func() []Peer { return nil }
	}
	if cfg.Live == nil {
		cfg.Live = func() []string { return nil }
	}
	if cfg.Current == nil {
		cfg.Current = func() bool { return true }
	}
	c := &counts{}
	r := New(cfg, Deps{Store: store, HTTP: &http.Client{}, Metrics: c, Log: slog.New(slog.NewTextHandler(log, nil))})
	t.Cleanup(r.Close)
	return r, c
}

func put(t *testing.T, s *blobs.Store, content string) string {
	t.Helper()
	d := sha256.Sum256([]byte(content))
	sum := hex.EncodeToString(d[:])
	if _, _, err := s.Put(sum, -1, strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	return sum
}

// A file past its grace that no live row names goes at the second pass
// that finds it so, never at the first, and never while the tables are not
// current; a live one stays.
func TestCollectWaitsForASecondPass(t *testing.T) {
	current := atomic.Bool{}
	current.Store(true)
	var live []string
	dir := t.TempDir()
	r, c := replicas(t, dir, Config{Live: func() []string { return live }, Current: current.Load})
	dead, named := put(t, r.Store, "dead"), put(t, r.Store, "named")
	live = []string{named}
	past := time.Now().Add(-time.Minute)
	for _, sum := range []string{dead, named} {
		if err := os.Chtimes(filepath.Join(dir, sum), past, past); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(sum string) bool {
		_, err := r.Store.Stat(sum)
		return err == nil
	}

	r.collect()
	if !stored(dead) {
		t.Fatal("deleted at the first pass that found it unnamed")
	}
	current.Store(false)
	r.collect()
	current.Store(true)
	r.collect()
	if !stored(dead) {
		t.Fatal("deleted although a pass in between found the tables not current")
	}
	r.collect()
	if stored(dead) || !stored(named) || c.deleted.Load() != 1 {
		t.Fatalf("after two current passes: dead held %v, named held %v, %d deletions", stored(dead), stored(named), c.deleted.Load())
	}
}

// Push returns as soon as enough peers hold the file, while a peer that
// never answers is still being waited on; a peer that holds the file
// already answers before the body is sent.
func TestPushReturnsAtNeed(t *testing.T) {
	r, _ := replicas(t, t.TempDir(), Config{})
	content := strings.Repeat("z", 4096)
	sum := put(t, r.Store, content)

	var bodyRead atomic.Bool
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPut || req.URL.Path != api.BlobPath(sum) || req.Header.Get(api.HeaderForwarded) != "m1" ||
			req.Header.Get("Authorization") != "Bearer uploader" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{}`)) // holds it: no read of the body
	}))
	defer holder.Close()
	taker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		bodyRead.Store(bytes.Equal(b, []byte(content)))
		w.Write([]byte(`{}`))
	}))
	defer taker.Close()
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hanging.Close()
	defer close(release)

	peers := []Peer{{ID: "m2", HTTP: addr(holder)}, {ID: "m3", HTTP: addr(hanging)}, {ID: "m4", HTTP: addr(taker)}, {ID: "m5"}}
	cred := func(h http.Header) { h.Set("Authorization", "Bearer uploader") }
	got := r.Push(context.Background(), sum, peers, 2, cred)
	if len(got.Held) != 2 || got.Failed["m3"] != "no answer yet" || !strings.Contains(got.Failed["m5"], "not known") {
		t.Fatalf("Push = %+v; want m2 and m4 holding, m3 pending, m5 without an address", got)
	}
	if !bodyRead.Load() {
		t.Fatal("the peer that lacked the file did not get its bytes")
	}
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// A live upload the store has no room for is not pulled: nothing is
// stored, no temp file is left, no other peer is asked, it is logged
// once, and it is pulled at the first pass after a deletion made room.
// What the store holds stays, live or not.
func TestCatchUpKeepsTheStoreBound(t *testing.T) {
	content := strings.Repeat("l", 60)
	d := sha256.Sum256([]byte(content))
	sum := hex.EncodeToString(d[:])
	var asked atomic.Int32
	serve := func(w http.ResponseWriter, req *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Length", "60")
		w.Write([]byte(content))
	}
	a, b := httptest.NewServer(http.HandlerFunc(serve)), httptest.NewServer(http.HandlerFunc(serve))
	defer a.Close()
	defer b.Close()
	var log bytes.Buffer
	dir := t.TempDir()
	r, c := replicasLogging(t, dir, 100, Config{
		Voters: func() []Peer { return []Peer{{ID: "m1"}, {ID: "m2", HTTP: addr(a)}, {ID: "m3", HTTP: addr(b)}} },
		Live:   func() []string { return []string{sum} },
	}, &log)
	other := put(t, r.Store, strings.Repeat("o", 41))
	for range 2 {
		r.catchUp()
	}
	if _, err := r.Store.Stat(sum); !errors.Is(err, api.ErrUnknownBlob) || c.pulled.Load() != 0 {
		t.Fatalf("an upload past the bound was pulled: %v, %d pulls", err, c.pulled.Load())
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("%d peers asked in two passes, want one a pass", n)
	}
	if n := strings.Count(log.String(), "has no room for it"); n != 1 {
		t.Fatalf("logged %d times that the store has no room, want once:\n%s", n, log.String())
	}
	if files, held := r.Store.Usage(); files != 1 || held != 41 {
		t.Fatalf("the store holds %d files, %d bytes; want the one of 41", files, held)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the store dir holds %d entries, want the one file", len(entries))
	}
	if ok, err := r.Store.Delete(other, time.Now().Add(time.Hour)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	r.catchUp()
	if _, err := r.Store.Stat(sum); err != nil || c.pulled.Load() != 1 {
		t.Fatalf("after a deletion made room: %v, %d pulls", err, c.pulled.Load())
	}
}
