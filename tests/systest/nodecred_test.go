package systest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/testcluster"
	droverworker "github.com/drover-project/drover/worker"
)

// jsonBody is v as a request body.
func jsonBody(t *testing.T, v any) *strings.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReader(string(b))
}

// TestWorkerCertificateActsAsItsWorkerOnly: on a secured cluster (TLS,
// tokens, gossip key) with workers w1 and w2, w1's certificate and key,
// even with w2's instance in hand, cannot heartbeat as w2 (reporting the
// driver on w2 FINISHED), register as w2 or decommission w2, sent to the
// leader or through a follower; nor can a master forward them for it, nor
// can a worker certificate that names no worker. Each is refused 403 in
// one line before anything changes: the tables keep their hash, w2 stays
// ALIVE with its driver RUNNING on attempt 1, and no answer carries a
// driver token. w1's certificate still acts as w1.
func TestWorkerCertificateActsAsItsWorkerOnly(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, Secure: true})
	p := newProbe(t)
	// Three of each worker's four cores: one driver on each.
	var onW2 string
	for range 2 {
		req := p.request("sleep 600", false)
		req.Cores = 3
		id := submit(t, c, req)
		if d := c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning)); d.WorkerID == "w2" {
			onW2 = id
		}
	}
	if onW2 == "" {
		t.Fatal("no driver was placed on w2")
	}
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Follower(leader)
	// What a rogue w1 might have found out about w2.
	w2 := c.Worker("w2")
	instance := readToken(t, filepath.Join(w2.Dir, droverworker.InstanceFile))

	a := &attacker{t: t, c: c, ca: c.Secrets.CA}
	w1 := a.tlsConfig(nodeFiles(t, c.Secrets, pki.RoleWorker, "w1"), false)
	followerCert := a.tlsConfig(nodeFiles(t, c.Secrets, pki.RoleMaster, follower.ID), false)
	caKey, err := os.ReadFile(c.Secrets.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(c.Secrets.CA)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := pki.Issue(caPEM, caKey, pki.RoleWorker, "", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unboundCert, unboundKey, err := pki.WriteFiles(t.TempDir(), "old-worker", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	unbound := a.tlsConfig(pki.Files{Cert: unboundCert, Key: unboundKey}, false)

	zero := 0
	finished := api.HeartbeatRequest{Instance: instance, Running: []api.AttemptRef{},
		Reports: []model.AttemptReport{{DriverID: onW2, Attempt: 1, State: model.DriverFinished, ExitCode: &zero}}}
	register := api.RegisterWorkerRequest{ID: "w2", Instance: instance, HTTPAddr: w2.HTTP, Cores: 64, MemoryMB: 65536}
	decommission := api.DecommissionWorkerRequest{Instance: instance, Reason: "not w2's own"}
	calls := []struct {
		path string
		body any
	}{
		{api.WorkerPath("w2", "/heartbeat"), finished},
		{api.PathRegisterWorker, register},
		{api.WorkerPath("w2", "/decommission"), decommission},
	}
	forwardedAsW1 := map[string]string{api.HeaderForwarded: follower.ID, api.HeaderForwardedCert: pki.NodeURI(pki.RoleWorker, "w1")}

	before := stateHash(t, leader)
	for _, call := range calls {
		for _, at := range []struct {
			name   string
			cfg    *tls.Config
			node   *testcluster.Node
			header map[string]string
			want   string
		}{
			{"w1's certificate to the leader", w1, leader, nil, "worker certificate of w1 may not act as w2"},
			{"w1's certificate through a follower", w1, follower, nil, "worker certificate of w1 may not act as w2"},
			{"a master forwarding w1's certificate", followerCert, leader, forwardedAsW1, "worker certificate of w1 may not act as w2"},
			{"a certificate naming no worker", unbound, follower, nil, "drover tls cert --role worker --name w2"},
		} {
			s, b, err := request(at.cfg, http.MethodPost, "https://"+at.node.HTTP+call.path, "", jsonBody(t, call.body), at.header)
			if err := wantStatus(s, b, err, http.StatusForbidden); err != nil {
				t.Errorf("%s, %s: not refused: %v", at.name, call.path, err)
				continue
			}
			if !strings.Contains(b, at.want) || strings.Count(strings.TrimSpace(b), "\n") != 0 {
				t.Errorf("%s, %s: refusal %q does not say %q in one line", at.name, call.path, b, at.want)
			}
			if strings.Contains(b, "drv.") {
				t.Errorf("%s, %s: the answer carries a driver token: %q", at.name, call.path, b)
			}
		}
		if after := stateHash(t, leader); after != before {
			t.Fatalf("%s as w2 changed the tables", call.path)
		}
	}

	st, err := testcluster.State(context.Background(), leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Workers {
		if w.State != model.WorkerAlive {
			t.Errorf("worker %s is %s after the attempts", w.ID, w.State)
		}
	}
	if d := c.WaitDriver(onW2, 5*time.Second, "RUNNING", isState(model.DriverRunning)); d.Attempt != 1 || d.WorkerID != "w2" {
		t.Errorf("w2's driver is on attempt %d on %s after the attempts", d.Attempt, d.WorkerID)
	}

	// w1's certificate is w1's own: through a follower, it heartbeats as
	// w1 and hears w1's driver with its token.
	w1Instance := readToken(t, filepath.Join(c.Worker("w1").Dir, droverworker.InstanceFile))
	s, b, err := request(w1, http.MethodPost, "https://"+follower.HTTP+api.WorkerPath("w1", "/heartbeat"), "",
		jsonBody(t, api.HeartbeatRequest{Instance: w1Instance, Running: []api.AttemptRef{}}), nil)
	if err := wantStatus(s, b, err, http.StatusOK); err != nil || !strings.Contains(b, `"registered":true`) || !strings.Contains(b, "drv.") {
		t.Fatalf("w1 as itself: %v, %q", err, b)
	}
}
