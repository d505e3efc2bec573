package fsm

import (
	"slices"
	"strings"

	"github.com/drover-project/drover/model"
)

// firstAfter keeps, of the rows offered to it, the limit+1 with the
// smallest IDs after a cursor: a page and the sign that another follows.
// It holds at most 2(limit+1) rows at a time, whatever the table's size,
// and sorts only those: a page of a million-row table costs one walk of
// the table, not a sorted copy of it. A limit of 0 keeps every row.
type firstAfter[T any] struct {
	id    func(T) string
	after string
	limit int
	rows  []T
	// below, once the rows were cut to limit+1, is the largest ID kept:
	// no row from there on can be in the page any more.
	below string
}

func (s *firstAfter[T]) offer(row T) {
	id := s.id(row)
	if id <= s.after || s.below != "" && id >= s.below {
		return
	}
	s.rows = append(s.rows, row)
	if s.limit > 0 && len(s.rows) >= 2*(s.limit+1) {
		s.cut()
	}
}

// cut sorts the rows and keeps limit+1 of them.
func (s *firstAfter[T]) cut() {
	slices.SortFunc(s.rows, func(a, b T) int { return strings.Compare(s.id(a), s.id(b)) })
	if s.limit > 0 && len(s.rows) > s.limit+1 {
		clear(s.rows[s.limit+1:])
		s.rows = s.rows[:s.limit+1]
		s.below = s.id(s.rows[s.limit])
	}
}

// page returns the rows in ID order, at most limit, and whether more
// were offered.
func (s *firstAfter[T]) page() ([]T, bool) {
	s.cut()
	if s.limit > 0 && len(s.rows) > s.limit {
		return s.rows[:s.limit], true
	}
	return s.rows, false
}

// DriverPage returns the drivers keep accepts whose IDs sort after
// after, ordered by ID: the first limit of them (all for 0), and whether
// more follow. keep runs under the tables' read lock, for every row: it
// must be quick and must not call the FSM. The rows are the table's own,
// as Driver's are.
func (f *FSM) DriverPage(after string, limit int, keep func(*model.Driver) bool) ([]*model.Driver, bool) {
	s := firstAfter[*model.Driver]{id: func(d *model.Driver) string { return d.ID }, after: after, limit: limit}
	f.mu.RLock()
	for _, d := range f.t.Drivers {
		if d.ID > after && keep(d) {
			s.offer(d)
		}
	}
	f.mu.RUnlock()
	return s.page()
}

// AppPage is DriverPage for apps: keep sees each app with its executors
// (the table's own, to read only), and the page's apps come with copies
// of theirs, as Apps gives them.
func (f *FSM) AppPage(after string, limit int, keep func(*model.App, []*model.Executor) bool) ([]*model.App, [][]*model.Executor, bool) {
	s := firstAfter[*model.App]{id: func(a *model.App) string { return a.ID }, after: after, limit: limit}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for id, a := range f.t.Apps {
		if id > after && keep(a, f.executorsOf(id)) {
			s.offer(a)
		}
	}
	apps, more := s.page()
	execs := make([][]*model.Executor, len(apps))
	for i, a := range apps {
		execs[i] = f.executorClones(a.ID)
	}
	return apps, execs, more
}
