package fsm

import (
	"slices"

	"github.com/drover-project/drover/model"
)

// orderDriver keeps driver id in t.driverIDs while it exists. A new
// driver's ID is most often the largest yet (IDs follow submission time
// and sequence), which appends. Called with the FSM's lock held.
func (t *tables) orderDriver(id string, exists bool) {
	i, found := slices.BinarySearch(t.driverIDs, id)
	switch {
	case exists && !found:
		t.driverIDs = slices.Insert(t.driverIDs, i, id)
	case !exists && found:
		t.driverIDs = slices.Delete(t.driverIDs, i, i+1)
	}
}

// firstAfter returns the first limit items of sorted ids after cursor
// that keep accepts (every one for a limit of 0), and whether another
// follows: a walk from the cursor that stops one past the page.
func firstAfter[T any](ids []string, after string, limit int, row func(string) T, keep func(T) bool) ([]T, bool) {
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++
	}
	var out []T
	for _, id := range ids[i:] {
		r := row(id)
		if !keep(r) {
			continue
		}
		if limit > 0 && len(out) == limit {
			return out, true
		}
		out = append(out, r)
	}
	return out, false
}

// DriverPage returns the drivers keep accepts whose IDs sort after
// after, ordered by ID: the first limit of them (all for 0), and whether
// more follow. It starts at after in the sorted IDs the FSM keeps, so a
// page of a million-row table costs the rows it reads, not a sort of the
// table. keep runs under the tables' read lock: it must be quick and
// must not call the FSM. The rows are the table's own, as Driver's are.
func (s *State) DriverPage(after string, limit int, keep func(*model.Driver) bool) ([]*model.Driver, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return firstAfter(s.t.driverIDs, after, limit, func(id string) *model.Driver { return s.t.Drivers[id] }, keep)
}

// AppPage is DriverPage for apps, each with its executors: keep sees the
// table's own (to read only), and the page's apps come with copies of
// theirs, as Apps gives them. Apps are few (--max-live-apps and
// --retained-apps bound them): a page sorts their IDs.
func (s *State) AppPage(after string, limit int, keep func(*model.App, []*model.Executor) bool) ([]*model.App, [][]*model.Executor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	apps, more := firstAfter(s.t.appIDs(), after, limit, func(id string) *model.App { return s.t.Apps[id] },
		func(a *model.App) bool { return keep(a, s.t.executorsOf(a.ID)) })
	execs := make([][]*model.Executor, len(apps))
	for i, a := range apps {
		execs[i] = s.t.executorClones(a.ID)
	}
	return apps, execs, more
}
