package systest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// Secrets of the namespace tokens of TestNamespaceTokensAcrossMasters.
const (
	etlSecret = "EtlNamespaceSecret-0123456789ab"
	mlSecret  = "MlNamespaceSecret-0123456789abc"
)

// bufferSink is a raft.SnapshotSink into memory.
type bufferSink struct{ bytes.Buffer }

func (*bufferSink) ID() string    { return "test" }
func (*bufferSink) Cancel() error { return nil }
func (*bufferSink) Close() error  { return nil }

// commitThroughSnapshot commits cmds to the cluster's tables as the
// operator can without an endpoint for them: it saves a snapshot of the
// tables, applies cmds to them with the FSM every master runs, at the
// indexes after the snapshot's, and restores the result. Each master
// then holds the tables the entries would have made.
func commitThroughSnapshot(t *testing.T, c *testcluster.Cluster, opTok string, cmds ...model.Command) {
	t.Helper()
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, archive := nsCall(t, leader, http.MethodGet, api.PathSnapshot, opTok, nil)
	if code != http.StatusOK {
		t.Fatalf("save snapshot: %d %s", code, archive)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(strings.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name], _ = io.ReadAll(tr)
	}
	var meta raft.SnapshotMeta
	if err := json.Unmarshal(files["meta.json"], &meta); err != nil {
		t.Fatal(err)
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(files["state.bin"]))); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		data, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		meta.Index++
		if err, ok := f.Apply(&raft.Log{Index: meta.Index, Term: meta.Term, Type: raft.LogCommand, Data: data}).(error); ok {
			t.Fatalf("%T: %v", cmd, err)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var state bufferSink
	if err := snap.Persist(&state); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	metaJSON, _ := json.Marshal(meta)
	sums := fmt.Sprintf("%x  meta.json\n%x  state.bin\n", sha256.Sum256(metaJSON), sha256.Sum256(state.Bytes()))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, file := range []struct {
		name string
		data []byte
	}{{"meta.json", metaJSON}, {"state.bin", state.Bytes()}, {"SHA256SUMS", []byte(sums)}} {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: 0o600, Size: int64(len(file.data))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(file.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := nsCall(t, leader, http.MethodPost, api.PathSnapshot, opTok, out.Bytes()); code != http.StatusOK {
		t.Fatalf("restore snapshot: %d %s", code, body)
	}
}

// nsCall makes one request of master n's API with token and body (JSON
// when it is not bytes, none when nil) and returns the status and the
// answer.
func nsCall(t *testing.T, n *testcluster.Node, method, path, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ctype = bytes.NewReader(b), "application/octet-stream"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.HTTP+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s at %s: %v", method, path, n.ID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func tokenRow(accessor, secret, ns string) *model.CreateACLToken {
	sum := sha256.Sum256([]byte(secret))
	return &model.CreateACLToken{Token: model.ACLToken{Accessor: accessor, SecretHash: hex.EncodeToString(sum[:]),
		Policy: model.PolicySubmit, Namespaces: []string{ns}}, Time: time.Now().UnixMilli()}
}

// TestNamespaceTokensAcrossMasters runs three masters with tokens, a
// worker and Spark's REST protocol, namespaces etl and ml and a submit
// token of each. Through every master, leader or follower, etl's token
// cannot see, kill or read the logs of ml's running driver (403 naming
// ml), through the /v1 API and Spark's REST protocol alike; its /json
// and its event stream leave ml's driver out while they show its own.
// Revoked, its token is refused by every master within a second of the
// revocation's commit: each master is polled until it refuses, and how
// long each took is logged.
func TestNamespaceTokensAcrossMasters(t *testing.T) {
	c, rest := sparkRESTCluster(t, testcluster.Options{Workers: 1, TokensOnly: true},
		"/usr/bin/env {{mainClass}} {{appArgs}}")
	opTok := readToken(t, c.Secrets.OperatorToken)
	ns := func(name string) *model.ApplyNamespace {
		return &model.ApplyNamespace{Namespace: model.Namespace{Name: name, Weight: 1, DriverShare: 1, PriorityMax: model.MaxPriority}}
	}
	commitThroughSnapshot(t, c, opTok, ns("etl"), ns("ml"), tokenRow("acc-etl", etlSecret, "etl"), tokenRow("acc-ml", mlSecret, "ml"))
	for _, m := range c.Masters {
		waitFor(t, 10*time.Second, "master "+m.ID+" takes the namespace tokens", func() bool {
			code, _ := nsCall(t, m, http.MethodGet, api.PathDrivers, etlSecret, nil)
			return code == http.StatusOK
		})
	}

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	submitIn := func(token, name, body string) string {
		req := api.SubmitRequest{Token: name + "-token", Name: name,
			DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", body}, Cores: 1, MemoryMB: 64}}
		code, out := nsCall(t, leader, http.MethodPost, api.PathDrivers, token, req)
		if code != http.StatusOK {
			t.Fatalf("submit %s: %d %s", name, code, out)
		}
		var res api.SubmitResponse
		_ = json.Unmarshal([]byte(out), &res)
		return res.DriverID
	}
	theirs := submitIn(mlSecret, "theirs", "echo hello-from-ml; exec sleep 600")
	c.WaitDriver(theirs, 30*time.Second, "ml's driver runs", isState(model.DriverRunning))
	waitFor(t, 20*time.Second, "ml's token reads its driver's log", func() bool {
		code, out := nsCall(t, leader, http.MethodGet, api.DriverPath(theirs, "/logs"), mlSecret, nil)
		return code == http.StatusOK && strings.Contains(out, "hello-from-ml")
	})

	// The event stream is opened before etl's driver is submitted and
	// killed, and read until that kill: ml's driver, in the tables since
	// before, never shows.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Masters[1].HTTP+api.V1Events.Path("")+"?index=1", nil)
	req.Header.Set("Authorization", "Bearer "+etlSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events with etl's token: %v %v", resp, err)
	}
	defer resp.Body.Close()
	mine := submitIn(etlSecret, "mine", "exec sleep 600")

	for _, m := range c.Masters {
		for _, tc := range []struct{ method, path string }{
			{http.MethodGet, api.V1Driver.Path(theirs)},
			{http.MethodGet, api.DriverPath(theirs, "/logs")},
			{http.MethodPost, api.V1KillDriver.Path(theirs)},
		} {
			code, out := nsCall(t, m, tc.method, tc.path, etlSecret, nil)
			if code != http.StatusForbidden || !strings.Contains(out, "namespace ml") || strings.Contains(out, "hello-from-ml") {
				t.Fatalf("%s %s at %s with etl's token: %d %s, want 403 naming ml", tc.method, tc.path, m.ID, code, out)
			}
		}
		code, out := nsCall(t, m, http.MethodGet, "/json", etlSecret, nil)
		if code != http.StatusOK || !strings.Contains(out, mine) || strings.Contains(out, theirs) {
			t.Fatalf("/json at %s with etl's token: %d, want %s and not %s: %s", m.ID, code, mine, theirs, out)
		}
		for _, path := range []string{"/v1/submissions/status/" + theirs, "/v1/submissions/kill/" + theirs} {
			method := http.MethodGet
			if strings.Contains(path, "kill") {
				method = http.MethodPost
			}
			a := sparkCall(t, http.DefaultClient, "http://"+rest[m.ID]+path, method, etlSecret, "")
			a.isSparkError(t, http.StatusForbidden)
			if !strings.Contains(a.str("message"), "namespace ml") {
				t.Fatalf("Spark REST %s at %s with etl's token: %s, want the message to name ml", path, m.ID, a.raw)
			}
		}
	}
	if d := c.WaitDriver(theirs, time.Second, "ml's driver", func(*model.Driver) bool { return true }); d.State != model.DriverRunning {
		t.Fatalf("ml's driver is %s after etl's refused kills", d.State)
	}
	// Through Spark's REST protocol, etl's token may not submit to ml.
	body := strings.Replace(createJSON("/bin/true"), `"spark.driver.cores" : "1"`, `"spark.driver.cores" : "1", "spark.drover.namespace" : "ml"`, 1)
	sparkCall(t, http.DefaultClient, "http://"+rest[leader.ID]+"/v1/submissions/create", http.MethodPost, etlSecret, body).isSparkError(t, http.StatusForbidden)

	if code, out := nsCall(t, leader, http.MethodPost, api.V1KillDriver.Path(mine), etlSecret, nil); code != http.StatusOK {
		t.Fatalf("etl's token kills its own driver: %d %s", code, out)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for killed := false; !killed; {
		if !sc.Scan() {
			t.Fatalf("the event stream ended before the kill of %s: %v", mine, sc.Err())
		}
		line := sc.Text()
		if strings.Contains(line, theirs) {
			t.Fatalf("etl's event stream carries ml's driver: %s", line)
		}
		killed = strings.Contains(line, mine) && strings.Contains(line, `"state":"KILLED"`)
	}

	// Revocation: every master refuses the token within a second of
	// the commit.
	commitThroughSnapshot(t, c, opTok, &model.RevokeACLToken{Accessor: "acc-etl", Time: time.Now().UnixMilli()})
	committed := time.Now()
	took := make([]time.Duration, len(c.Masters))
	var wg sync.WaitGroup
	for i, m := range c.Masters {
		wg.Go(func() {
			for {
				code, _ := nsCall(t, m, http.MethodGet, api.PathDrivers, etlSecret, nil)
				if took[i] = time.Since(committed); code == http.StatusForbidden || took[i] > time.Second {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, m := range c.Masters {
		t.Logf("master %s refused the revoked token %s after the commit", m.ID, took[i])
		if took[i] > time.Second {
			t.Errorf("master %s still took the revoked token a second after the commit", m.ID)
		}
	}
	if code, _ := nsCall(t, leader, http.MethodGet, api.PathDrivers, mlSecret, nil); code != http.StatusOK {
		t.Fatalf("ml's token was refused after etl's was revoked: %d", code)
	}
}
