package systest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/tests/rogueraft"
	"github.com/drover-project/drover/tests/testcluster"
)

// raftView is what a master's Raft and tables say of themselves.
type raftView struct {
	Term, LastIndex, CommitIndex uint64
	StateHash                    string
}

func viewOf(t *testing.T, c *testcluster.Cluster, m *testcluster.Node) raftView {
	t.Helper()
	st, err := testcluster.State(context.Background(), m)
	if err != nil {
		t.Fatalf("%s: %v", m.ID, err)
	}
	s, err := metricstest.Get(&http.Client{Timeout: 5 * time.Second}, "http://"+m.HTTP+"/metrics", readToken(t, c.Secrets.OperatorToken))
	if err != nil {
		t.Fatalf("%s: %v", m.ID, err)
	}
	last, ok := s.Value("drover_raft_last_log_index")
	if !ok {
		t.Fatalf("%s: no drover_raft_last_log_index", m.ID)
	}
	return raftView{Term: st.Term, LastIndex: uint64(last), CommitIndex: st.CommitIndex, StateHash: st.StateHash}
}

// sameSubnet is ip with its last byte replaced by last: another loopback
// address beside the cluster's.
func sameSubnet(ip string, last int) string {
	return ip[:strings.LastIndexByte(ip, '.')+1] + fmt.Sprint(last)
}

