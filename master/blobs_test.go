package master_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/metricstest"
)

// fastUploads has masters make their anti-entropy and garbage collection
// passes every 50 ms.
func fastUploads(cfg *master.Config) { cfg.UploadSyncInterval = 50 * time.Millisecond }

// writeFile writes a file with the given content and mode in a new
// directory and returns its path and digest.
func writeFile(t *testing.T, name, content string, mode os.FileMode) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256([]byte(content))
	return path, hex.EncodeToString(s[:])
}

// blobRequest sends one request for blob sum to node n, with the cluster's
// operator token when it has one, and returns the status and body.
func blobRequest(t *testing.T, n *mastertest.Node, method, sum string, body io.Reader, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.HTTP()+api.BlobPath(sum), body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if tok := n.Config.OperatorToken; tok != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, sum, n.ID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// holds reports whether node n's store holds sum, asking it over HTTP.
func holds(t *testing.T, n *mastertest.Node, sum string) bool {
	t.Helper()
	status, body := blobRequest(t, n, http.MethodHead, sum, nil, nil)
	if status != http.StatusOK && status != http.StatusNotFound {
		t.Fatalf("HEAD %s on %s: %d %s", sum, n.ID, status, body)
	}
	return status == http.StatusOK
}

// holders lists the running nodes that hold sum.
func holders(t *testing.T, c *mastertest.Cluster, sum string) []string {
	t.Helper()
	var out []string
	for _, n := range c.Nodes {
		if n.Master() != nil && holds(t, n, sum) {
			out = append(out, n.ID)
		}
	}
	return out
}

// awaitHolders waits until exactly the nodes want hold sum, among the
// running ones.
func awaitHolders(t *testing.T, c *mastertest.Cluster, sum, what string, want ...string) {
	t.Helper()
	ctx := c.Context()
	for {
		got := holders(t, c, sum)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %s is held by %v, want %v", what, sum, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An upload is acknowledged once a majority of the voters hold it: all
// three while all run, and each then serves the same bytes with the file's
// name and mode in the artifact; with one master down, the other two; with
// two down it is refused, saying how many hold it.
func TestUploadNeedsAMajority(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	path, sum := writeFile(t, "job.sh", "#!/bin/sh\necho hello\n", 0o750)
	a, err := c.Client(c.Nodes[0]).Upload(c.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if a != (model.Artifact{Upload: sum, Name: "job.sh", Mode: 0o750}) {
		t.Fatalf("artifact %+v", a)
	}
	if got := holders(t, c, sum); len(got) < 2 {
		t.Fatalf("acknowledged while held by %v only", got)
	}
	awaitHolders(t, c, sum, "every master gets the push", "m1", "m2", "m3")
	for _, n := range c.Nodes {
		if status, body := blobRequest(t, n, http.MethodGet, sum, nil, nil); status != http.StatusOK || string(body) != "#!/bin/sh\necho hello\n" {
			t.Fatalf("GET on %s: %d %q", n.ID, status, body)
		}
		from := "master"
		if n.ID == "m1" {
			from = "client"
		}
		wantMetric(t, n, 1, "drover_blob_uploads_total", "from", from)
		wantMetric(t, n, 1, "drover_blob_files")
		wantMetric(t, n, float64(len("#!/bin/sh\necho hello\n")), "drover_blob_bytes")
	}
	if st, err := c.Client(c.Nodes[1]).State(c.Context()); err != nil || st.Blobs != (api.BlobUsage{Files: 1, Bytes: 21}) {
		t.Fatalf("m2's state shows its store as %+v (%v), want 1 file of 21 bytes", st.Blobs, err)
	}

	c.Stop(c.Nodes[2])
	path, sum = writeFile(t, "two.txt", "held by two", 0o644)
	var res api.UploadResponse
	status, body := blobRequest(t, c.Nodes[0], http.MethodPut, sum, strings.NewReader("held by two"), nil)
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Voters != 3 || strings.Join(res.Held, ",") != "m1,m2" {
		t.Fatalf("with m3 down: %d %s, want 200 held by m1,m2 of 3", status, body)
	}
	if _, err := c.Client(c.Nodes[1]).Upload(c.Context(), path); err != nil {
		t.Fatalf("upload again through m2 with m3 down: %v", err)
	}

	c.Stop(c.Nodes[1])
	path, sum = writeFile(t, "one.txt", "held by one", 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Client(c.Nodes[0]).Upload(ctx, path)
	if !errors.Is(err, client.ErrNoMaster) || !strings.Contains(err.Error(), "held by 1 of 3 voters (m1), 2 needed") {
		t.Fatalf("with two of three down: %v, want unavailable saying 1 of 3 hold it", err)
	}
	status, body = blobRequest(t, c.Nodes[0], http.MethodPut, sum, strings.NewReader("held by one"), nil)
	var e api.Error
	if status != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != api.CodeUnavailable ||
		!strings.Contains(e.Error, "m2: ") || !strings.Contains(e.Error, "m3: ") {
		t.Fatalf("with two of three down: %d %s, want 503 naming why m2 and m3 do not hold it", status, body)
	}
}

// A master that lost its store (or was down during an upload) pulls the
// uploads live drivers name from the others once it runs again, and serves
// them.
func TestAntiEntropyFillsAnEmptyMaster(t *testing.T) {
	c := mastertest.Start(t, 3, fastUploads)
	path, sum := writeFile(t, "app.sh", "#!/bin/sh\nexit 0\n", 0o755)
	cl := c.Client()
	a, err := cl.Upload(c.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	req := submitReq()
	req.Artifacts = []model.Artifact{a}
	if _, err := cl.Submit(c.Context(), req); err != nil {
		t.Fatal(err)
	}
	awaitHolders(t, c, sum, "before m3 loses its disk", "m1", "m2", "m3")

	m3 := c.Nodes[2]
	c.Stop(m3)
	if err := os.RemoveAll(filepath.Join(m3.Config.DataDir, "blobs")); err != nil {
		t.Fatal(err)
	}
	c.Restart(m3)
	awaitHolders(t, c, sum, "after m3 restarted with no store", "m1", "m2", "m3")
	if status, body := blobRequest(t, m3, http.MethodGet, sum, nil, nil); status != http.StatusOK || string(body) != "#!/bin/sh\nexit 0\n" {
		t.Fatalf("GET on m3 after the pull: %d %q", status, body)
	}
	wantMetric(t, m3, 1, "drover_blob_pulls_total")
}

// Garbage collection deletes, on every master, an upload no live driver
// names once its grace has passed, and keeps one a live driver names until
// the driver ends.
func TestGarbageCollection(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		fastUploads(cfg)
		cfg.UploadGrace = 300 * time.Millisecond
	})
	cl, ctx := c.Client(), c.Context()
	kept, keptSum := writeFile(t, "kept.sh", "#!/bin/sh\n", 0o755)
	dropped, droppedSum := writeFile(t, "dropped.sh", "#!/bin/sh\n# nobody names me\n", 0o755)
	a, err := cl.Upload(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	req := submitReq()
	req.Artifacts = []model.Artifact{a}
	res, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Upload(ctx, dropped); err != nil {
		t.Fatal(err)
	}
	awaitHolders(t, c, droppedSum, "the unnamed upload after its grace")
	// The named upload is older, so its grace passed first.
	if got := holders(t, c, keptSum); len(got) != 3 {
		t.Fatalf("the upload a live driver names is held by %v only", got)
	}
	if err := cl.Kill(ctx, res.DriverID); err != nil {
		t.Fatal(err)
	}
	awaitHolders(t, c, keptSum, "the upload of a killed driver")
	for _, n := range c.Nodes {
		wantMetric(t, n, 2, "drover_blob_deletions_total")
		wantMetric(t, n, 0, "drover_blob_files")
	}
}

// Bad uploads are refused in one line and leave nothing in any store: a
// path that is no digest, bytes of another digest, a body over the bound
// (before reading it when Content-Length says so), a body cut off half-way.
// A file held already is not sent again.
func TestUploadRefusals(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxUpload = 1 << 10 })
	m1 := c.Nodes[0]
	good := strings.Repeat("g", 1<<10)
	goodSum := digestOf(good)
	big := strings.Repeat("b", 1<<10+1)
	noBytesRead := func(t *testing.T, status int, body []byte, r *recordingReader) {
		t.Helper()
		if r.read.Load() {
			t.Fatalf("the master read the body (%d %s)", status, body)
		}
	}
	for _, tc := range []struct {
		name   string
		sum    string
		body   func() io.Reader
		header http.Header
		status int
		code   api.Code
		text   string
	}{
		{"not a digest", "0123abc", func() io.Reader { return strings.NewReader(good) }, nil, 400, api.CodeInvalidRequest, "not a SHA-256"},
		{"upper-case digest", strings.ToUpper(goodSum), func() io.Reader { return strings.NewReader(good) }, nil, 400, api.CodeInvalidRequest, "lowercase"},
		{"another digest", digestOf("x"), func() io.Reader { return strings.NewReader(good) }, nil, 400, api.CodeInvalidRequest, "hashes to " + goodSum},
		{"over the bound, streamed", digestOf(big), func() io.Reader { return io.MultiReader(strings.NewReader(big)) }, nil, 413, api.CodeTooLarge, "bound of 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := blobRequest(t, m1, http.MethodPut, tc.sum, tc.body(), tc.header)
			var e api.Error
			if status != tc.status || json.Unmarshal(body, &e) != nil || e.Code != tc.code || !strings.Contains(e.Error, tc.text) ||
				strings.Contains(strings.TrimSpace(e.Error), "\n") {
				t.Fatalf("%d %s, want %d %s with %q", status, body, tc.status, tc.code, tc.text)
			}
		})
	}

	t.Run("over the bound by Content-Length", func(t *testing.T) {
		r := &recordingReader{r: strings.NewReader(big)}
		req, _ := http.NewRequest(http.MethodPut, "http://"+m1.HTTP()+api.BlobPath(digestOf(big)), r)
		req.ContentLength = int64(len(big))
		req.Header.Set("Expect", "100-continue")
		status, body := doExpecting(t, req)
		noBytesRead(t, status, body, r)
		if status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s, want 413", status, body)
		}
	})

	t.Run("cut off half-way", func(t *testing.T) {
		conn, err := net.Dial("tcp", m1.HTTP())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", api.BlobPath(goodSum), m1.HTTP(), len(good), good[:len(good)/2])
		dir := filepath.Join(m1.Config.DataDir, "blobs")
		awaitEntries(t, c, dir, "the half-sent body being written", 1)
		conn.Close()
		awaitEntries(t, c, dir, "the half-sent body removed", 0)
	})
	for _, n := range c.Nodes {
		if es, _ := os.ReadDir(filepath.Join(n.Config.DataDir, "blobs")); len(es) != 0 {
			t.Fatalf("%s's store holds %d entries after refusals", n.ID, len(es))
		}
	}

	status, body := blobRequest(t, m1, http.MethodPut, goodSum, strings.NewReader(good), nil)
	if status != http.StatusOK {
		t.Fatalf("a good upload: %d %s", status, body)
	}
	awaitHolders(t, c, goodSum, "a good upload", "m1", "m2", "m3")
	r := &recordingReader{r: strings.NewReader(good)}
	req, _ := http.NewRequest(http.MethodPut, "http://"+c.Nodes[1].HTTP()+api.BlobPath(goodSum), r)
	req.ContentLength = int64(len(good))
	req.Header.Set("Expect", "100-continue")
	status, body = doExpecting(t, req)
	var res api.UploadResponse
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || len(res.Held) < 2 {
		t.Fatalf("the same file again through m2: %d %s", status, body)
	}
	noBytesRead(t, status, body, r)

	status, body = blobRequest(t, m1, http.MethodGet, digestOf("never uploaded"), nil, nil)
	var e api.Error
	if status != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Code != api.CodeUnknownBlob {
		t.Fatalf("GET of an unknown digest: %d %s", status, body)
	}
}

// Who may submit may upload, and read what is stored; workers (the
// operator token without TLS) may read; a read token is not enough, nor
// is no token.
func TestUploadAccess(t *testing.T) {
	const op, sub = "operator-token-0123456789", "submit-token-0123456789"
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.OperatorToken, cfg.SubmitToken, cfg.OpenReads = op, sub, true
	})
	m1 := c.Nodes[0]
	content := "secret script"
	sum := digestOf(content)
	bearer := func(tok string) http.Header {
		if tok == "" {
			return http.Header{"Authorization": {"Bearer "}}
		}
		return http.Header{"Authorization": {"Bearer " + tok}}
	}
	if status, body := blobRequest(t, m1, http.MethodPut, sum, strings.NewReader(content), bearer("")); status != http.StatusForbidden {
		t.Fatalf("upload with an empty token: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+m1.HTTP()+api.BlobPath(sum), strings.NewReader(content))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upload without a token: %v %v", resp, err)
	}
	if status, body := blobRequest(t, m1, http.MethodPut, sum, strings.NewReader(content), bearer(sub)); status != http.StatusOK {
		t.Fatalf("upload with the submit token: %d %s", status, body)
	}
	awaitHolders(t, c, sum, "the pushes carry the uploader's token", "m1", "m2", "m3")
	for _, tok := range []string{sub, op} {
		if status, body := blobRequest(t, m1, http.MethodGet, sum, nil, bearer(tok)); status != http.StatusOK || string(body) != content {
			t.Fatalf("GET with %s: %d %q", tok, status, body)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, "http://"+m1.HTTP()+api.BlobPath(sum), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET without a token on a master with open reads: %d, want 401", resp.StatusCode)
	}
}

// wantMetric fails unless node n's /metrics has sample name with labels at v.
func wantMetric(t *testing.T, n *mastertest.Node, v float64, name string, labels ...string) {
	t.Helper()
	s, err := metricstest.Get(http.DefaultClient, "http://"+n.HTTP()+"/metrics", n.Config.OperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Value(name, labels...); !ok || got != v {
		t.Fatalf("%s: %s%v = %v (present %v), want %v", n.ID, name, labels, got, ok, v)
	}
}

func digestOf(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// recordingReader records whether anything read it.
type recordingReader struct {
	r    io.Reader
	read atomic.Bool
}

func (r *recordingReader) Read(p []byte) (int, error) {
	r.read.Store(true)
	return r.r.Read(p)
}

// doExpecting sends req with a client that waits for 100 Continue before
// it sends the body, as client.Upload does.
func doExpecting(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// awaitEntries waits until dir holds n entries.
func awaitEntries(t *testing.T, c *mastertest.Cluster, dir, what string, n int) {
	t.Helper()
	ctx := c.Context()
	for {
		es, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if len(es) == n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %s holds %d entries, want %d", what, dir, len(es), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
