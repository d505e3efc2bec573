package service

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// explainWaiting sets the message of each waiting driver to why it waits;
// the tables hold no such reason, since it changes with every worker. The
// rows are the tables' own (fsm.State.Drivers), which must not change: a
// waiting driver's is replaced in ds by a copy with the message, which
// shares the rest of the row, its program included. tn gives the
// namespaces' reasons; nil for none.
func explainWaiting(ds []*model.Driver, ws []*model.Worker, tn *tenants) []*model.Driver {
	for i, d := range ds {
		if d.WorkerID != "" || d.State.Terminal() {
			continue
		}
		reason := tn.driverReason(d, waitReason(ws, d.Cores, d.MemoryMB, d.Resources, ""))
		// A relaunching driver keeps saying why it was relaunched while
		// there is room for it somewhere.
		if d.Message == "" || (reason != waitReasonFree && reason != waitReasonQueued) {
			c := *d
			c.Message = reason
			ds[i] = &c
		}
	}
	return ds
}

// readTries bounds atOneIndex's reads.
const readTries = 5

// atOneIndex returns what read gathers from the tables, read again while
// the FSM applied an entry during the read. Each of the tables' queries
// takes the lock on its own, so an answer built from several of them (a
// waiting driver's row, the workers, the namespaces' use) could mix two
// indexes: a driver read unplaced, then explained against a use that
// counts it placed, would say that it waits for its own cores. Entries
// rarely apply during a read, so the tries are bounded by readTries and
// the last is answered whatever the index did.
func atOneIndex[T any](f *fsm.FSM, read func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		before := f.Index()
		out, err := read()
		if err != nil || try == readTries || f.Index() == before {
			return out, err
		}
	}
}

// explainApp sets the message of an app that wants executors and has none
// to why it waits (Spark's "requires more resources than any of our
// workers have"); like explainWaiting, it is computed on read, on a copy
// of the app's row. tn gives the namespaces' reasons; nil for none.
func explainApp(s api.AppStatus, ws []*model.Worker, tn *tenants) api.AppStatus {
	a := s.App
	if a.State.Terminal() || a.CoresLeft() == 0 || a.ExecutorLimit == 0 {
		return s
	}
	for _, e := range s.Executors {
		if !e.State.Terminal() {
			return s
		}
	}
	c := *a
	c.Message = tn.appReason(a, waitReason(ws, a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, " per executor"))
	s.App = &c
	return s
}

// waitReason says why something asking for cores, memory (MiB) and custom
// resources on one worker is not placed; what qualifies the request in
// the message. A resource no ALIVE worker offers enough of makes the
// request unplaceable, as too many cores do.
func waitReason(ws []*model.Worker, cores int, memoryMB int64, res model.ResourceAmounts, what string) string {
	o := offerOf(ws, cores, memoryMB, res)
	switch {
	case o.alive == 0:
		return "waiting: no ALIVE worker"
	case o.fits == 0:
		return "waiting: " + o.unplaceable(what)
	case o.room > 0:
		return waitReasonQueued
	}
	return waitReasonFree
}

// offer is what the ALIVE workers offer a unit asking for cores,
// memoryMB (MiB) and res: how many there are, how many could hold it
// idle (fits) and now (room), and the most cores, memory and amount of
// each resource asked that one of them has.
type offer struct {
	cores                       int
	memoryMB                    int64
	res                         model.ResourceAmounts
	alive, fits, room, maxCores int
	maxMem                      int64
	most                        model.ResourceAmounts
}

// offerOf reads the offer of ws for the unit in one pass.
func offerOf(ws []*model.Worker, cores int, memoryMB int64, res model.ResourceAmounts) offer {
	o := offer{cores: cores, memoryMB: memoryMB, res: res, most: model.ResourceAmounts{}}
	for name := range res {
		o.most[name] = 0
	}
	for _, w := range ws {
		if w.State != model.WorkerAlive {
			continue
		}
		o.alive++
		o.maxCores, o.maxMem = max(o.maxCores, w.Cores), max(o.maxMem, w.MemoryMB)
		offered := w.Resources.Counts()
		for name := range res {
			o.most[name] = max(o.most[name], offered[name])
		}
		if w.CouldHold(cores, memoryMB, res) {
			o.fits++
		}
		if w.CoresFree() >= cores && w.MemoryFreeMB() >= memoryMB && res.Fits(w.ResourcesFree().Counts()) {
			o.room++
		}
	}
	return o
}

