package fairshare

import (
	"math"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// What keeps a namespace from placing more work (Refusal.Kind).
const (
	// ByQuota: the namespace's quota (fsm.NamespaceUse.Fits, the check
	// Apply makes).
	ByQuota = "quota"
	// ByDriverShare: its drivers hold their DriverShare of its quota or
	// fair share.
	ByDriverShare = "driver share"
	// ByAppCores: a driver share's other side, the room its drivers'
	// apps need: what the namespace holds and its placed drivers' apps
	// still ask (fsm.NamespaceUse.AppCoresAsked), with the new driver
	// and its app, would pass its cores bound (AppCoresBound).
	ByAppCores = "app cores"
)

// Refusal names the first bound that keeps a namespace from placing one
// more driver or executor: Kind is ByQuota or ByDriverShare, Bound the
// resource ("cores", "memory", "running drivers" or a custom resource's
// name), Used what the namespace holds of it (its drivers alone for the
// driver share) and Limit the bound, both in the bound's unit (MiB for
// memory).
type Refusal struct {
	Kind, Bound string
	Used, Limit int64
}

// NeedsFair reports whether n's driver share is a part of its fair share
// (it is below 1 and the quota bounds neither cores nor memory), so that
// Admits needs the namespace's Share.Fair.
func NeedsFair(n *model.Namespace) bool {
	return n.DriverShare < 1 && n.Quota.Cores == 0 && n.Quota.MemoryMB == 0
}

// Admits reports whether namespace n, whose work holds u, may place one
// more driver (driver true) or executor of cores, memory (MiB) and
// resources in a cluster of capacity c, and if not, why. The quota is
// checked as Apply checks it. A driver is also held to the driver share
// (YARN's maxAMShare): a namespace whose DriverShare is below 1 lets its
// drivers hold at most that part of its quota's cores and memory, each
// where the quota bounds it, or where the quota bounds neither, of its
// fair share of the cluster (fair, a Share.Fair, used only when
// NeedsFair; DriverLimits). A namespace with no driver running may always place
// one, as YARN's Capacity Scheduler activates a queue's first
// application whatever its AM limit: a share smaller than one driver must
// not starve the namespace.
//
// A driver whose app will ask for appCores cores (its
// DriverSpec.AppCores; 0 when unknown) is held, under the same driver
// share, to room for them too: what the namespace's work holds, what
// its placed drivers' apps still ask, the driver's cores and appCores
// together must stay within AppCoresBound, so that a driver is not
// started while its executors could never run (SPARK-27750; YARN's
// maxAMShare guards the same by a fraction). Its Used is then the held
// and asked cores, Limit the bound.
func Admits(n *model.Namespace, u *fsm.NamespaceUse, fair float64, c Vector, cores int, memoryMB int64, res model.ResourceAmounts, appCores int, driver bool) (Refusal, bool) {
	drivers := 0
	if driver {
		drivers = 1
	}
	if ok, bound, used, limit := u.Fits(n.Quota, cores, memoryMB, res, drivers); !ok {
		return Refusal{Kind: ByQuota, Bound: bound, Used: used, Limit: limit}, false
	}
	if !driver || n.DriverShare >= 1 || u.RunningDrivers == 0 {
		return Refusal{}, true
	}
	coreLimit, memLimit := DriverLimits(n, fair, c)
	switch {
	case int64(u.DriverCores+cores) > coreLimit:
		return Refusal{Kind: ByDriverShare, Bound: "cores", Used: int64(u.DriverCores), Limit: coreLimit}, false
	case u.DriverMemoryMB+memoryMB > memLimit:
		return Refusal{Kind: ByDriverShare, Bound: "memory", Used: u.DriverMemoryMB, Limit: memLimit}, false
	}
	if appCores > 0 {
		// An app registered with a larger cap than its driver's
		// AppCores may take an ask below 0 in a restart's overlap.
		held := int64(u.Cores) + int64(max(u.AppCoresAsked, 0))
		if limit := AppCoresBound(n, fair, c); held+int64(cores)+int64(appCores) > limit {
			return Refusal{Kind: ByAppCores, Bound: "cores", Used: held, Limit: limit}, false
		}
	}
	return Refusal{}, true
}

// AppCoresBound returns the cores namespace n's work and its drivers'
// apps' asks may hold together (Admits): its quota's cores where it
// bounds them, else, where the quota bounds neither cores nor memory,
// fair (a Share.Fair) of the cluster's cores c.Cores, rounded down;
// math.MaxInt64 where unbounded (a quota of memory alone).
func AppCoresBound(n *model.Namespace, fair float64, c Vector) int64 {
	switch {
	case n.Quota.Cores > 0:
		return int64(n.Quota.Cores)
	case NeedsFair(n):
		return int64(math.Floor(fair*float64(c.Cores) + 1e-9))
	}
	return math.MaxInt64
}

// DriverLimits returns the cores and memory (MiB) namespace n's drivers
// may hold together by its driver share: that part of the quota's cores
// and memory where it bounds them (the other one unbounded), or where it
// bounds neither, of fair (a Share.Fair) of the cluster's capacity c;
// rounded down to a whole core or MiB; math.MaxInt64 where unbounded, as
// for a driver share of 1.
func DriverLimits(n *model.Namespace, fair float64, c Vector) (cores, memoryMB int64) {
	if n.DriverShare >= 1 {
		return math.MaxInt64, math.MaxInt64
	}
	// The nudge keeps a product that is whole in exact arithmetic (0.5
	// of 0.3 of 20 cores) from rounding down to one less.
	part := func(of float64) int64 { return int64(math.Floor(n.DriverShare*of + 1e-9)) }
	if NeedsFair(n) {
		return part(fair * float64(c.Cores)), part(fair * float64(c.MemoryMB))
	}
	cores, memoryMB = math.MaxInt64, math.MaxInt64
	if n.Quota.Cores > 0 {
		cores = part(float64(n.Quota.Cores))
	}
	if n.Quota.MemoryMB > 0 {
		memoryMB = part(float64(n.Quota.MemoryMB))
	}
	return cores, memoryMB
}
