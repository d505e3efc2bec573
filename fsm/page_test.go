package fsm

import (
	"slices"
	"testing"

	"github.com/drover-project/drover/model"
)

// Pages walked from cursor to cursor give every driver a filter keeps,
// once, in ID order, for page sizes from one to past the table, and a
// limit of 0 gives them all: after drivers were pruned, and on tables a
// snapshot restored, whose order of IDs is rebuilt.
func TestDriverPagesWalkTheTable(t *testing.T) {
	s := buildTables(t, benchSizes{workers: 7, drivers: 2_000, waiting: 300})
	ended := map[string][]string{}
	var pruned []string
	for _, d := range s.f.State().Drivers()[100:400] {
		if d.State == model.DriverRunning {
			ended[d.WorkerID] = append(ended[d.WorkerID], d.ID)
			pruned = append(pruned, d.ID)
		}
	}
	s.report(ended, model.DriverFinished)
	s.must(&model.PruneCompleted{DriverIDs: pruned})
	if len(pruned) < 100 || len(s.f.State().Drivers()) != 2_000-len(pruned) {
		t.Fatalf("pruned %d of 2000, %d left", len(pruned), len(s.f.State().Drivers()))
	}
	walkPages(t, s.f)
	walkPages(t, restoreBytes(t, snapshotBytes(t, s.f)))
}

func walkPages(t *testing.T, f *FSM) {
	s := struct{ f *FSM }{f}
	running := func(d *model.Driver) bool { return d.State == model.DriverRunning }
	for _, keep := range []func(*model.Driver) bool{func(*model.Driver) bool { return true }, running} {
		var want []string
		for _, d := range s.f.State().Drivers() {
			if keep(d) {
				want = append(want, d.ID)
			}
		}
		all, more := s.f.State().DriverPage("", 0, keep)
		if more || !slices.Equal(driverIDs(all), want) {
			t.Fatalf("limit 0: %d drivers (more %t), want %d", len(all), more, len(want))
		}
		for _, limit := range []int{1, 7, 850, len(want) - 1, len(want), len(want) + 1} {
			var got []string
			after, pages := "", 0
			for {
				page, more := s.f.State().DriverPage(after, limit, keep)
				if len(page) > limit || more && len(page) != limit {
					t.Fatalf("limit %d: a page of %d, more %t", limit, len(page), more)
				}
				got = append(got, driverIDs(page)...)
				pages++
				if !more {
					break
				}
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: %d pages gave %d drivers, want %d in ID order", limit, pages, len(got), len(want))
			}
		}
	}
	// A cursor between IDs, and past the last, are positions too.
	all := s.f.State().Drivers()
	last := all[len(all)-1].ID
	if page, more := s.f.State().DriverPage(last, 10, func(*model.Driver) bool { return true }); len(page) != 0 || more {
		t.Fatalf("after the last driver: %d, more %t", len(page), more)
	}
	if page, _ := s.f.State().DriverPage(benchDriverID(41)+"~", 1, func(*model.Driver) bool { return true }); page[0].ID != benchDriverID(42) {
		t.Fatalf("after a cursor between two IDs: %s", page[0].ID)
	}
}

func driverIDs(ds []*model.Driver) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