// unplaceable is why the unit can never be placed while the workers
// stay as they are: api.ReasonUnplaceable, what it asks (what
// qualifying it) and what the largest worker offers; "" when an ALIVE
// worker could hold it idle, or none is ALIVE.
func (o offer) unplaceable(what string) string {
	if o.alive == 0 || o.fits > 0 {
		return ""
	}
	asks, offers := "", ""
	if len(o.res) > 0 {
		asks, offers = ", "+o.res.String(), ", "+o.most.String()
	}
	return fmt.Sprintf("%s (asks %s, %d MiB%s%s; the largest worker offers %s, %d MiB%s)",
		api.ReasonUnplaceable, plural.Count(o.cores, "core"), o.memoryMB, asks, what, plural.Count(o.maxCores, "core"), o.maxMem, offers)
}

// Why something waits that fits on some ALIVE worker: there is room now,
// and the leader's next scheduling round places it; or there is none.
const (
	waitReasonQueued = "queued for placement"
	waitReasonFree   = "waiting for a worker with free resources"
)

// tenants is what one read needs to say why its waiting drivers and apps
// wait on their namespaces' account, read from the tables at most once
// per read and only when a row waits: the namespaces' settings and use,
// and, when a reason needs them, the waiting drivers' priorities and
// every namespace's fair share, so that a list of many waiting rows
// costs one pass over the queue, not one per row. A nil *tenants gives
// no such reason.
type tenants struct {
	st         *fsm.State
	ws         []*model.Worker
	maxDrivers int

	load     sync.Once
	settings map[string]*model.Namespace
	uses     map[string]fsm.NamespaceUse
	running  int
	capacity fairshare.Vector
	// shares are fairshare.Compute's, and ahead each namespace's waiting
	// drivers' priorities, highest first; each computed once, when a
	// reason first needs it.
	shares func() map[string]fairshare.Share
	ahead  func() map[string][]int
}

// newTenants returns the namespaces' reasons for one read of the tables
// st, which gives the workers ws, on a master whose --max-running-drivers
// is maxDrivers.
func newTenants(st *fsm.State, ws []*model.Worker, maxDrivers int) *tenants {
	return &tenants{st: st, ws: ws, maxDrivers: maxDrivers}
}

func (tn *tenants) read() {
	tn.load.Do(func() {
		tn.settings = map[string]*model.Namespace{}
		for _, n := range tn.st.Namespaces() {
			tn.settings[n.Name] = n
		}
		tn.uses = tn.st.NamespaceUses()
		for _, u := range tn.uses {
			tn.running += u.RunningDrivers
		}
		tn.capacity = fairshare.Capacity(tn.ws)
		tn.shares = sync.OnceValue(func() map[string]fairshare.Share { return fairshare.Compute(fairshare.Inputs(tn.st)) })
		tn.ahead = sync.OnceValue(func() map[string][]int {
			out := map[string][]int{}
			for _, d := range tn.st.WaitingDemands() {
				out[d.Namespace] = append(out[d.Namespace], d.Priority)
			}
			for _, ps := range out {
				sort.Sort(sort.Reverse(sort.IntSlice(ps)))
			}
			return out
		})
	})
}

// namespace returns the settings and use of namespace name; settings
// that bound nothing for one since deleted.
func (tn *tenants) namespace(name string) (*model.Namespace, fsm.NamespaceUse) {
	tn.read()
	n, ok := tn.settings[name]
	if !ok {
		n = model.ImplicitDefault()
		n.Name = name
	}
	return n, tn.uses[name]
}

// driverReason says why waiting driver d waits, given the reason the
// workers give (waitReason): in this order, its namespace's quota, its
// driver share, --max-running-drivers, no worker large enough, drivers
// of higher priority of its namespace ahead of it, other namespaces
// below their fair share waiting while its holds its own; else the
// workers' reason.
func (tn *tenants) driverReason(d *model.Driver, workers string) string {
	if tn == nil {
		return workers
	}
	name := model.NamespaceOf(d.Namespace)
	n, u := tn.namespace(name)
	fair := 0.0
	if fairshare.NeedsFair(n) {
		fair = tn.shares()[name].Fair
	}
	if r, ok := fairshare.Admits(n, &u, fair, tn.capacity, d.Cores, d.MemoryMB, d.Resources, d.AppCores, true); !ok {
		return refusalReason(name, r)
	}
	if tn.maxDrivers > 0 && tn.running >= tn.maxDrivers {
		return fmt.Sprintf("drivers are at --max-running-drivers (%d)", tn.maxDrivers)
	}
	if workers != waitReasonFree {
		return workers
	}
	if r := priorityReason(tn.ahead()[name], n.Priority(d.Priority)); r != "" {
		return r
	}
	return cmp.Or(tn.fairReason(name), workers)
}

