package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/forward"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// served records which master's fake handlers ran, with the row each
// request named.
type served struct {
	mu   sync.Mutex
	rows []string
}

func (s *served) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, id)
}

func (s *served) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rows...)
}

// fakeOf is endpoint e's description with a handler that records the row
// in s and answers out.
func fakeOf[In, Out any](e *service.Endpoint[In, Out], s *served, out func(r service.Request[In]) Out) *service.Endpoint[In, Out] {
	return &service.Endpoint[In, Out]{Info: e.Info, Rows: e.Rows, Index: e.Index,
		Serve: func(_ *service.Local, _ context.Context, _ auth.Caller, r service.Request[In]) (Out, error) {
			s.add(r.ID)
			return out(r), nil
		}}
}

// nsEndpoints are the namespace and token endpoints as the master
// describes them, each with a fake handler recording in s.
func nsEndpoints(s *served) []service.Routed {
	status := func(r service.Request[api.NoBody]) api.NamespaceStatus {
		return api.NamespaceStatus{Namespace: &model.Namespace{Name: r.ID}}
	}
	return []service.Routed{
		fakeOf(service.V1Namespaces, s, func(service.Request[api.NoBody]) []api.NamespaceStatus {
			return []api.NamespaceStatus{{Namespace: &model.Namespace{Name: "default"}}}
		}),
		fakeOf(service.V1Namespace, s, status),
		fakeOf(service.V1ApplyNamespace, s, func(r service.Request[api.NamespaceRequest]) api.NamespaceStatus {
			return api.NamespaceStatus{Namespace: &model.Namespace{Name: r.ID, Weight: *r.Body.Weight}}
		}),
		fakeOf(service.V1DeleteNamespace, s, func(r service.Request[api.NoBody]) *model.Namespace { return &model.Namespace{Name: r.ID} }),
		fakeOf(service.V1CreateACLToken, s, func(r service.Request[api.ACLTokenRequest]) api.ACLTokenCreated {
			return api.ACLTokenCreated{Accessor: "a1", Secret: "dns.x", Namespaces: r.Body.Namespaces}
		}),
		fakeOf(service.V1ACLTokens, s, func(service.Request[api.NoBody]) []*model.ACLToken { return []*model.ACLToken{{Accessor: "a1"}} }),
		fakeOf(service.V1RevokeACLToken, s, func(r service.Request[api.NoBody]) *model.ACLToken { return &model.ACLToken{Accessor: r.ID} }),
	}
}

// The namespace and token endpoints are routed as described: a follower
// sends each to the leader, whose handler alone runs with the path's name
// and the body; reads take a read credential, every change the operator
// token, and a submit token is refused 403 before any handler runs.
func TestNamespaceEndpointsRouteAndForward(t *testing.T) {
	const opTok, subTok = "OperatorTok-0123456789abcdef", "SubmitTok-abcdefghij0123456"
	g, err := auth.New(auth.Config{OperatorToken: opTok, SubmitToken: subTok})
	if err != nil {
		t.Fatal(err)
	}
	atLeader, atFollower := &served{}, &served{}
	leader := httptest.NewServer(listener(t, g, forward.New(leading, http.DefaultClient, "http"), leading, nsEndpoints(atLeader)...))
	defer leader.Close()
	following := func() service.Leadership {
		return service.Leadership{Self: "m2", Role: raft.Follower.String(), LeaderID: "m1", LeaderHTTP: strings.TrimPrefix(leader.URL, "http://")}
	}
	h := listener(t, g, forward.New(following, leader.Client(), "http"), following, nsEndpoints(atFollower)...)
	send := func(tok, method, target, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			r.Header.Set("Content-Type", api.ContentTypeJSON)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		method, target, body string
		operatorOnly         bool
		row, answer          string
	}{
		{"GET", "/v1/namespaces", "", false, "", `[{"name":"default"`},
		{"GET", "/v1/namespaces/etl", "", false, "etl", `"name":"etl"`},
		{"PUT", "/v1/namespaces/etl", `{"weight":3}`, true, "etl", `"weight":3`},
		{"DELETE", "/v1/namespaces/etl", "", true, "etl", `"name":"etl"`},
		{"POST", "/v1/acl/tokens", `{"namespaces":["etl"],"policy":"read"}`, true, "", `"namespaces":["etl"]`},
		{"GET", "/v1/acl/tokens", "", true, "", `[{"accessor":"a1"`},
		{"DELETE", "/v1/acl/tokens/a1", "", true, "a1", `"accessor":"a1"`},
	} {
		what := c.method + " " + c.target
		before := len(atLeader.list())
		if c.operatorOnly {
			if w := send(subTok, c.method, c.target, c.body); w.Code != http.StatusForbidden || len(atLeader.list()) != before {
				t.Errorf("%s with the submit token: %d %s; want 403 and no handler run", what, w.Code, w.Body)
			}
		}
		tok := opTok
		if !c.operatorOnly {
			tok = subTok
		}
		w := send(tok, c.method, c.target, c.body)
		rows := atLeader.list()
		if w.Code != 200 || !strings.Contains(w.Body.String(), c.answer) || len(rows) != before+1 || rows[before] != c.row {
			t.Errorf("%s through the follower: %d %s, leader served %q; want 200 with %s, served once by the leader for %q", what, w.Code, w.Body, rows, c.answer, c.row)
		}
	}
	if n := len(atFollower.list()); n != 0 {
		t.Errorf("the follower's handlers ran %d times; want every request forwarded", n)
	}
	if w := send(opTok, "PUT", "/v1/namespaces/etl", `{"weight":3,"bogus":1}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `unknown field`) {
		t.Errorf("PUT with an unknown field: %d %s; want 400", w.Code, w.Body)
	}
}

// A list's namespace filter reaches the handler, on a follower's list
// forwarded to the leader too.
func TestListNamespaceQueryIsForwarded(t *testing.T) {
	g := openGuard(t)
	seen := make(chan string, 1)
	list := &service.Endpoint[api.NoBody, api.DriverPage]{Info: rows.Info, Rows: rows.Rows,
		Serve: func(_ *service.Local, _ context.Context, _ auth.Caller, r service.Request[api.NoBody]) (api.DriverPage, error) {
			seen <- r.List.Namespace
			return api.DriverPage{Drivers: []*model.Driver{}}, nil
		}}
	leader := httptest.NewServer(listener(t, g, forward.New(leading, http.DefaultClient, "http"), leading, list))
	defer leader.Close()
	following := func() service.Leadership {
		return service.Leadership{Self: "m2", Role: raft.Follower.String(), LeaderID: "m1", LeaderHTTP: strings.TrimPrefix(leader.URL, "http://")}
	}
	h := listener(t, g, forward.New(following, leader.Client(), "http"), following, list)
	if w := do(h, "GET", "/v1/drivers?namespace=etl&limit=5", "", ""); w.Code != 200 {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	if ns := <-seen; ns != "etl" {
		t.Fatalf("the leader's list got namespace %q; want etl", ns)
	}
}
