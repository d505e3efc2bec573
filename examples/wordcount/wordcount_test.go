package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// makeInput writes a tree of files with words from several scripts,
// numbers and punctuation, and a few empty files.
func makeInput(t testing.TB, files int) string {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	vocab := []string{"the", "Go", "gopher", "Ünïcode", "straße", "Ωμέγα", "日本語", "x", "A", "raft"}
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%7))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for range r.IntN(3000) * (i % 5) {
			b.WriteString(vocab[r.IntN(len(vocab))])
			b.WriteString([]string{" ", "\n", "42", ", ", "_", "-"}[r.IntN(6)])
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goSrc is $(go env GOROOT)/src, or "" when there is no go command.
func goSrc() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}

// gorootInput is a few packages of the Go tree: real text, a few MiB.
func gorootInput(t testing.TB) []string {
	src := goSrc()
	var roots []string
	for _, p := range []string{"strings", "encoding", "go/ast", "sort"} {
		roots = append(roots, filepath.Join(src, p))
	}
	if _, err := os.Stat(roots[0]); err != nil {
		t.Skip("no Go source tree:", err)
	}
	return roots
}

// reference is the single-process result's summary line.
func reference(t testing.TB, roots ...string) string {
	res, err := countLocal(roots)
	if err != nil {
		t.Fatal(err)
	}
	return summary(res.Files, res.Counts)
}

func testConfig(t testing.TB, roots []string, executors, cores int) driverConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return driverConfig{Roots: roots, Name: "wordcount-test", Executors: executors, Cores: cores,
		MemoryMB: 64, Listen: "127.0.0.1:0", Executable: exe}
}

// newTestDriver is runDriver's preparation, so tests can set hooks.
func newTestDriver(t testing.TB, cfg driverConfig, shards int) *driver {
	files, err := listFiles(cfg.Roots)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := makeShards(files, shards)
	if err != nil {
		t.Fatal(err)
	}
	return newDriver(len(files), sh, t.Logf)
}

type outcome struct {
	res *jobResult
	err error
}

// start runs the driver in the background.
func start(ctx context.Context, d *driver, cfg driverConfig, cl cluster) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		res, err := d.run(ctx, cfg, cl)
		out <- outcome{res, err}
	}()
	return out
}

func mustFinish(t *testing.T, out <-chan outcome, want string) *jobResult {
	t.Helper()
	o := <-out
	if o.err != nil {
		t.Fatal("driver:", o.err)
	}
	if got := summary(o.res.Files, o.res.Counts); got != want {
		t.Fatalf("distributed result differs:\n got %s\nwant %s", got, want)
	}
	t.Logf("%s; %+v", want, o.res.Status)
	return o.res
}

// testClient talks to the driver as a hand-made executor would.
type testClient struct {
	t   *testing.T
	url string
	hc  *http.Client
}

func newTestClient(t *testing.T, url string) *testClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &testClient{t, url, &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *testClient) do(method, path string, in, out any) int {
	c.t.Helper()
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			c.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, c.url+path, &body)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			c.t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func (c *testClient) task(executor int) taskResponse {
	c.t.Helper()
	var tr taskResponse
	if code := c.do("POST", "/v1/task", taskRequest{Executor: executor}, &tr); code != 200 {
		c.t.Fatalf("task: status %d", code)
	}
	return tr
}

func (c *testClient) status() jobStatus {
	c.t.Helper()
	var st jobStatus
	if code := c.do("GET", "/v1/status", nil, &st); code != 200 {
		c.t.Fatalf("status: status %d", code)
	}
	return st
}

// TestSingleProcessDigest pins the tokenizer and the digest on a known
// input.
func TestSingleProcessDigest(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("Hello, hello wORLD! x2y Straße"), 0o644)
	os.WriteFile(filepath.Join(dir, "b"), []byte("日本語 world"), 0o644)
	os.Symlink("a", filepath.Join(dir, "link")) // not a regular file: skipped
	res, err := countLocal([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"hello": 2, "world": 2, "x": 1, "y": 1, "straße": 1, "日本語": 1}
	if fmt.Sprint(res.Counts) != fmt.Sprint(want) || res.Files != 2 {
		t.Fatalf("counts %v in %d files, want %v in 2", res.Counts, res.Files, want)
	}
	got := summary(res.Files, res.Counts)
	if !strings.HasPrefix(got, "wordcount: 2 files, 6 distinct words, 8 words, digest=") {
		t.Fatal(got)
	}
	if top := Top(res.Counts, 3); fmt.Sprint(top) != "[{hello 2} {world 2} {straße 1}]" {
		t.Fatal(top)
	}
}