// appReason says why waiting app a waits, given the workers' reason:
// its namespace's quota, no worker large enough, other namespaces below
// their fair share waiting; else the workers' reason.
func (tn *tenants) appReason(a *model.App, workers string) string {
	if tn == nil {
		return workers
	}
	name := model.NamespaceOf(a.Namespace)
	n, u := tn.namespace(name)
	if r, ok := fairshare.Admits(n, &u, 0, tn.capacity, a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, 0, false); !ok {
		return refusalReason(name, r)
	}
	if workers != waitReasonFree {
		return workers
	}
	return cmp.Or(tn.fairReason(name), workers)
}

// refusalReason words a namespace's refusal: "namespace etl is at its
// cores quota (8 of 8)", "driver share of etl reached (4 of 4 cores)",
// "driver share of etl reached: its work and its drivers' apps hold or
// ask 8 of 8 cores"; each starts with api.ReasonQuota or
// api.ReasonDriverShare, by which submit knows them.
func refusalReason(name string, r fairshare.Refusal) string {
	unit := ""
	if r.Bound == "memory" {
		unit = " MiB"
	}
	switch r.Kind {
	case fairshare.ByAppCores:
		return fmt.Sprintf(api.ReasonDriverShare+": its work and its drivers' apps hold or ask %d of %d cores", name, r.Used, r.Limit)
	case fairshare.ByDriverShare:
		if unit == "" {
			unit = " " + r.Bound
		}
		return fmt.Sprintf(api.ReasonDriverShare+" (%d of %d%s)", name, r.Used, r.Limit, unit)
	}
	return fmt.Sprintf(api.ReasonQuota+" (%d of %d%s)", name, r.Bound, r.Used, r.Limit, unit)
}

// priorityReason words the drivers of a namespace waiting ahead of one of
// priority p (ps: the namespace's waiting drivers' priorities, highest
// first): "priority: 3 drivers of priority 80 are ahead"; "" for none.
func priorityReason(ps []int, p int) string {
	n := sort.Search(len(ps), func(i int) bool { return ps[i] <= p })
	are := "are"
	if n == 1 {
		are = "is"
	}
	switch {
	case n == 0:
		return ""
	case ps[0] == ps[n-1]:
		return fmt.Sprintf("priority: %s of priority %d %s ahead", plural.Count(n, "driver"), ps[0], are)
	}
	return fmt.Sprintf("priority: %s of priority %d to %d are ahead", plural.Count(n, "driver"), ps[n-1], ps[0])
}

// maxFairNamed bounds the other namespaces a fair share reason names.
const maxFairNamed = 3

// fairReason words why namespace name's work waits for others' when the
// cluster has no room: it holds its fair share or more while others below
// theirs wait ("fair share: etl holds 0.62 of the cluster, ml 0.21");
// "" when not so.
func (tn *tenants) fairReason(name string) string {
	if len(tn.settings) < 2 {
		// Nobody else's share can hold one namespace back.
		return ""
	}
	shares := tn.shares()
	mine, ok := shares[name]
	if !ok || mine.Below() {
		return ""
	}
	var others []fairshare.Share
	for _, s := range shares {
		if s.Namespace != name && s.Below() && s.Demand > s.Dominant {
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		return ""
	}
	sort.Slice(others, func(i, j int) bool {
		if others[i].Dominant != others[j].Dominant {
			return others[i].Dominant < others[j].Dominant
		}
		return others[i].Namespace < others[j].Namespace
	})
	var b strings.Builder
	fmt.Fprintf(&b, "fair share: %s holds %.2f of the cluster", name, mine.Dominant)
	for _, s := range others[:min(len(others), maxFairNamed)] {
		fmt.Fprintf(&b, ", %s %.2f", s.Namespace, s.Dominant)
	}
	return b.String()
}
