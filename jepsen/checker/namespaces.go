package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// Names of the namespace checkers.
const (
	NameNamespaceQuotas   = "namespace-quotas"
	NamePreemptionVictims = "preemption-victims"
)

// use is what one namespace's work holds at one index, counted as the
// FSM counts it (fsm's driverCharge and executorCharge): a driver placed
// on a worker (WorkerID set) and not in a final state holds its cores,
// memory and resources and counts as running; one not placed and not
// ended waits (queued); an executor not in a final state holds its
// cores, memory and resources in its app's namespace.
type use struct {
	cores, running, queued, executors int
	memoryMB                          int64
	resources                         model.ResourceAmounts
}

// work says whether the namespace has work: something held or waiting.
func (u *use) work() bool { return u.running+u.queued+u.executors > 0 }

// tables are the rows as the log's events leave them.
type tables struct {
	drivers   map[string]*model.Driver
	apps      map[string]*model.App
	executors map[string]*model.Executor
	workers   map[string]*model.Worker
}

func newTables() *tables {
	return &tables{drivers: map[string]*model.Driver{}, apps: map[string]*model.App{},
		executors: map[string]*model.Executor{}, workers: map[string]*model.Worker{}}
}

// apply applies one event: a reset empties every table (the upserts of
// the same index that follow are the rows as they are then).
func (t *tables) apply(e api.Event) {
	if e.Op == api.OpReset {
		*t = *newTables()
		return
	}
	del := e.Op == api.OpDelete
	switch e.Kind {
	case api.EventDriver:
		setRow(t.drivers, e.ID, e.Driver, del)
	case api.EventApp:
		setRow(t.apps, e.ID, e.App, del)
	case api.EventExecutor:
		setRow(t.executors, e.ID, e.Executor, del)
	case api.EventWorker:
		setRow(t.workers, e.ID, e.Worker, del)
	}
}

func setRow[T any](m map[string]*T, id string, row *T, del bool) {
	if del || row == nil {
		delete(m, id)
		return
	}
	m[id] = row
}

// uses counts every namespace's use from the tables.
func (t *tables) uses() map[string]*use {
	out := map[string]*use{}
	of := func(ns string) *use {
		ns = model.NamespaceOf(ns)
		if out[ns] == nil {
			out[ns] = &use{}
		}
		return out[ns]
	}
	for _, d := range t.drivers {
		if d.State.Terminal() {
			continue
		}
		u := of(d.Namespace)
		if d.WorkerID == "" {
			u.queued++
			continue
		}
		u.running++
		u.hold(d.Cores, d.MemoryMB, d.Resources)
	}
	for _, e := range t.executors {
		if e.State.Terminal() {
			continue
		}
		ns := ""
		if a := t.apps[e.AppID]; a != nil {
			ns = a.Namespace
		}
		u := of(ns)
		u.executors++
		u.hold(e.Cores, e.MemoryMB, e.Resources.Counts())
	}
	return out
}

func (u *use) hold(cores int, memoryMB int64, res model.ResourceAmounts) {
	u.cores += cores
	u.memoryMB += memoryMB
	for k, n := range res {
		if u.resources == nil {
			u.resources = model.ResourceAmounts{}
		}
		u.resources[k] += n
	}
}

// capacity is the cores the ALIVE workers offer (master/fairshare's
// Capacity, in cores).
func (t *tables) capacity() int {
	n := 0
	for _, w := range t.workers {
		if w.State == model.WorkerAlive {
			n += w.Cores
		}
	}
	return n
}

// replay applies the log's events in index order and calls visit once
// per index, with that index's events and the tables as they left them.
func replay(events []api.Event, visit func(index uint64, batch []api.Event, t *tables)) {
	evs := slices.Clone(events)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Index < evs[j].Index })
	t := newTables()
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].Index == evs[i].Index {
			t.apply(evs[j])
			j++
		}
		visit(evs[i].Index, evs[i:j], t)
		i = j
	}
}