// TestRaftClosedWithoutTLS: three masters with tokens and a raft key but
// no TLS. A peer without the key (plain TCP, as hashicorp/raft's own TCP
// transport speaks) and one with the wrong key send each master the RPCs
// that would take the cluster over: an AppendEntries whose entry submits a
// driver and commits it, a RequestVote at a far higher term, an
// InstallSnapshot. None is processed: every master keeps its term, its
// last log index and its tables, each RPC fails at once because the
// master closed the connection, and each master's log has one line per
// peer, which holds neither the key nor its credential. The cluster still
// runs a driver, and fails over when its leader dies.
func TestRaftClosedWithoutTLS(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, TokensOnly: true})
	waitSameTables(t, c, c.Masters...)
	before := map[string]raftView{}
	for _, m := range c.Masters {
		before[m.ID] = viewOf(t, c, m)
	}

	entry, err := fsm.Encode(&model.SubmitDriver{
		ID: "driver-20240101000000-9999", Token: "rogue", DriverSpec: model.DriverSpec{
			Argv:     []string{"/bin/sh", "-c", "touch /tmp/drover-rogue"},
			Cores:    1,
			MemoryMB: 64,
		},
		Time: time.Now().UnixMilli(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, wrong, err := pki.NewRaftKey().TLSConfigs()
	if err != nil {
		t.Fatal(err)
	}
	// It does not check whom it talks to, so its proof reaches the
	// master rather than stopping at its own check.
	wrong.InsecureSkipVerify = true
	peers := []struct {
		name, ip string
		tls      *tls.Config
	}{
		{"a peer without the key", sameSubnet(c.Masters[0].IP, 200), nil},
		{"a peer with the wrong key", sameSubnet(c.Masters[0].IP, 201), wrong},
	}
	for _, p := range peers {
		rogue, err := rogueraft.New(p.ip, p.tls, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Masters {
			b := before[m.ID]
			for _, r := range rogue.Attack(rogueraft.Target{Addr: m.Raft, Term: b.Term + 1000,
				PrevIndex: b.LastIndex, PrevTerm: b.Term, Entry: entry}) {
				var ne net.Error
				switch {
				case r.Err == nil:
					t.Errorf("%s: %s answered %s", p.name, m.ID, r.RPC)
				case errors.Is(r.Err, os.ErrDeadlineExceeded) || errors.As(r.Err, &ne) && ne.Timeout():
					t.Errorf("%s: %s to %s timed out (%v), want the connection closed", p.name, r.RPC, m.ID, r.Err)
				}
			}
		}
		_ = rogue.Close()
	}

	key, err := pki.LoadRaftKey(c.Secrets.RaftKey, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Masters {
		if after := viewOf(t, c, m); after != before[m.ID] {
			t.Errorf("%s changed under the attacks: %+v, was %+v", m.ID, after, before[m.ID])
		}
		log := m.Log()
		if strings.Contains(log, readToken(t, c.Secrets.RaftKey)) || strings.Contains(log, key.Credential()) {
			t.Errorf("%s logged the raft key or its credential", m.ID)
		}
		for _, p := range peers {
			n := 0
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, "refused a Raft peer") && strings.Contains(l, "remote="+p.ip+" ") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s logged %d lines about %s (%s), want 1", m.ID, n, p.name, p.ip)
			}
		}
	}

	// The masters, which hold the key, still work together: a driver
	// runs, and a new leader takes over from a dead one.
	id := submit(t, c, api.SubmitRequest{Token: "after-attacks", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	next, err := c.Leader(15 * time.Second)
	if err != nil || next == leader {
		t.Fatalf("no new leader after %s died: %v", leader.ID, err)
	}
	id = submit(t, c, api.SubmitRequest{Token: "after-failover", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
}

// TestForgedForwardingIsBounded: a submission batch that carries
// X-Drover-Forwarded but no master's proof is its caller's own, held to
// the caller's --max-submits-per-client like any other (two submissions
// past a bound of one: one is answered too_many_requests); the same batch
// with a master's proof (its certificate with TLS, the raft key's
// credential without) is exempt, as the forwarding master counted it.
func TestForgedForwardingIsBounded(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts testcluster.Options
	}{
		{"TLS", testcluster.Options{Secure: true}},
		{"tokens without TLS", testcluster.Options{TokensOnly: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts
			opts.MasterArgs = []string{"--max-submits-per-client", "1"}
			c := testcluster.New(t, opts)
			leader, err := c.Leader(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var client, master *tls.Config
			masterHeader := map[string]string{}
			if mode.opts.Secure {
				if client, err = (pki.Files{CA: c.Secrets.CA}).ClientConfig(pki.RoleMaster); err != nil {
					t.Fatal(err)
				}
				// The certificate of the master the header names.
				if master, err = nodeFiles(t, c.Secrets, pki.RoleMaster, "m2").ClientConfig(pki.RoleMaster); err != nil {
					t.Fatal(err)
				}
			} else {
				key, err := pki.LoadRaftKey(c.Secrets.RaftKey, "")
				if err != nil {
					t.Fatal(err)
				}
				masterHeader[api.HeaderMasterCredential] = key.Credential()
			}
			submitTok := readToken(t, c.Secrets.SubmitToken)
			batch := func(name string, cfg *tls.Config, header map[string]string) []api.SubmitResult {
				t.Helper()
				body := fmt.Sprintf(`{"submissions":[
					{"token":"%[1]s-1","argv":["true"],"cores":1,"memory_mb":64},
					{"token":"%[1]s-2","argv":["true"],"cores":1,"memory_mb":64}]}`, name)
				h := map[string]string{"Content-Type": "application/json", api.HeaderForwarded: "m2"}
				for k, v := range header {
					h[k] = v
				}
				status, out, err := request(cfg, http.MethodPost, c.Scheme()+"://"+leader.HTTP+api.PathSubmitBatch, submitTok,
					strings.NewReader(body), h)
				var res api.SubmitBatchResponse
				if err != nil || status != http.StatusOK || json.Unmarshal([]byte(out), &res) != nil || len(res.Results) != 2 {
					t.Fatalf("%s: %d %s %v", name, status, out, err)
				}
				return res.Results
			}

			forged := batch("forged", client, nil)
			if forged[0].Error != nil || forged[0].DriverID == "" || forged[1].Error == nil || forged[1].Error.Code != api.CodeTooManyRequests {
				t.Fatalf("forged forwarding: %+v, %+v; want the first admitted and the second too_many_requests", forged[0], forged[1].Error)
			}
			proven := batch("master", master, masterHeader)
			for i, r := range proven {
				if r.Error != nil || r.DriverID == "" {
					t.Fatalf("forwarding with a master's proof: submission %d answered %+v, want admitted", i+1, r.Error)
				}
			}
		})
	}
}
