package service

import (
	"slices"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// The rules of a namespace token (auth.NamespaceToken), after Nomad's
// namespace ACLs: it sees and acts on the drivers, apps and executors of
// the namespaces it names, and nothing of any other. One row of another
// namespace, asked for by its ID, is refused with api.ErrForbidden naming
// that namespace (the ID was the caller's to know; the namespace tells an
// operator which token would do); lists, kill-all, the state, events and
// the pages built from them leave such rows out. Workers belong to no
// namespace: every caller that reads sees them, as it needs them to know
// why its work waits. Every other identity is global, as before.

// inScope refuses, with api.ErrForbidden naming the namespace, the row
// what (a driver's or an app's ID) of namespace ns ("" for
// model.DefaultNamespace) when c may not see it.
func inScope(c auth.Caller, what, ns string) error {
	if c.InNamespace(ns) {
		return nil
	}
	return api.Errorf(api.ErrForbidden, "%s is in namespace %s, which the %s does not grant", what, model.NamespaceOf(ns), c.TokenString())
}

// grantsNamespace refuses, with api.ErrForbidden naming it, namespace
// name ("" for model.DefaultNamespace) when c may not see it: what a
// caller that names a namespace (its status, a list filtered by it) gets,
// whether or not the namespace exists.
func grantsNamespace(c auth.Caller, name string) error {
	if c.InNamespace(name) {
		return nil
	}
	return api.Errorf(api.ErrForbidden, "the %s does not grant namespace %s", c.TokenString(), model.NamespaceOf(name))
}

// scopedNamespace returns the namespace a submission or an app
// registration from c that names namespace named ("" for none) goes to.
// A caller other than a namespace token gets named back unchanged. A
// namespace token must grant the one named (api.ErrForbidden naming it);
// naming none, it goes to the token's only namespace, or else to
// model.DefaultNamespace ("") when the token grants it, or is refused
// with a line listing the namespaces to name, or saying the token grants
// none when its namespaces were all deleted.
func scopedNamespace(c auth.Caller, named string) (string, error) {
	if c.Token != auth.NamespaceToken {
		return named, nil
	}
	switch {
	case named != "":
		return named, inScope(c, "the submission", named)
	case len(c.Namespaces) == 1 && c.Namespaces[0] != model.DefaultNamespace:
		return c.Namespaces[0], nil
	case slices.Contains(c.Namespaces, model.DefaultNamespace):
		return "", nil
	case len(c.Namespaces) == 0:
		// Deleting a namespace strips it from the tokens that named it
		// (model.DeleteNamespace), and may leave one naming none.
		return "", api.Errorf(api.ErrForbidden, "the %s token %s grants no namespace (its namespaces were deleted)", c.Policy, c.Accessor)
	}
	return "", api.Errorf(api.ErrForbidden, "the %s grants several namespaces and not %s: name one of %s (--namespace)",
		c.TokenString(), model.DefaultNamespace, strings.Join(c.Namespaces, ", "))
}

// scopeState leaves out of st the drivers and apps c may not see.
func scopeState(c auth.Caller, st *api.State) {
	if c.Token != auth.NamespaceToken {
		return
	}
	seen := map[string]bool{}
	st.Drivers = slices.DeleteFunc(st.Drivers, func(d *model.Driver) bool {
		seen[d.ID] = c.InNamespace(d.Namespace)
		return !seen[d.ID]
	})
	st.WaitingDrivers = slices.DeleteFunc(st.WaitingDrivers, func(id string) bool { return !seen[id] })
	st.Apps = slices.DeleteFunc(st.Apps, func(a api.AppStatus) bool { return !c.InNamespace(a.Namespace) })
}

// eventScope keeps, of one event stream of a namespace token, the events
// of rows of its namespaces and those of workers. The namespace of each
// driver, app and schedule (its template's) it meets is remembered, so that a delete, which carries
// no row, is kept when the row it drops was of the token's namespaces; a
// delete of a row the stream never met, and the master no longer holds,
// is left out, since whose it was is no longer known. It is used by the
// stream's one reader and is not safe for concurrent use.
type eventScope struct {
	c     auth.Caller
	state *fsm.State
	// ns is the namespace of each driver, app and schedule met, by
	// rowKey.
	ns map[string]string
}

// rowKey names a row of kind for eventScope.ns: a schedule's name may be
// any DNS label, a driver's ID among them.
func rowKey(kind model.EventKind, id string) string { return string(kind) + "/" + id }

// keep reports whether the stream passes e.
func (s *eventScope) keep(e model.Event) bool {
	switch {
	case e.Op == model.OpReset || e.Kind == model.EventWorker:
		return true
	case e.Kind == model.EventExecutor:
		appID := e.ID
		if e.Executor != nil {
			appID = e.Executor.AppID
		} else if i := strings.LastIndexByte(appID, '/'); i >= 0 {
			appID = appID[:i]
		}
		ns, ok := s.namespace(model.EventApp, appID)
		return ok && s.c.InNamespace(ns)
	}
	var ns string
	switch {
	case e.Driver != nil:
		ns = e.Driver.Namespace
	case e.App != nil:
		ns = e.App.Namespace
	case e.Schedule != nil:
		ns = e.Schedule.Template.Namespace
	default:
		var ok bool
		if ns, ok = s.namespace(e.Kind, e.ID); !ok {
			return false
		}
	}
	key := rowKey(e.Kind, e.ID)
	if e.Op == model.OpDelete {
		delete(s.ns, key)
	} else {
		s.ns[key] = ns
	}
	return s.c.InNamespace(ns)
}

// namespace returns the namespace of the driver, app or schedule id, as the stream
// met it or as the master's tables hold it now.
func (s *eventScope) namespace(kind model.EventKind, id string) (string, bool) {
	if ns, ok := s.ns[rowKey(kind, id)]; ok {
		return ns, true
	}
	switch kind {
	case model.EventSchedule:
		if sc, ok := s.state.Schedule(id); ok {
			return sc.Template.Namespace, true
		}
		return "", false
	case model.EventDriver:
		if d, ok := s.state.Driver(id); ok {
			return d.Namespace, true
		}
		return "", false
	}
	if a, _, ok := s.state.App(id); ok {
		s.ns[rowKey(kind, id)] = a.Namespace
		return a.Namespace, true
	}
	return "", false
}