// uncheckable says why the change log cannot vouch for every committed
// change, "" when it can: the recorder missed indexes (a gap), or the
// last version it holds of a driver or a schedule is not the one in the
// leader's final tables (compared by ModifyIndex), which would mean it
// lost events without noticing.
func uncheckable(in Input) string {
	log := in.Changes
	if len(log.Gaps) > 0 {
		var spans []string
		for _, g := range log.Gaps {
			spans = append(spans, fmt.Sprintf("%d-%d", g.After+1, g.Until))
		}
		return fmt.Sprintf("the change recorder missed up to %d indexes (%s)", log.Missed(), joinMax(spans, 4))
	}
	lv := in.leader()
	if lv == nil {
		return ""
	}
	last := map[api.EventKind]map[string]uint64{api.EventDriver: {}, api.EventSchedule: {}}
	for _, e := range log.Events {
		if m := last[e.Kind]; m != nil {
			m[e.ID] = e.Index
		}
	}
	var off []string
	lacks := func(kind api.EventKind, id string, index uint64) {
		if last[kind][id] != index {
			off = append(off, fmt.Sprintf("%s %s recorded up to %d, changed at %d", kind, id, last[kind][id], index))
		}
	}
	for _, d := range lv.Drivers {
		lacks(api.EventDriver, d.ID, d.ModifyIndex)
	}
	for _, s := range lv.Schedules {
		lacks(api.EventSchedule, s.Name, s.ModifyIndex)
	}
	if len(off) > 0 {
		return fmt.Sprintf("the change log lacks the last change of %d rows in %s's final tables: %s", len(off), lv.ID, joinMax(off, 4))
	}
	return ""
}

// notCheckable is the result of a namespace checker on a log that cannot
// vouch for every change: the run proves nothing either way, and is not
// called valid.
func notCheckable(name, why string) Result {
	return Result{Name: name, Summary: "not checkable: " + why}
}

// NamespaceQuotas proves that quotas hold at every committed index:
// replaying the recorded row changes in index order, all changes of one
// index together, no namespace's placed drivers and live executors ever
// hold more cores, memory or of a custom resource than its quota, nor
// more placed drivers than its running-drivers bound (in.Namespaces
// gives the quotas, which the run applies before any submission and
// never changes). A log with gaps, or without the last change of a
// driver of the leader's final tables, is not checkable: the result is
// not valid. Offending: the first index at which each namespace passed each
// bound, as "NS cores 4>3 @index".
func NamespaceQuotas(in Input) Result {
	if in.Changes == nil {
		return Result{Name: NameNamespaceQuotas, Summary: "no change log recorded"}
	}
	if why := uncheckable(in); why != "" {
		return notCheckable(NameNamespaceQuotas, why)
	}
	quotas := map[string]model.Quota{}
	for _, n := range in.Namespaces {
		if n.Quota.Bounded() {
			quotas[n.Name] = n.Quota
		}
	}
	var off offenders
	seen := map[string]bool{}
	indexes := 0
	peak := map[string]int{}
	replay(in.Changes.Events, func(index uint64, _ []api.Event, t *tables) {
		indexes++
		for ns, u := range t.uses() {
			q, ok := quotas[ns]
			if !ok {
				continue
			}
			peak[ns] = max(peak[ns], u.cores)
			for _, p := range passed(q, u) {
				if key := ns + " " + p.bound; !seen[key] {
					seen[key] = true
					off.add(fmt.Sprintf("%s %s %d>%d @%d", ns, p.bound, p.held, p.quota, index))
				}
			}
		}
	})
	var peaks []string
	for _, ns := range sortedKeys(peak) {
		peaks = append(peaks, fmt.Sprintf("%s %d", ns, peak[ns]))
	}
	return result(NameNamespaceQuotas, off.list,
		fmt.Sprintf("%d namespaces within their quotas at all %d indexes with row changes (most cores held: %s)", len(quotas), indexes, cmp.Or(strings.Join(peaks, ", "), "none")),
		fmt.Sprintf("%d quota bounds passed", len(off.list)))
}

// excess is one bound a namespace's use passed.
type excess struct {
	bound       string
	held, quota int64
}

// passed lists the bounds of q that u passes: cores, memory_mb,
// running_drivers and each named resource.
func passed(q model.Quota, u *use) []excess {
	var out []excess
	check := func(bound string, held, quota int64) {
		if quota > 0 && held > quota {
			out = append(out, excess{bound, held, quota})
		}
	}
	check("cores", int64(u.cores), int64(q.Cores))
	check("memory_mb", u.memoryMB, q.MemoryMB)
	check("running_drivers", int64(u.running), int64(q.RunningDrivers))
	for _, k := range slices.Sorted(maps.Keys(q.Resources)) {
		check(k, int64(u.resources[k]), int64(q.Resources[k]))
	}
	return out
}

// preemptedPrefix starts the reason of every preempted attempt
// (model.PreemptedReason): "preempted by namespace X".
const preemptedPrefix = "preempted by namespace "

// attemptKey names one attempt of one driver.
type attemptKey struct {
	driver  string
	attempt int
}

