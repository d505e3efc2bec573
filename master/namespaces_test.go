package master_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// unchanged fails the test unless the leader's tables hash as they did
// before a refusal: nothing of it reached them.
func unchanged(t *testing.T, c *mastertest.Cluster, what string, before *api.State) {
	t.Helper()
	after, err := c.Client().State(c.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.StateHash != before.StateHash {
		t.Errorf("%s: state hash %s -> %s; want the tables unchanged", what, before.StateHash, after.StateHash)
	}
}

// refused checks that err is one line wrapping want and saying say, the
// master's refusal rather than the tables' ("invalid command"), and that
// the tables are as before.
func refused(t *testing.T, c *mastertest.Cluster, what string, err, want error, say string, before *api.State) {
	t.Helper()
	if !errors.Is(err, want) || !strings.Contains(err.Error(), say) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "invalid command") {
		t.Errorf("%s: %v; want one line wrapping %v saying %q, from the master before any entry", what, err, want, say)
	}
	unchanged(t, c, what, before)
}

func state(t *testing.T, cl *client.Client, ctx context.Context) *api.State {
	t.Helper()
	st, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ptr[T any](v T) *T { return &v }

// Applying a namespace takes each setting given and a new namespace's
// default for each left out; every bound is refused at zero and past its
// limit, taken at its limit, with one line and nothing committed; status
// and list show the settings and what the namespace's work holds, and
// `default` is listed before anyone applies it.
func TestApplyNamespaceRules(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()

	ns, err := cl.Namespaces(ctx)
	if err != nil || len(ns) != 1 || ns[0].Name != model.DefaultNamespace || ns[0].DriverShare != 1 || ns[0].PriorityMax != model.MaxPriority {
		t.Fatalf("namespaces of a new cluster: %+v, %v; want the implicit default alone", ns, err)
	}

	st, err := cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{Cores: ptr(8), MemoryMB: ptr(int64(4096)),
		Resources: model.ResourceAmounts{"gpu": 2}, MaxRunningDrivers: ptr(3), MaxQueuedDrivers: ptr(5), PriorityMax: ptr(60)})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Quota{Cores: 8, MemoryMB: 4096, Resources: model.ResourceAmounts{"gpu": 2}, RunningDrivers: 3}
	if st.Name != "etl" || st.Quota.Cores != want.Cores || st.Quota.MemoryMB != want.MemoryMB || st.Quota.Resources["gpu"] != 2 ||
		st.Quota.RunningDrivers != 3 || st.MaxQueuedDrivers != 5 || st.PriorityMax != 60 ||
		st.Weight != model.DefaultWeight || st.DriverShare != model.DefaultDriverShare || st.Preempt || st.FairShare != 0 || st.Preemptions != 0 {
		t.Fatalf("applied etl: %+v; want the quota given, weight 1, driver share 0.5, no preemption", st)
	}
	// Applying again replaces: what is left out goes back to the default.
	if st, err = cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{Weight: ptr(3.0), Preempt: true}); err != nil ||
		st.Quota.Bounded() || st.MaxQueuedDrivers != 0 || st.PriorityMax != model.MaxPriority || st.Weight != 3 || !st.Preempt {
		t.Fatalf("etl applied again with a weight alone: %+v, %v; want the rest back to the defaults", st, err)
	}
	// At each limit.
	for _, req := range []api.NamespaceRequest{
		{Cores: ptr(1), MemoryMB: ptr(int64(1)), MaxRunningDrivers: ptr(1), MaxQueuedDrivers: ptr(1)},
		{Weight: ptr(float64(model.MaxWeight)), DriverShare: ptr(1.0), PriorityMax: ptr(model.MaxPriority)},
		{PriorityMax: ptr(0)},
		{Weight: ptr(model.MinWeight), Cores: ptr(model.MaxQuotaCount), MemoryMB: ptr(int64(model.MaxQuotaMemoryMB)),
			Resources: model.ResourceAmounts{"gpu": model.MaxQuotaCount}, MaxRunningDrivers: ptr(model.MaxQuotaCount), MaxQueuedDrivers: ptr(model.MaxQuotaCount)},
	} {
		if _, err := cl.ApplyNamespace(ctx, "at-limits", req); err != nil {
			t.Errorf("apply %+v: %v; want it taken", req, err)
		}
	}
	if _, err := cl.ApplyNamespace(ctx, strings.Repeat("a", model.MaxNamespaceLen), api.NamespaceRequest{}); err != nil {
		t.Errorf("a name of %d bytes: %v", model.MaxNamespaceLen, err)
	}

	before := state(t, cl, ctx)
	for _, c2 := range []struct {
		name string
		req  api.NamespaceRequest
		say  string
	}{
		{"etl", api.NamespaceRequest{Cores: ptr(0)}, "the cores quota must be positive, got 0"},
		{"etl", api.NamespaceRequest{Cores: ptr(-1)}, "the cores quota must be positive, got -1"},
		{"etl", api.NamespaceRequest{MemoryMB: ptr(int64(0))}, "the memory quota must be positive, got 0 MiB"},
		{"etl", api.NamespaceRequest{MaxRunningDrivers: ptr(0)}, "the running drivers bound must be positive, got 0"},
		{"etl", api.NamespaceRequest{MaxQueuedDrivers: ptr(0)}, "the queued drivers bound must be positive, got 0"},
		{"etl", api.NamespaceRequest{Resources: model.ResourceAmounts{"gpu": 0}}, "resource gpu: amount 0 is not from 1"},
		{"etl", api.NamespaceRequest{Weight: ptr(0.0)}, "the weight must be above 0 and at most 1e+06, got 0"},
		{"etl", api.NamespaceRequest{Weight: ptr(float64(model.MaxWeight) + 1)}, "the weight must be above 0 and at most 1e+06"},
		{"etl", api.NamespaceRequest{DriverShare: ptr(0.0)}, "the driver share must be above 0 and at most 1, got 0"},
		{"etl", api.NamespaceRequest{DriverShare: ptr(1.01)}, "the driver share must be above 0 and at most 1, got 1.01"},
		{"etl", api.NamespaceRequest{PriorityMax: ptr(model.MaxPriority + 1)}, "the highest priority must be 0 to 100, got 101"},
		{"etl", api.NamespaceRequest{PriorityMax: ptr(-1)}, "the highest priority must be 0 to 100, got -1"},
		{"etl", api.NamespaceRequest{Weight: ptr(5e-324)}, "the weight must be at least 0.001, got 5e-324"},
		{"etl", api.NamespaceRequest{Cores: ptr(model.MaxQuotaCount + 1)}, "the cores quota must be at most 16777216, got 16777217"},
		{"etl", api.NamespaceRequest{MaxRunningDrivers: ptr(model.MaxQuotaCount + 1)}, "the running drivers bound must be at most 16777216"},
		{"etl", api.NamespaceRequest{MaxQueuedDrivers: ptr(model.MaxQuotaCount + 1)}, "the queued drivers bound must be at most 16777216"},
		{"etl", api.NamespaceRequest{Resources: model.ResourceAmounts{"gpu": model.MaxQuotaCount + 1}}, "resource gpu: amount 16777217 is not from 1 to 16777216"},
		{"etl", api.NamespaceRequest{MemoryMB: ptr(int64(model.MaxQuotaMemoryMB) + 1)}, "the memory quota must be at most 1099511627776 MiB"},
	} {
		_, err := cl.ApplyNamespace(ctx, c2.name, c2.req)
		refused(t, c, "apply "+c2.say, err, api.ErrInvalidRequest, c2.say, before)
	}
	_, err = cl.ApplyNamespace(ctx, strings.Repeat("a", model.MaxNamespaceLen+1), api.NamespaceRequest{})
	refused(t, c, "a name past the bound", err, api.ErrInvalidRequest, "namespace name exceeds 63 bytes", before)
	// A name the client would refuse, sent as another program would.
	err = cl.Do(ctx, "PUT", api.PathNamespaces+"/Etl", api.NamespaceRequest{}, nil)
	refused(t, c, "PUT /v1/namespaces/Etl", err, api.ErrInvalidRequest, `namespace name "Etl" is not a DNS label`, before)

	_, err = cl.Namespace(ctx, "nosuch")
	refused(t, c, "status of an unknown namespace", err, model.ErrUnknownNamespace, "unknown namespace: nosuch", before)
}

