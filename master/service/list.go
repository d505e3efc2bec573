package service

import (
	"context"
	"path"
	"slices"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// listFilter is a checked api.ListQuery: what a list keeps of the rows
// and how many it returns (0: all).
type listFilter struct {
	states    map[string]bool
	name      string
	worker    string
	namespace string
	limit     int
	after     string
}

// listFilterOf checks q for a list of rows whose states are among known
// and whose IDs checkID accepts: known states, a well-formed glob of at
// most api.MaxNameFilter bytes, a worker ID, a namespace's name
// (model.CheckNamespace; it need not exist), a schedule's name
// (model.CheckScheduleName; it need not exist either), a limit within
// Config.MaxListLimit and a cursor that is an ID. Any other query is
// refused with api.ErrInvalidRequest naming what is wrong, before a row
// is read; a namespace c may not see is refused with api.ErrForbidden
// naming it (grantsNamespace), rather than answered with an empty list
// that would read as a namespace with nothing in it.
func listFilterOf[S ~string](cfg Config, c auth.Caller, q api.ListQuery, known []S, checkID func(string) error) (listFilter, error) {
	f := listFilter{name: q.Name, worker: q.Worker, namespace: q.Namespace, after: q.Cursor}
	for _, st := range q.States {
		if !slices.Contains(known, S(st)) {
			return f, api.Errorf(api.ErrInvalidRequest, "state %q is not one of %v", st, known)
		}
		if f.states == nil {
			f.states = map[string]bool{}
		}
		f.states[st] = true
	}
	if len(q.Name) > api.MaxNameFilter {
		return f, api.Errorf(api.ErrInvalidRequest, "name filter of %d bytes exceeds %d bytes", len(q.Name), api.MaxNameFilter)
	}
	if _, err := path.Match(q.Name, ""); err != nil {
		return f, api.Errorf(api.ErrInvalidRequest, "name filter %q is not a glob (path.Match syntax): %v", q.Name, err)
	}
	if q.Worker != "" {
		if err := ids.CheckWorker(q.Worker); err != nil {
			return f, api.Errorf(api.ErrInvalidRequest, "worker filter: %v", err)
		}
	}
	if q.Namespace != "" {
		if err := model.CheckNamespace(q.Namespace); err != nil {
			return f, api.Errorf(api.ErrInvalidRequest, "namespace filter: %v", err)
		}
		if err := grantsNamespace(c, q.Namespace); err != nil {
			return f, err
		}
	}
	if q.Schedule != "" {
		if err := model.CheckScheduleName(q.Schedule); err != nil {
			return f, api.Errorf(api.ErrInvalidRequest, "schedule filter: %v", err)
		}
	}
	if q.Cursor != "" {
		if err := checkID(q.Cursor); err != nil {
			return f, api.Errorf(api.ErrInvalidRequest, "cursor %q is not the ID of a row of this list: %v", q.Cursor, err)
		}
	}
	switch limit := cfg.MaxListLimit; {
	case q.Limit < 0:
		return f, api.Errorf(api.ErrInvalidRequest, "limit %d must be at least 1", q.Limit)
	case limit > 0 && q.Limit > limit:
		return f, api.Errorf(api.ErrInvalidRequest, "limit %d exceeds --max-list-page of %d rows", q.Limit, limit)
	case q.Limit > 0:
		f.limit = q.Limit
	case q.Cursor != "":
		f.limit = api.DefaultListLimit
		if limit > 0 {
			f.limit = min(f.limit, limit)
		}
	}
	return f, nil
}

// keeps reports whether f keeps a row of namespace ns ("" for the
// default) in state st named name.
func (f listFilter) keeps(ns, st, name string) bool {
	if f.states != nil && !f.states[st] || f.namespace != "" && f.namespace != model.NamespaceOf(ns) {
		return false
	}
	ok, _ := path.Match(f.name, name)
	return f.name == "" || ok
}

// next is the cursor after a page whose last row has ID last: "" when
// no more rows follow.
func next(more bool, last func() string) string {
	if !more {
		return ""
	}
	return last()
}

// Drivers serves V1Drivers: the rows q keeps of those the caller may see
// (inScope), a page of them when q asks for one, waiting ones explained.
func (s *Core) Drivers(_ context.Context, c auth.Caller, q api.ListQuery, r Read) (api.DriverPage, error) {
	f, err := listFilterOf(s.cfg, c, q, model.DriverStates(), ids.CheckDriver)
	if err != nil {
		return api.DriverPage{}, err
	}
	if err := s.readable(r); err != nil {
		return api.DriverPage{}, err
	}
	ds, more := s.FSM.State().DriverPage(f.after, f.limit, func(d *model.Driver) bool {
		return (f.worker == "" || d.WorkerID == f.worker) && (q.Schedule == "" || d.Schedule == q.Schedule) && f.keeps(d.Namespace, string(d.State), d.Name) && c.InNamespace(d.Namespace)
	})
	ws := s.FSM.State().Workers()
	return api.DriverPage{
		Drivers: explainWaiting(ds, ws, newTenants(s.FSM.State(), ws, s.cfg.MaxRunningDrivers)),
		Next:    next(more, func() string { return ds[len(ds)-1].ID }),
	}, nil
}

// Apps serves V1Apps: the apps q keeps of those the caller may see, with their executors and
// waiting ones explained, a page of them when q asks for one.
func (s *Applications) Apps(_ context.Context, c auth.Caller, q api.ListQuery, r Read) (api.AppPage, error) {
	f, err := listFilterOf(s.cfg, c, q, model.ApplicationStates(), ids.CheckApp)
	if err != nil {
		return api.AppPage{}, err
	}
	if err := s.readable(r); err != nil {
		return api.AppPage{}, err
	}
	return atOneIndex(s.FSM, func() (api.AppPage, error) {
		apps, execs, more := s.FSM.State().AppPage(f.after, f.limit, func(a *model.App, es []*model.Executor) bool {
			return (f.worker == "" || slices.ContainsFunc(es, func(e *model.Executor) bool { return e.WorkerID == f.worker })) &&
				f.keeps(a.Namespace, string(a.State), a.Name) && c.InNamespace(a.Namespace)
		})
		ws := s.FSM.State().Workers()
		out := api.AppPage{Apps: make([]api.AppStatus, len(apps))}
		tn := newTenants(s.FSM.State(), ws, s.cfg.MaxRunningDrivers)
		for i, a := range apps {
			out.Apps[i] = explainApp(api.AppStatus{App: a, Executors: execs[i]}, ws, tn)
		}
		out.Next = next(more, func() string { return apps[len(apps)-1].ID })
		return out, nil
	})
}