// preemption is one preempted attempt: its driver's namespace (the
// victim), the namespace it was preempted for, the index at which its
// notice was committed (0 when the log shows the attempt ended
// preempted without a notice before) and whether the victim held more
// than its weighted share of the cores there.
type preemption struct {
	victim, by string
	notice     uint64
	above      bool
}

// PreemptionVictims proves that preemption only takes from namespaces
// above their fair share. Every driver attempt the log shows under a
// preemption notice (its record's preempted_by, which the leader's
// PreemptAttempts entry sets) or ended "preempted by namespace X" is
// checked against this rule: at the index that committed the notice,
// its driver's namespace V held more cores than its weighted share of
// the cluster's cores among the namespaces with work,
//
//	held(V) > cores of the ALIVE workers × weight(V) / Σ weight(N)
//
// summed over the namespaces N that hold or wait for something at that
// index (V, and X, whose work waits, among them). The notice is the
// decision, and it changes no one's use: the tables at its index are
// those the leader's round read, give or take the entries committed
// between that read and the notice. Any index the attempt ran at would
// let pass a namespace that was above its share once and below it
// when the leader took the attempt. Weighted max-min fair share gives every namespace with work
// at least its weighted part of the cluster or all it asks for, so a
// namespace above its fair share is above that part: the rule is a
// necessary condition of a rightful preemption. It counts cores only,
// so it is necessary where cores are every namespace's dominant
// resource, as the workload's drivers (1 core, 64 MiB, on workers of
// several cores and 8 GiB) make them. An attempt that ended preempted
// with no notice before it in the log offends too: every preemption
// starts with one, in an entry of its own. Weights are the applied ones
// (in.Namespaces), 1 for a namespace never applied. With no preempted
// attempt it passes and says so; a log that is not complete (see
// NamespaceQuotas) is not checkable (not valid). Offending: "DRIVER/ATTEMPT
// of V for X", with ": no notice recorded" for an end without one.
func PreemptionVictims(in Input) Result {
	if in.Changes == nil {
		return Result{Name: NamePreemptionVictims, Summary: "no change log recorded"}
	}
	if why := uncheckable(in); why != "" {
		return notCheckable(NamePreemptionVictims, why)
	}
	weights := map[string]float64{}
	for _, n := range in.Namespaces {
		weights[n.Name] = n.Weight
	}
	weight := func(ns string) float64 { return cmp.Or(weights[ns], model.DefaultWeight) }
	found := map[attemptKey]*preemption{}
	var order []attemptKey
	replay(in.Changes.Events, func(index uint64, batch []api.Event, t *tables) {
		// above says whether ns holds more than its weighted share at
		// this index; the uses are counted once, on the first notice.
		var uses map[string]*use
		above := func(ns string) bool {
			if uses == nil {
				uses = t.uses()
			}
			total := 0.0
			for n, u := range uses {
				if u.work() {
					total += weight(n)
				}
			}
			u := uses[ns]
			return u != nil && u.work() && float64(u.cores) > float64(t.capacity())*weight(ns)/total
		}
		for _, e := range batch {
			d := e.Driver
			if d == nil {
				continue
			}
			for _, a := range d.Attempts {
				k := attemptKey{d.ID, a.Attempt}
				by, ended := strings.CutPrefix(a.Reason, preemptedPrefix)
				if found[k] != nil || (a.PreemptedBy == "" && !ended) {
					continue
				}
				p := &preemption{victim: model.NamespaceOf(d.Namespace), by: by}
				if !ended {
					p.by, p.notice, p.above = a.PreemptedBy, index, above(p.victim)
				}
				found[k] = p
				order = append(order, k)
			}
		}
	})
	if len(order) == 0 {
		return Result{Name: NamePreemptionVictims, Valid: true, Summary: "no attempt was preempted"}
	}
	var off offenders
	for _, k := range order {
		p := found[k]
		switch {
		case p.notice == 0:
			off.add(fmt.Sprintf("%s/%d of %s for %s: no notice recorded", k.driver, k.attempt, p.victim, p.by))
		case !p.above:
			off.add(fmt.Sprintf("%s/%d of %s for %s", k.driver, k.attempt, p.victim, p.by))
		}
	}
	return result(NamePreemptionVictims, off.list,
		fmt.Sprintf("all %d preempted attempts were of a namespace above its weighted share of the cores when their notice was committed", len(order)),
		fmt.Sprintf("%d of %d preempted attempts were of a namespace not above its weighted share of the cores when their notice was committed, or had none", len(off.list), len(order)))
}