// TestMakeShards checks that every file lands in exactly one shard and
// that shards are balanced by bytes.
func TestMakeShards(t *testing.T) {
	dir := makeInput(t, 200)
	files, err := listFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	shards, err := makeShards(files, 8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var lo, hi int64 = 1 << 62, 0
	var biggest int64
	for i, sh := range shards {
		if sh.id != i || (i > 0 && sh.bytes > shards[i-1].bytes) {
			t.Fatalf("shard %d out of order", i)
		}
		for _, f := range sh.files {
			seen[f]++
			fi, _ := os.Stat(f)
			biggest = max(biggest, fi.Size())
		}
		lo, hi = min(lo, sh.bytes), max(hi, sh.bytes)
	}
	if len(seen) != len(files) {
		t.Fatalf("%d files in shards, want %d", len(seen), len(files))
	}
	for f, n := range seen {
		if n != 1 {
			t.Fatalf("%s in %d shards", f, n)
		}
	}
	// LPT keeps the spread within the biggest file.
	if hi-lo > biggest {
		t.Fatalf("shards span %d..%d bytes, biggest file %d", lo, hi, biggest)
	}
	if s, _ := makeShards(files[:3], 8); len(s) != 3 {
		t.Fatalf("%d shards for 3 files", len(s))
	}
}

// TestDistributedTempDir: goroutine executors with two slots each give
// the single-process result.
func TestDistributedTempDir(t *testing.T) {
	dir := makeInput(t, 300)
	cfg := testConfig(t, []string{dir}, 3, 2)
	res, err := runDriver(context.Background(), cfg, newGoCluster(t, 3, 2, false), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(res.Files, res.Counts), reference(t, dir); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// TestDistributedGOROOT: the same on real text, a part of the Go tree.
func TestDistributedGOROOT(t *testing.T) {
	roots := gorootInput(t)
	cfg := testConfig(t, roots, 4, 1)
	d := newTestDriver(t, cfg, 16)
	mustFinish(t, start(context.Background(), d, cfg, newGoCluster(t, 4, 1, false)), reference(t, roots...))
}

// TestExecutorLostRequeues: an executor takes a shard and its worker is
// lost. The shard goes back to the queue before any other executor
// starts, the lost executor is told to stop, and the job still gives the
// single-process result.
func TestExecutorLostRequeues(t *testing.T) {
	roots := gorootInput(t)
	cfg := testConfig(t, roots, 2, 1)
	d := newTestDriver(t, cfg, 8)
	cl := newGoCluster(t, 2, 1, true)
	out := start(context.Background(), d, cfg, cl)
	c := newTestClient(t, <-cl.launched)

	const lost = 7 // not one of the cluster's executor IDs
	task := c.task(lost)
	if task.Shard == nil || task.Shard.ID != 0 {
		t.Fatalf("first task %+v, want shard 0", task)
	}
	cl.evs <- execEvent{Executor: lost, Ended: true, State: "LOST", Message: "worker w1 lost"}
	// The driver handles one event at a time: once it takes the next,
	// the first is done.
	cl.evs <- execEvent{Executor: lost + 1, State: "RUNNING"}
	if st := c.status(); st.Requeued != 1 || st.LostExecutors != 1 || st.Pending != 8 || st.Running != 0 {
		t.Fatalf("after the loss: %+v", st)
	}
	if tr := c.task(lost); !tr.Done {
		t.Fatalf("a lost executor asking for work got %+v, want done", tr)
	}

	cl.startAll()
	res := mustFinish(t, out, reference(t, roots...))
	if res.Status.Done != 8 {
		t.Fatalf("%+v", res.Status)
	}
}

// TestExecutorKilledMidJob: an executor goroutine is killed the moment it
// is handed its first shard, so it never reports it; its exit event (or
// speculation) has the shard recomputed elsewhere.
func TestExecutorKilledMidJob(t *testing.T) {
	roots := gorootInput(t)
	cfg := testConfig(t, roots, 3, 1)
	d := newTestDriver(t, cfg, 12)
	cl := newGoCluster(t, 3, 1, false)
	var mu sync.Mutex
	victim := -1
	recomputed := false
	d.onAssign = func(s slot, id int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case victim < 0 && s.executor == 1:
			victim = id
			cl.kill(1)
		case id == victim && s.executor != 1:
			recomputed = true
		}
	}
	res := mustFinish(t, start(context.Background(), d, cfg, cl), reference(t, roots...))
	mu.Lock()
	defer mu.Unlock()
	if victim < 0 || !recomputed || res.Status.Requeued+res.Status.Speculative == 0 {
		t.Fatalf("shard %d of the killed executor recomputed: %v; %+v", victim, recomputed, res.Status)
	}
}

// TestSilentExecutorSpeculation: an executor takes a shard and goes
// silent, with no event about it. The idle executors get copies of it and
// the job finishes.
func TestSilentExecutorSpeculation(t *testing.T) {
	dir := makeInput(t, 100)
	cfg := testConfig(t, []string{dir}, 2, 1)
	d := newTestDriver(t, cfg, 6)
	cl := newGoCluster(t, 2, 1, true)
	out := start(context.Background(), d, cfg, cl)
	c := newTestClient(t, <-cl.launched)
	if task := c.task(9); task.Shard == nil {
		t.Fatalf("no shard for the silent executor: %+v", task)
	}
	cl.startAll()
	res := mustFinish(t, out, reference(t, dir))
	if res.Status.Speculative == 0 {
		t.Fatalf("no speculative copy: %+v", res.Status)
	}
}

// TestDuplicateResults: a result posted twice, and a different one posted
// later for the same shard, count once: the first wins.
func TestDuplicateResults(t *testing.T) {
	dir := makeInput(t, 60)
	cfg := testConfig(t, []string{dir}, 2, 1)
	d := newTestDriver(t, cfg, 4)
	cl := newGoCluster(t, 2, 1, true)
	out := start(context.Background(), d, cfg, cl)
	c := newTestClient(t, <-cl.launched)

	task := c.task(5)
	counts := map[string]int{}
	if err := countFiles(task.Shard.Files, counts); err != nil {
		t.Fatal(err)
	}
	res := resultRequest{Executor: 5, Shard: task.Shard.ID}
	res.setCounts(counts)
	for i, want := range []bool{true, false} {
		var ack resultResponse
		if code := c.do("POST", "/v1/result", res, &ack); code != 200 || ack.Accepted != want {
			t.Fatalf("post %d: status %d, %+v; want accepted=%v", i, code, ack, want)
		}
	}
	var ack resultResponse
	bogus := resultRequest{Executor: 6, Shard: task.Shard.ID, Words: []string{"bogus"}, Counts: []int{1}}
	if code := c.do("POST", "/v1/result", bogus, &ack); code != 200 || ack.Accepted {
		t.Fatalf("late different result: status %d, %+v", code, ack)
	}
	failure := resultRequest{Executor: 6, Shard: task.Shard.ID, Error: "late failure"}
	if code := c.do("POST", "/v1/result", failure, &ack); code != 200 || ack.Accepted {
		t.Fatalf("late failure: status %d, %+v", code, ack)
	}
	if st := c.status(); st.Done != 1 || st.Duplicates != 2 || st.Failures != 0 {
		t.Fatalf("%+v", st)
	}
	cl.startAll()
	mustFinish(t, out, reference(t, dir))
}

// TestShardFailsTooOften: a file that vanished after listing fails its
// shard on every executor; after maxTaskFailures the job fails, and the
// application is ended with the error.
func TestShardFailsTooOften(t *testing.T) {
	dir := makeInput(t, 20)
	cfg := testConfig(t, []string{dir}, 2, 1)
	d := newTestDriver(t, cfg, 4)
	if err := os.Remove(d.shards[2].files[0]); err != nil {
		t.Fatal(err)
	}
	cl := newGoCluster(t, 2, 1, false)
	o := <-start(context.Background(), d, cfg, cl)
	if o.err == nil || !strings.Contains(o.err.Error(), "shard 2 failed 4 times") {
		t.Fatalf("got %v, want shard 2 failing", o.err)
	}
	if err := <-cl.finished; err == nil {
		t.Fatal("the application was ended FINISHED")
	}
}

// TestApplicationEnded: when the cluster ends the application (killed,
// too many executor failures), the driver fails instead of waiting.
func TestApplicationEnded(t *testing.T) {
	dir := makeInput(t, 20)
	cfg := testConfig(t, []string{dir}, 2, 1)
	d := newTestDriver(t, cfg, 4)
	cl := newGoCluster(t, 2, 1, true)
	out := start(context.Background(), d, cfg, cl)
	<-cl.launched
	cl.end()
	if o := <-out; o.err == nil || !strings.Contains(o.err.Error(), "ended before the job") {
		t.Fatalf("got %v", o.err)
	}
}

// TestProcessExecutors runs real executor processes (this test binary in
// the executor role) and SIGKILLs one as it is handed its first shard.
func TestProcessExecutors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	roots := gorootInput(t)
	cfg := testConfig(t, roots, 3, 2)
	d := newTestDriver(t, cfg, 24)
	cl := newProcCluster(t, 3, 2)
	killed := false
	d.onAssign = func(s slot, id int) { // called with the driver's lock held
		if !killed && s.executor == 2 {
			killed = true
			cl.kill(2)
		}
	}
	res := mustFinish(t, start(context.Background(), d, cfg, cl), reference(t, roots...))
	if res.Status.Requeued+res.Status.Speculative == 0 {
		t.Fatalf("the killed executor's shard was not handed out again: %+v", res.Status)
	}
}

// TestProtocolBounds: bodies over the limit, malformed or unknown fields,
// and results for shards that do not exist are refused.
func TestProtocolBounds(t *testing.T) {
	d := newDriver(1, []*shard{{id: 0, files: []string{"x"}, holders: map[slot]time.Time{}}}, t.Logf)
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/v1/task", strings.Repeat("x", maxTaskBody), http.StatusRequestEntityTooLarge},
		{"/v1/task", map[string]int{"executor": 1, "slots": 2}, http.StatusBadRequest},
		{"/v1/result", resultRequest{Shard: 3, Words: []string{"a"}, Counts: []int{1}}, http.StatusBadRequest},
		{"/v1/result", resultRequest{Shard: 0, Words: []string{"a"}, Counts: []int{-1}}, http.StatusBadRequest},
		{"/v1/result", resultRequest{Shard: 0, Words: []string{"a", "b"}, Counts: []int{1}}, http.StatusBadRequest},
		{"/v1/status", nil, http.StatusMethodNotAllowed},
	} {
		if got := c.do("POST", tc.path, tc.body, nil); got != tc.want {
			t.Errorf("POST %s %v: status %d, want %d", tc.path, tc.body, got, tc.want)
		}
	}
}

// TestExecutorGivesUp: an executor whose driver is gone exits cleanly
// after its patience.
func TestExecutorGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	err := runExecutor(context.Background(), executorConfig{
		Driver: url, ID: 0, Slots: 2, Patience: 300 * time.Millisecond,
		HTTP: &http.Client{Transport: tr, Timeout: time.Second}, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGOROOT compares the single-process count of the whole Go tree
// with the same job on 2 in-process executors.
func BenchmarkGOROOT(b *testing.B) {
	roots := []string{goSrc()}
	b.Run("single", func(b *testing.B) {
		for b.Loop() {
			if _, err := countLocal(roots); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("executors=%d", n), func(b *testing.B) {
			cfg := testConfig(b, roots, n, 1)
			for b.Loop() {
				cl := newGoCluster(b, n, 1, false)
				if _, err := runDriver(context.Background(), cfg, cl, b.Logf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
