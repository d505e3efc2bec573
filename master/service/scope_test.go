package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

func nsCaller(namespaces ...string) auth.Caller {
	return auth.Caller{Identity: auth.Identity{Token: auth.NamespaceToken, Accessor: "acc", Policy: model.PolicySubmit, Namespaces: namespaces}}
}

// A submission from a namespace token goes where the token allows: the
// namespace it names if granted, else its only namespace, else default
// when granted; otherwise a 403 naming what to do. Other callers' pass
// as they came.
func TestScopedNamespace(t *testing.T) {
	for _, tc := range []struct {
		c           auth.Caller
		named, want string
		refusal     string
	}{
		{nsCaller("etl"), "", "etl", ""},
		{nsCaller("etl"), "etl", "etl", ""},
		{nsCaller("etl"), "ml", "", "the submission is in namespace ml"},
		{nsCaller("etl"), model.DefaultNamespace, "", "namespace default"},
		{nsCaller(model.DefaultNamespace), "", "", ""},
		{nsCaller("etl", model.DefaultNamespace), "", "", ""},
		{nsCaller("etl", "ml"), "", "", "name one of etl, ml"},
		{nsCaller(), "", "", "the submit token acc grants no namespace (its namespaces were deleted)"},
		{nsCaller(), "etl", "", "the submission is in namespace etl, which the submit token acc of no namespace does not grant"},
		{auth.Caller{Identity: auth.Identity{Token: auth.SubmitToken}}, "ml", "ml", ""},
		{auth.Caller{Identity: auth.Identity{Token: auth.SubmitToken}}, "", "", ""},
	} {
		got, err := scopedNamespace(tc.c, tc.named)
		switch {
		case tc.refusal == "" && (err != nil || got != tc.want):
			t.Errorf("%v naming %q: %q, %v; want %q", tc.c.Identity, tc.named, got, err, tc.want)
		case tc.refusal != "" && (!errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("%v naming %q: %v; want a 403 saying %q", tc.c.Identity, tc.named, err, tc.refusal)
		}
	}
}

// A namespace token's event stream keeps its namespaces' drivers, apps
// and executors, every worker and resets; a delete is kept when the
// stream met the row in one of its namespaces, or the tables still hold
// it there, and left out otherwise.
func TestEventScope(t *testing.T) {
	f := fsm.New()
	apply := func(i uint64, cmd model.Command) {
		b, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if err, ok := f.ApplyCommand(i, b).(error); ok {
			t.Fatal(err)
		}
	}
	apply(1, &model.ApplyNamespace{Namespace: model.Namespace{Name: "ml", Weight: 1, DriverShare: 1, PriorityMax: 100}})
	apply(2, &model.RegisterApp{ID: "app-20240101000000-0001", Token: "a1", Name: "mine", Namespace: "", CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1, Argv: []string{"x"}, Time: 1})
	apply(3, &model.RegisterApp{ID: "app-20240101000000-0002", Token: "a2", Name: "theirs", Namespace: "ml", CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1, Argv: []string{"x"}, Time: 1})
	s := &eventScope{c: nsCaller(model.DefaultNamespace), state: f.State(), ns: map[string]string{}}
	d := func(id, ns string) api.Event {
		return api.Event{Kind: api.EventDriver, ID: id, Op: model.OpUpsert, Driver: &model.Driver{ID: id, DriverSpec: model.DriverSpec{Namespace: ns}}}
	}
	del := func(kind api.EventKind, id string) api.Event {
		return api.Event{Kind: kind, ID: id, Op: model.OpDelete}
	}
	for i, tc := range []struct {
		e    api.Event
		want bool
	}{
		{api.Event{Op: model.OpReset}, true},
		{api.Event{Kind: api.EventWorker, ID: "w1", Op: model.OpUpsert, Worker: &model.Worker{ID: "w1"}}, true},
		{d("driver-1", ""), true},
		{d("driver-2", "ml"), false},
		{del(api.EventDriver, "driver-1"), true},
		{del(api.EventDriver, "driver-2"), false},
		// Never met, and no longer in the tables: whose it was is unknown.
		{del(api.EventDriver, "driver-3"), false},
		{api.Event{Kind: api.EventExecutor, ID: "app-20240101000000-0001/1", Op: model.OpUpsert, Executor: &model.Executor{AppID: "app-20240101000000-0001", ID: 1}}, true},
		{api.Event{Kind: api.EventExecutor, ID: "app-20240101000000-0002/1", Op: model.OpUpsert, Executor: &model.Executor{AppID: "app-20240101000000-0002", ID: 1}}, false},
		{del(api.EventExecutor, "app-20240101000000-0001/1"), true},
		{del(api.EventExecutor, "app-20240101000000-0002/1"), false},
		{del(api.EventApp, "app-20240101000000-0001"), true},
		{del(api.EventApp, "app-20240101000000-0002"), false},
	} {
		if got := s.keep(tc.e); got != tc.want {
			t.Errorf("event %d (%s %s %s): kept %v, want %v", i, tc.e.Op, tc.e.Kind, tc.e.ID, got, tc.want)
		}
	}
}

// A namespace token's refusal names the token alone, also when another
// master forwarded the request with its certificate: the words are
// those of a request sent straight to the leader.
func TestScopeRefusalNamesTheTokenAlone(t *testing.T) {
	forwarded := nsCaller("etl")
	forwarded.Role, forwarded.NodeID, forwarded.Master = pki.RoleMaster, "m2", true
	want := "the submission is in namespace default, which the submit token acc of namespaces etl does not grant"
	for _, c := range []auth.Caller{nsCaller("etl"), forwarded} {
		if _, err := scopedNamespace(c, model.DefaultNamespace); err == nil || err.Error() != want {
			t.Errorf("%v submitting to default: %v; want %q", c.Identity, err, want)
		}
	}
}

// A list filtered by a namespace the token does not grant is refused as
// that namespace's status is (403 naming it), not answered empty, which
// would read as a namespace with nothing in it; a list without the
// filter, or filtered by a namespace granted, is for the rows to narrow.
func TestListOfAnotherNamespaceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		c       auth.Caller
		ns      string
		refusal string
	}{
		{nsCaller("ml"), "hog", "the submit token acc of namespaces ml does not grant namespace hog"},
		{nsCaller("ml"), model.DefaultNamespace, "the submit token acc of namespaces ml does not grant namespace default"},
		{nsCaller("ml"), "ml", ""},
		{nsCaller("ml"), "", ""},
		{nsCaller(model.DefaultNamespace), model.DefaultNamespace, ""},
		{auth.Caller{Identity: auth.Identity{Token: auth.SubmitToken}}, "hog", ""},
	} {
		for _, list := range []func() error{
			func() error {
				_, err := listFilterOf(Config{}, tc.c, api.ListQuery{Namespace: tc.ns}, model.DriverStates(), ids.CheckDriver)
				return err
			},
			func() error {
				_, err := listFilterOf(Config{}, tc.c, api.ListQuery{Namespace: tc.ns}, model.ApplicationStates(), ids.CheckApp)
				return err
			},
		} {
			err := list()
			switch {
			case tc.refusal == "" && err != nil:
				t.Errorf("%v listing %q: %v", tc.c.Identity, tc.ns, err)
			case tc.refusal != "" && (!errors.Is(err, api.ErrForbidden) || err.Error() != tc.refusal):
				t.Errorf("%v listing %q: %v; want a 403 saying %q", tc.c.Identity, tc.ns, err, tc.refusal)
			}
		}
	}
}
