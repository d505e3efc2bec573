package httpapi

import (
	"context"
	"io"
	"log/slog"
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

// echo is a fake endpoint that takes a body: it answers the body's
// executor IDs reversed, and records who called it.
type echo struct {
	mu      sync.Mutex
	callers []auth.Caller
}

func (e *echo) endpoint() *service.Endpoint[api.KillExecutorsRequest, api.AppStatus] {
	return &service.Endpoint[api.KillExecutorsRequest, api.AppStatus]{
		Info: service.Info{Route: api.V1KillExecutors.Route, Access: auth.App},
		Serve: func(_ *service.Local, _ context.Context, c auth.Caller, r service.Request[api.KillExecutorsRequest]) (api.AppStatus, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.callers = append(e.callers, c)
			if r.ID == "app-20260101000000-9999" {
				return api.AppStatus{}, model.ErrUnknownApp
			}
			ids := r.Body.ExecutorIDs
			out := api.AppStatus{App: &model.App{ID: r.ID}}
			for i := len(ids) - 1; i >= 0; i-- {
				out.Executors = append(out.Executors, &model.Executor{ID: ids[i]})
			}
			return out, nil
		},
	}
}

func (e *echo) calls() []auth.Caller {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]auth.Caller(nil), e.callers...)
}

// row is a fake blocking read of one row, and rows a fake list; each
// says in its answer which master forwarded the request to it ("" for
// none), and kill is a fake POST that takes no body.
var (
	row = &service.Endpoint[api.NoBody, *model.Driver]{
		Info: service.Info{Route: api.V1Driver.Route, Access: auth.Read, Answer: service.AtLeaderOrStale, Query: service.BlockingQuery},
		Serve: func(_ *service.Local, _ context.Context, c auth.Caller, r service.Request[api.NoBody]) (*model.Driver, error) {
			return &model.Driver{ID: r.ID, ModifyIndex: 40 + r.Read.Index, Message: c.ForwardedBy}, nil
		},
		Index: func(d *model.Driver) uint64 { return d.ModifyIndex },
	}
	rows = &service.Endpoint[api.NoBody, api.DriverPage]{
		Info: service.Info{Route: api.V1Drivers.Route, Access: auth.Read, Answer: service.AtLeaderOrStale, Query: service.ListingQuery},
		Serve: func(_ *service.Local, _ context.Context, c auth.Caller, r service.Request[api.NoBody]) (api.DriverPage, error) {
			p := api.DriverPage{Drivers: []*model.Driver{{ID: "driver-20260101000000-0000", Message: c.ForwardedBy}}}
			if r.List.Limit == 1 {
				p.Next = "driver-20260101000000-0001"
			}
			return p, nil
		},
		Rows: func(p *api.DriverPage) any { return &p.Drivers },
	}
	kill = &service.Endpoint[api.NoBody, api.KillResponse]{
		Info: service.Info{Route: api.V1KillDriver.Route, Access: auth.Submit},
		Serve: func(*service.Local, context.Context, auth.Caller, service.Request[api.NoBody]) (api.KillResponse, error) {
			return api.KillResponse{}, nil
		},
	}
)

// leading is what a master that leads knows.
func leading() service.Leadership {
	return service.Leadership{Self: "m1", Role: raft.Leader.String(), Ready: true, LeaderID: "m1"}
}

// listener is one master's /v1 listener routing only eps, in front of
// router.
func listener(t *testing.T, g *auth.Guard, router service.Router, lead func() service.Leadership, eps ...service.Routed) http.Handler {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mux := http.NewServeMux()
	Register(mux, Config{Chain: service.NewChain(nil, router, g, log, service.Bounds{}, nil), Endpoints: eps, Guard: g,
		Leadership: lead, Log: log})
	return mux
}

