package fairshare

import (
	"math"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// The drivers' limits are the driver share of the quota where it bounds
// cores or memory, else of the fair share of the cluster, rounded down to
// a whole core or MiB; a driver share of 1 bounds nothing.
func TestDriverLimits(t *testing.T) {
	n := ns("a", 1, model.Quota{Cores: 7})
	if c, m := DriverLimits(n, 0.3, Vector{Cores: 100, MemoryMB: 20}); c != 3 || m != math.MaxInt64 {
		t.Fatalf("limits %d cores, %d MiB; want 3 (half of 7) and memory unbounded", c, m)
	}
	n.Quota = model.Quota{}
	if c, m := DriverLimits(n, 0.3, Vector{Cores: 100, MemoryMB: 20}); c != 15 || m != 3 {
		t.Fatalf("limits %d cores, %d MiB; want 15 and 3 (0.5 x 0.3 x 100 and x 20)", c, m)
	}
	n.DriverShare = 1
	if c, m := DriverLimits(n, 0.3, Vector{}); c != math.MaxInt64 || m != math.MaxInt64 {
		t.Fatalf("a driver share of 1 bounds %d cores, %d MiB", c, m)
	}
}

// Admits names the bound a placement would pass: the quota first, then
// the driver share, which executors and a namespace's first driver pass.
func TestAdmits(t *testing.T) {
	n := ns("etl", 1, model.Quota{Cores: 8})
	c := Vector{Cores: 100, MemoryMB: 1 << 20}
	u := &fsm.NamespaceUse{Cores: 8, DriverCores: 2, RunningDrivers: 2}
	if r, ok := Admits(n, u, 0, c, 1, 1, nil, 0, false); ok || r != (Refusal{Kind: ByQuota, Bound: "cores", Used: 8, Limit: 8}) {
		t.Fatalf("an executor past the quota: %+v %v", r, ok)
	}
	u = &fsm.NamespaceUse{Cores: 4, DriverCores: 4, RunningDrivers: 4}
	if r, ok := Admits(n, u, 0, c, 1, 1, nil, 0, true); ok || r != (Refusal{Kind: ByDriverShare, Bound: "cores", Used: 4, Limit: 4}) {
		t.Fatalf("a driver past half the quota: %+v %v", r, ok)
	}
	if _, ok := Admits(n, u, 0, c, 1, 1, nil, 0, false); !ok {
		t.Fatal("an executor was held to the driver share")
	}
	n.DriverShare = 0.01
	if _, ok := Admits(n, &fsm.NamespaceUse{}, 0, c, 1, 1, nil, 0, true); !ok {
		t.Fatal("a namespace's first driver was held to its driver share")
	}
}

// A driver whose app will ask for cores is admitted while the namespace's
// held cores, its placed drivers' apps' asks, the driver and its app fit
// the quota's cores, or the fair share's without a quota; at the bound
// it passes, one core past it it is refused with the held and asked
// cores; an unknown ask (0), a namespace's first driver and a driver
// share of 1 are not held to it.
func TestAdmitsKeepsRoomForTheApp(t *testing.T) {
	n := ns("etl", 1, model.Quota{Cores: 10})
	n.DriverShare = 0.5
	c := Vector{Cores: 100, MemoryMB: 1 << 20}
	u := &fsm.NamespaceUse{Cores: 1, DriverCores: 1, RunningDrivers: 1, AppCoresAsked: 4}
	if _, ok := Admits(n, u, 0, c, 1, 1, nil, 4, true); !ok {
		t.Fatal("a driver and its app at the quota's 10 cores were refused")
	}
	if r, ok := Admits(n, u, 0, c, 1, 1, nil, 5, true); ok || r != (Refusal{Kind: ByAppCores, Bound: "cores", Used: 5, Limit: 10}) {
		t.Fatalf("one core past the quota: %+v %v", r, ok)
	}
	if _, ok := Admits(n, u, 0, c, 1, 1, nil, 0, true); !ok {
		t.Fatal("a driver without an ask was held to its app's room")
	}
	if _, ok := Admits(n, &fsm.NamespaceUse{}, 0, c, 1, 1, nil, 50, true); !ok {
		t.Fatal("a namespace's first driver was held to its app's room")
	}
	n.Quota = model.Quota{}
	if r, ok := Admits(n, u, 0.1, c, 1, 1, nil, 5, true); ok || r.Limit != 10 {
		t.Fatalf("past 0.1 of 100 cores: %+v %v", r, ok)
	}
	n.DriverShare = 1
	if _, ok := Admits(n, u, 0.1, c, 1, 1, nil, 50, true); !ok {
		t.Fatal("a driver share of 1 held a driver to its app's room")
	}
}
