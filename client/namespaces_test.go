package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// fakeMasters are two masters, m1 the leader, that answer the Raft
// configuration and record every other request each gets.
type fakeMasters struct {
	mu    sync.Mutex
	asked map[string][]string
	addrs [2]string
}

func newFakeMasters(t *testing.T) *fakeMasters {
	f := &fakeMasters{asked: map[string][]string{}}
	for i, id := range []string{"m1", "m2"} {
		f.addrs[i] = server(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == api.PathRaftPeers {
				_ = json.NewEncoder(w).Encode(api.RaftPeers{Peers: []api.Master{
					{ID: "m1", HTTPAddr: f.addrs[0], Leader: true}, {ID: "m2", HTTPAddr: f.addrs[1]}}})
				return
			}
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			f.mu.Lock()
			f.asked[id] = append(f.asked[id], r.Method+" "+r.URL.Path)
			f.mu.Unlock()
			switch r.URL.Path {
			case api.PathACLTokens:
				_ = json.NewEncoder(w).Encode(api.ACLTokenCreated{Accessor: "a1", Secret: "dns.s"})
			default:
				_ = json.NewEncoder(w).Encode(map[string]any{"name": "etl", "accessor": "a1", "namespace": body["namespace"]})
			}
		})
	}
	return f
}

func (f *fakeMasters) requests() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for k, v := range f.asked {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Creating a token, deleting a namespace and revoking a token go once, to
// the leader, since a copy would make a second token or be refused as
// unknown; applying a namespace, idempotent, goes to every master.
func TestNamespaceWritesThatMustHappenOnceGoToTheLeader(t *testing.T) {
	f := newFakeMasters(t)
	c := newClient(t, Options{}, f.addrs[0], f.addrs[1])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tok, err := c.CreateACLToken(ctx, api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead})
	if err != nil || tok.Secret != "dns.s" {
		t.Fatalf("create: %+v, %v", tok, err)
	}
	if _, err := c.DeleteNamespace(ctx, "etl"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeACLToken(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /v1/acl/tokens", "DELETE /v1/namespaces/etl", "DELETE /v1/acl/tokens/a1"}
	if got := f.requests(); len(got["m2"]) != 0 || len(got["m1"]) != 3 || got["m1"][0] != want[0] || got["m1"][1] != want[1] || got["m1"][2] != want[2] {
		t.Fatalf("requests: %v; want %v at m1 alone", got, want)
	}
	// An idempotent apply goes to both; wait for the second copy.
	if _, err := c.ApplyNamespace(ctx, "etl", api.NamespaceRequest{}); err != nil {
		t.Fatal(err)
	}
	for len(f.requests()["m2"]) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the apply never reached m2")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A name that is no namespace's is refused before any request.
func TestNamespaceNameRefusedBeforeAnyRequest(t *testing.T) {
	f := newFakeMasters(t)
	c := newClient(t, Options{}, f.addrs[0])
	ctx := context.Background()
	for _, call := range []func() error{
		func() error { _, err := c.Namespace(ctx, "Etl"); return err },
		func() error { _, err := c.ApplyNamespace(ctx, "../v1/drivers", api.NamespaceRequest{}); return err },
		func() error { _, err := c.DeleteNamespace(ctx, ""); return err },
	} {
		if err := call(); !errors.Is(err, api.ErrInvalidRequest) {
			t.Errorf("%v; want api.ErrInvalidRequest", err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d masters asked", n)
	}
}

// Submit puts a request that names no namespace into the client's, and
// leaves one that names its own.
func TestSubmitGoesIntoTheClientsNamespace(t *testing.T) {
	got := make(chan string, 2)
	addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		got <- req.Namespace
		_ = json.NewEncoder(w).Encode(api.SubmitResponse{DriverID: "driver-20260101000000-0001"})
	})
	c := newClient(t, Options{Namespace: "etl", NoBatching: true}, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c2 := range []struct{ ns, want string }{{"", "etl"}, {"ml", "ml"}} {
		req := api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"a"}, Namespace: c2.ns}}
		if _, err := c.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if ns := <-got; ns != c2.want {
			t.Errorf("a submission naming %q went to namespace %q; want %q", c2.ns, ns, c2.want)
		}
	}
	t.Setenv(EnvNamespace, "ml")
	if o, err := OptionsFromEnv(); err != nil || o.Namespace != "ml" {
		t.Errorf("OptionsFromEnv with $%s=ml: %+v, %v", EnvNamespace, o, err)
	}
}