// A submission names an existing namespace and a priority within its cap,
// and is refused at the namespace's --max-queued-drivers counting those
// in flight, alone and in a batch; a refusal commits nothing. Lists
// filter by namespace. A namespace is deleted only once its work has
// ended; `default` without settings cannot be deleted.
func TestSubmitIntoNamespaces(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()
	if _, err := cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{MaxQueuedDrivers: ptr(2), PriorityMax: ptr(60)}); err != nil {
		t.Fatal(err)
	}
	sub := func(ns string, prio *int) api.SubmitRequest {
		r := submitReq()
		r.Namespace, r.Priority = ns, prio
		return r
	}
	// No worker: drivers stay queued.
	first, err := cl.Submit(ctx, sub("etl", ptr(60)))
	if err != nil {
		t.Fatalf("priority 60, etl's cap: %v", err)
	}
	before := state(t, cl, ctx)
	for _, c2 := range []struct {
		req  api.SubmitRequest
		want error
		say  string
	}{
		{sub("nosuch", nil), model.ErrUnknownNamespace, "unknown namespace: nosuch: nothing submitted"},
		{sub("etl", ptr(61)), api.ErrInvalidRequest, "priority 61 is above namespace etl's --priority-max of 60"},
		{sub("etl", ptr(101)), api.ErrInvalidRequest, "priority must be 0 to 100, got 101"},
		{sub("etl", ptr(-1)), api.ErrInvalidRequest, "priority must be 0 to 100, got -1"},
		{sub("Etl", nil), api.ErrInvalidRequest, "is not a DNS label"},
	} {
		_, err := cl.Submit(ctx, c2.req)
		refused(t, c, "submit "+c2.say, err, c2.want, c2.say, before)
	}
	if _, err := cl.Submit(ctx, sub("etl", ptr(0))); err != nil {
		t.Fatalf("the second of --max-queued-drivers 2: %v", err)
	}
	before = state(t, cl, ctx)
	_, err = cl.Submit(ctx, sub("etl", nil))
	refused(t, c, "the third of --max-queued-drivers 2", err, model.ErrQueueFull, "namespace etl has 2 drivers waiting, its --max-queued-drivers (2)", before)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Code != api.CodeQueueFull {
		t.Errorf("queue full: %#v; want 429 queue_full", err)
	}
	// In a batch each is answered alone: the default namespace takes its
	// submission, etl's is refused in place.
	var res api.SubmitBatchResponse
	if err := cl.Do(ctx, "POST", api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{sub("", nil), sub("etl", nil), sub("nosuch", nil)}}, &res); err != nil {
		t.Fatal(err)
	}
	if r := res.Results; len(r) != 3 || r[0].Error != nil || r[1].Error == nil || r[1].Error.Code != api.CodeQueueFull ||
		r[2].Error == nil || r[2].Error.Code != api.CodeUnknownNamespace {
		t.Fatalf("batch: %+v; want the default's taken, etl's queue_full, nosuch's unknown_namespace", r)
	}

	// Lists keep one namespace when asked, every one otherwise.
	count := func(ns string) int {
		n := 0
		if err := cl.ListDrivers(ctx, api.ListQuery{Namespace: ns}, func(ds []*model.Driver) error {
			for _, d := range ds {
				if ns != "" && model.NamespaceOf(d.Namespace) != ns {
					t.Errorf("list of %s has %s of %q", ns, d.ID, d.Namespace)
				}
			}
			n += len(ds)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if etl, def, all := count("etl"), count(model.DefaultNamespace), count(""); etl != 2 || def != 1 || all != 3 {
		t.Errorf("lists: etl %d, default %d, all %d; want 2, 1, 3", etl, def, all)
	}
	if err := cl.ListDrivers(ctx, api.ListQuery{Namespace: "../etl"}, func([]*model.Driver) error { return nil }); !errors.Is(err, api.ErrInvalidRequest) {
		t.Errorf("list of namespace ../etl: %v; want 400", err)
	}
	st, err := cl.Namespace(ctx, "etl")
	if err != nil || st.Queued != 2 || st.Running != 0 {
		t.Errorf("etl's status: %+v, %v; want 2 queued", st, err)
	}

	before = state(t, cl, ctx)
	_, err = cl.DeleteNamespace(ctx, "etl")
	refused(t, c, "delete etl while it holds drivers", err, model.ErrNamespaceInUse, "namespace etl holds 2 drivers and 0 apps that have not ended: nothing deleted", before)
	_, err = cl.DeleteNamespace(ctx, "nosuch")
	refused(t, c, "delete an unknown namespace", err, model.ErrUnknownNamespace, "unknown namespace: nosuch: nothing deleted", before)
	_, err = cl.DeleteNamespace(ctx, model.DefaultNamespace)
	refused(t, c, "delete default without settings", err, api.ErrInvalidRequest, "namespace default always exists and has no settings of its own: nothing deleted", before)

	for _, id := range []string{first.DriverID} {
		if err := cl.Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ListDrivers(ctx, api.ListQuery{Namespace: "etl"}, func(ds []*model.Driver) error {
		for _, d := range ds {
			if err := cl.Kill(ctx, d.ID); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A schedule of etl holds it too, until the schedule is deleted.
	if _, err := cl.CreateSchedule(ctx, api.ScheduleRequest{Name: "etl-nightly", Cron: "@daily",
		Template: api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64, Namespace: "etl"}}}); err != nil {
		t.Fatal(err)
	}
	before = state(t, cl, ctx)
	_, err = cl.DeleteNamespace(ctx, "etl")
	refused(t, c, "delete etl while it holds a schedule", err, model.ErrNamespaceInUse, "namespace etl holds 1 schedule (etl-nightly): nothing deleted; delete them first", before)
	if _, err := cl.DeleteSchedule(ctx, "etl-nightly"); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.DeleteNamespace(ctx, "etl"); err != nil || n.Name != "etl" || n.MaxQueuedDrivers != 2 {
		t.Fatalf("delete etl once its drivers ended: %+v, %v", n, err)
	}
	if _, err := cl.Namespace(ctx, "etl"); !errors.Is(err, model.ErrUnknownNamespace) {
		t.Errorf("etl after its deletion: %v; want unknown", err)
	}
	// The ended drivers still name it, and a list of it finds them.
	if n := count("etl"); n != 2 {
		t.Errorf("list of the deleted etl: %d drivers; want its 2 ended ones", n)
	}
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A token is made by the master: a random UUID accessor and a secret
// with its prefix that the masters take as a bearer token, shown once;
// lists never show a secret or its hash; each bad request is one line
// and commits nothing; revoking drops it, and an unknown accessor is 404.
func TestACLTokenRules(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()
	if _, err := cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cl.CreateACLToken(ctx, api.ACLTokenRequest{Namespaces: []string{"etl", model.DefaultNamespace}, Policy: model.PolicySubmit,
		Name: strings.Repeat("n", model.MaxTokenNameLen), TTLMS: api.MinTokenTTL})
	if err != nil {
		t.Fatal(err)
	}
	if !uuidForm.MatchString(tok.Accessor) || !strings.HasPrefix(tok.Secret, "dns.") || auth.CheckToken(tok.Secret) != nil ||
		tok.ExpiresAt != tok.CreatedAt+api.MinTokenTTL || tok.Policy != model.PolicySubmit || len(tok.Namespaces) != 2 {
		t.Fatalf("created %+v; want a UUID accessor, a dns. secret auth takes, expiry a second after creation", tok)
	}
	other, err := cl.CreateACLToken(ctx, api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead, TTLMS: api.MaxTokenTTL})
	if err != nil || other.Accessor == tok.Accessor || other.Secret == tok.Secret {
		t.Fatalf("a second token: %+v, %v; want its own accessor and secret", other, err)
	}
	var raw []map[string]any
	if err := cl.Do(ctx, "GET", api.PathACLTokens, nil, &raw); err != nil || len(raw) != 2 {
		t.Fatalf("token list: %v, %v", raw, err)
	}
	b, _ := json.Marshal(raw)
	if strings.Contains(string(b), "secret") || strings.Contains(string(b), tok.Secret) {
		t.Fatalf("the token list shows a secret or its hash: %s", b)
	}

	before := state(t, cl, ctx)
	for _, c2 := range []struct {
		req  api.ACLTokenRequest
		want error
		say  string
	}{
		{api.ACLTokenRequest{Namespaces: []string{"nosuch"}, Policy: model.PolicyRead}, model.ErrUnknownNamespace, "unknown namespace: nosuch: no token made"},
		{api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: "admin"}, api.ErrInvalidRequest, `policy "admin" is not read or submit`},
		{api.ACLTokenRequest{Policy: model.PolicyRead}, api.ErrInvalidRequest, "the token names no namespace"},
		{api.ACLTokenRequest{Namespaces: []string{"etl", "etl"}, Policy: model.PolicyRead}, api.ErrInvalidRequest, "names namespace etl twice"},
		{api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead, TTLMS: api.MinTokenTTL - 1}, api.ErrInvalidRequest, "ttl_ms 999 must be from 1000"},
		{api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead, TTLMS: -1}, api.ErrInvalidRequest, "ttl_ms -1 must be from 1000"},
		{api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead, TTLMS: api.MaxTokenTTL + 1}, api.ErrInvalidRequest, "(ten years)"},
		{api.ACLTokenRequest{Namespaces: []string{"etl"}, Policy: model.PolicyRead, Name: strings.Repeat("n", model.MaxTokenNameLen+1)}, api.ErrInvalidRequest, "name exceeds 256 bytes"},
	} {
		_, err := cl.CreateACLToken(ctx, c2.req)
		refused(t, c, "create "+c2.say, err, c2.want, c2.say, before)
	}
	_, err = cl.RevokeACLToken(ctx, "nosuch")
	refused(t, c, "revoke an unknown accessor", err, model.ErrUnknownToken, `unknown token: "nosuch"`, before)

	if r, err := cl.RevokeACLToken(ctx, tok.Accessor); err != nil || r.Accessor != tok.Accessor || r.SecretHash != "" {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if ts, err := cl.ACLTokens(ctx); err != nil || len(ts) != 1 || ts[0].Accessor != other.Accessor {
		t.Fatalf("tokens after the revoke: %+v, %v; want the other alone", ts, err)
	}
}