func openGuard(t *testing.T) *auth.Guard {
	t.Helper()
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// do sends one request to h and returns its answer.
func do(h http.Handler, method, target, contentType, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A JSON endpoint is served as its description says: the path's row and
// the strict JSON body reach its handler, its answer comes back as JSON,
// its refusal as an api.Error with its code's status; a blocking read
// takes index and wait and answers X-Drover-Index; a list is an array, or
// a page when it asks for one; a POST that takes no body refuses one.
func TestServeByTheDescription(t *testing.T) {
	e := &echo{}
	h := listener(t, openGuard(t), forward.New(leading, http.DefaultClient, "http"), leading, e.endpoint(), row, rows, kill)
	w := do(h, "POST", "/v1/apps/app-20260101000000-0001/executors/kill", api.ContentTypeJSON, `{"executor_ids":[1,2,3]}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"id":"app-20260101000000-0001"`) ||
		!strings.Contains(w.Body.String(), `{"app_id":"","id":3,`) {
		t.Fatalf("kill executors: %d %s", w.Code, w.Body)
	}
	w = do(h, "POST", "/v1/apps/app-20260101000000-9999/executors/kill", api.ContentTypeJSON, `{}`)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"unknown_app"`) {
		t.Fatalf("unknown app: %d %s", w.Code, w.Body)
	}
	before := len(e.calls())
	for _, tc := range []struct{ name, contentType, body string }{
		{"unknown field", api.ContentTypeJSON, `{"executors":[1]}`},
		{"trailing data", api.ContentTypeJSON, `{} {}`},
		{"not JSON", "text/plain", `{}`},
	} {
		if w := do(h, "POST", "/v1/apps/app-20260101000000-0001/executors/kill", tc.contentType, tc.body); w.Code/100 != 4 || !strings.Contains(w.Body.String(), `"code":`) {
			t.Errorf("%s: %d %s, want a refusal", tc.name, w.Code, w.Body)
		}
	}
	if n := len(e.calls()) - before; n != 0 {
		t.Fatalf("the handler ran %d times for bodies the listener refuses", n)
	}

	w = do(h, "GET", "/v1/drivers/driver-20260101000000-0000?index=2&wait=1s", "", "")
	if w.Code != 200 || w.Header().Get(api.HeaderIndex) != "42" {
		t.Fatalf("blocking read: %d %s, index %q", w.Code, w.Body, w.Header().Get(api.HeaderIndex))
	}
	for _, q := range []string{"index=x", "wait=soon", "wait=-1s"} {
		if w := do(h, "GET", "/v1/drivers/driver-20260101000000-0000?"+q, "", ""); w.Code != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", q, w.Code, w.Body)
		}
	}
	if w := do(h, "GET", "/v1/drivers", "", ""); w.Code != 200 || !strings.HasPrefix(w.Body.String(), `[{"id":"driver-20260101000000-0000"`) {
		t.Fatalf("whole list: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/drivers?limit=1", "", ""); w.Code != 200 || !strings.HasPrefix(w.Body.String(), `{"drivers":[{"id":`) ||
		!strings.Contains(w.Body.String(), `"next":"driver-20260101000000-0001"`) {
		t.Fatalf("page: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/drivers?limit=x", "", ""); w.Code != http.StatusBadRequest {
		t.Fatalf("?limit=x: %d %s, want 400", w.Code, w.Body)
	}
	if w := do(h, "POST", "/v1/drivers/driver-20260101000000-0000/kill", "", ""); w.Code != 200 {
		t.Fatalf("kill: %d %s", w.Code, w.Body)
	}
	if w := do(h, "POST", "/v1/drivers/driver-20260101000000-0000/kill", api.ContentTypeJSON, "{}"); w.Code != http.StatusBadRequest ||
		!strings.Contains(w.Body.String(), "this request takes no body") {
		t.Fatalf("kill with a body: %d %s, want 400", w.Code, w.Body)
	}
}

// readCounter is a body that counts the reads made of it.
type readCounter struct {
	io.Reader
	reads int
}

func (r *readCounter) Read(p []byte) (int, error) {
	r.reads++
	return r.Reader.Read(p)
}

// Where the masters require a credential, a request without any is
// refused 401 before its body is read, and one without the access its
// endpoint describes 403, before its handler runs.
func TestServeRefusesBeforeTheBody(t *testing.T) {
	g, err := auth.New(auth.Config{OperatorToken: "OperatorTok-0123456789abcdef", SubmitToken: "SubmitTok-abcdefghij0123456"})
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	h := listener(t, g, forward.New(leading, http.DefaultClient, "http"), leading, e.endpoint(), rows)
	body := &readCounter{Reader: strings.NewReader(`{"executor_ids":[1]}`)}
	r := httptest.NewRequest("POST", "/v1/apps/app-20260101000000-0001/executors/kill", body)
	r.Header.Set("Content-Type", api.ContentTypeJSON)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || body.reads != 0 {
		t.Fatalf("no credential: %d %s after %d reads of the body, want 401 before any", w.Code, w.Body, body.reads)
	}
	if w := do(h, "GET", "/v1/drivers", "", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("a list without a credential: %d %s, want 401", w.Code, w.Body)
	}
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the handler ran %d times for refused callers", n)
	}
}

// A follower sends what only the leader answers to the leader, once,
// naming itself: the leader's handler runs and the follower's does not,
// the leader's answer and refusals come back as they are, a list whole or
// paged and a blocking read with its index; a stale read is answered
// where it arrives.
func TestFollowerForwardsToTheLeader(t *testing.T) {
	g := openGuard(t)
	atLeader, atFollower := &echo{}, &echo{}
	leader := httptest.NewServer(listener(t, g, forward.New(leading, http.DefaultClient, "http"), leading, atLeader.endpoint(), row, rows))
	defer leader.Close()
	following := func() service.Leadership {
		return service.Leadership{Self: "m2", Role: raft.Follower.String(), LeaderID: "m1", LeaderHTTP: strings.TrimPrefix(leader.URL, "http://")}
	}
	h := listener(t, g, forward.New(following, leader.Client(), "http"), following, atFollower.endpoint(), row, rows)

	w := do(h, "POST", "/v1/apps/app-20260101000000-0001/executors/kill", api.ContentTypeJSON, `{"executor_ids":[4,5]}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"executors":[{"app_id":"","id":5,`) {
		t.Fatalf("forwarded kill: %d %s", w.Code, w.Body)
	}
	if c := atLeader.calls(); len(c) != 1 || c[0].ForwardedBy != "m2" || len(atFollower.calls()) != 0 {
		t.Fatalf("the leader served %+v, the follower %d: want the leader once, forwarded by m2", c, len(atFollower.calls()))
	}
	w = do(h, "POST", "/v1/apps/app-20260101000000-9999/executors/kill", api.ContentTypeJSON, `{}`)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"unknown_app"`) {
		t.Fatalf("the leader's refusal, forwarded: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/drivers", "", ""); w.Code != 200 || !strings.HasPrefix(w.Body.String(), `[{"id":"driver-20260101000000-0000",`) || !strings.Contains(w.Body.String(), `"message":"m2"`) {
		t.Fatalf("forwarded whole list: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/drivers?limit=1", "", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"next":"driver-20260101000000-0001"`) ||
		!strings.Contains(w.Body.String(), `"message":"m2"`) {
		t.Fatalf("forwarded page: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/drivers?stale=true", "", ""); w.Code != 200 || strings.Contains(w.Body.String(), `"message"`) {
		t.Fatalf("stale list: %d %s, want it answered here", w.Code, w.Body)
	}
	w = do(h, "GET", "/v1/drivers/driver-20260101000000-0000?index=5&wait=1s", "", "")
	if w.Code != 200 || w.Header().Get(api.HeaderIndex) != "45" || !strings.Contains(w.Body.String(), `"message":"m2"`) {
		t.Fatalf("forwarded blocking read: %d %s, index %q", w.Code, w.Body, w.Header().Get(api.HeaderIndex))
	}
}

// A follower that knows no leader refuses with api.ErrUnavailable and
// runs nothing.
func TestFollowerWithoutALeaderRefuses(t *testing.T) {
	e := &echo{}
	alone := func() service.Leadership { return service.Leadership{Self: "m2", Role: raft.Follower.String()} }
	h := listener(t, openGuard(t), forward.New(alone, http.DefaultClient, "http"), alone, e.endpoint())
	w := do(h, "POST", "/v1/apps/app-20260101000000-0001/executors/kill", api.ContentTypeJSON, `{}`)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "master m2 knows no leader") || len(e.calls()) != 0 {
		t.Fatalf("no leader: %d %s, %d calls", w.Code, w.Body, len(e.calls()))
	}
}

// schedules are fake schedule endpoints: a create that answers the
// request's name and cron, and a list that answers the namespace its
// query named, each with the master that forwarded it.
var (
	createSchedule = &service.Endpoint[api.ScheduleRequest, api.ScheduleStatus]{
		Info: service.Info{Route: api.V1CreateSchedule.Route, Access: auth.Submit, Created: true},
		Serve: func(_ *service.Local, _ context.Context, c auth.Caller, r service.Request[api.ScheduleRequest]) (api.ScheduleStatus, error) {
			return api.ScheduleStatus{Schedule: model.Schedule{Name: r.Body.Name, Cron: r.Body.Cron, LastSkipReason: c.ForwardedBy}}, nil
		},
	}
	listSchedules = &service.Endpoint[api.NoBody, api.ScheduleList]{
		Info: service.Info{Route: api.V1Schedules.Route, Access: auth.Read, Answer: service.AtLeaderOrStale, Query: service.NamespaceQuery},
		Serve: func(_ *service.Local, _ context.Context, c auth.Caller, r service.Request[api.NoBody]) (api.ScheduleList, error) {
			return api.ScheduleList{Schedules: []api.ScheduleStatus{{Schedule: model.Schedule{Name: "ns-" + r.List.Namespace, LastSkipReason: c.ForwardedBy}}}}, nil
		},
	}
)

// A schedule's creation answers 201, forwarded by a follower too; the
// list reads namespace (or all_namespaces, which excludes it) from its
// query, and a follower passes it on.
func TestScheduleRoutes(t *testing.T) {
	g := openGuard(t)
	leader := httptest.NewServer(listener(t, g, forward.New(leading, http.DefaultClient, "http"), leading, createSchedule, listSchedules))
	defer leader.Close()
	following := func() service.Leadership {
		return service.Leadership{Self: "m2", Role: raft.Follower.String(), LeaderID: "m1", LeaderHTTP: strings.TrimPrefix(leader.URL, "http://")}
	}
	h := listener(t, g, forward.New(following, leader.Client(), "http"), following, createSchedule, listSchedules)
	w := do(h, "POST", api.PathSchedules, api.ContentTypeJSON, `{"name":"nightly","cron":"0 3 * * *","template":{"argv":["job"]}}`)
	if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `"name":"nightly","cron":"0 3 * * *"`) ||
		!strings.Contains(w.Body.String(), `"last_skip_reason":"m2"`) {
		t.Fatalf("forwarded create: %d %s, want 201 from the leader", w.Code, w.Body)
	}
	if w := do(h, "POST", api.PathSchedules, api.ContentTypeJSON, `{"name":"nightly","cron":"0 3 * * *","when":"now"}`); w.Code != http.StatusBadRequest {
		t.Fatalf("unknown field: %d %s, want 400", w.Code, w.Body)
	}
	for q, want := range map[string]string{"": `"name":"ns-"`, "?namespace=etl": `"name":"ns-etl"`, "?all_namespaces=true": `"name":"ns-"`} {
		if w := do(h, "GET", api.PathSchedules+q, "", ""); w.Code != 200 || !strings.Contains(w.Body.String(), want) || !strings.Contains(w.Body.String(), `"m2"`) {
			t.Errorf("GET %s: %d %s, want %s from the leader", q, w.Code, w.Body, want)
		}
	}
	for _, q := range []string{"?namespace=etl&all_namespaces=true", "?all_namespaces=maybe"} {
		if w := do(h, "GET", api.PathSchedules+q, "", ""); w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "\n{") {
			t.Errorf("GET %s: %d %s, want 400", q, w.Code, w.Body)
		}
	}
}
