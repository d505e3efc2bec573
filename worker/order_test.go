package worker

import (
	"testing"

	"github.com/drover-project/drover/api"
)

// The user an assignment names reaches the unit's order, for attempts and
// executors alike, and an assignment without one leaves the worker's
// default ("").
func TestOrdersCarryTheUser(t *testing.T) {
	got := orders(api.HeartbeatResponse{
		Assignments: []api.Assignment{
			{DriverID: "driver-20260101000000-0001", Attempt: 2, Argv: []string{"/bin/true"}, User: "etl"},
			{DriverID: "driver-20260101000000-0002", Attempt: 1, Argv: []string{"/bin/true"}},
		},
		Executors: []api.ExecutorAssignment{{AppID: "app-20260101000000-0001", ExecutorID: 0, Argv: []string{"/bin/true"}, User: "etl"}},
	})
	want := map[unitKey]string{
		attemptKey("driver-20260101000000-0001", 2): "etl",
		attemptKey("driver-20260101000000-0002", 1): "",
		executorKey("app-20260101000000-0001", 0):   "etl",
	}
	if len(got) != len(want) {
		t.Fatalf("%d orders, want %d", len(got), len(want))
	}
	for _, o := range got {
		if u, ok := want[o.key]; !ok || o.user != u {
			t.Errorf("%s: user %q, want %q", o.key, o.user, u)
		}
	}
}
