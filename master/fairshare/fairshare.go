// Package fairshare computes each namespace's share of the cluster:
// weighted dominant-resource fairness (DRF, Ghodsi et al., NSDI 2011, as
// YARN's DominantResourceFairnessPolicy and Armada weigh their queues).
// A namespace's dominant share is the largest fraction of any one
// resource of the cluster (cores, memory, each custom resource) its work
// holds; its fair share is what weighted max-min fairness over the
// dominant shares gives it: every namespace with work gets its weight's
// part of the cluster, none more than it asks for (what it holds plus
// what waits, within its quota), and what one does not ask for is shared
// among the others by weight. The functions are pure: the scheduler, the
// preemption round, the status endpoint and the metrics compute the same
// figures from the same tables.
package fairshare

import (
	"cmp"
	"maps"
	"slices"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// Vector is an amount of every resource the cluster offers: cores, memory
// (MiB) and each custom resource by name.
type Vector struct {
	Cores     int
	MemoryMB  int64
	Resources model.ResourceAmounts
}

// Add adds cores, memory and resources to v.
func (v *Vector) Add(cores int, memoryMB int64, res model.ResourceAmounts) {
	v.Cores += cores
	v.MemoryMB += memoryMB
	for k, n := range res {
		if v.Resources == nil {
			v.Resources = model.ResourceAmounts{}
		}
		v.Resources[k] += n
	}
}

// Capacity is the cluster's size: what its ALIVE workers offer.
func Capacity(workers []*model.Worker) Vector {
	var c Vector
	for _, w := range workers {
		if w.State == model.WorkerAlive {
			c.Add(w.Cores, w.MemoryMB, w.Resources.Counts())
		}
	}
	return c
}

// Dominant returns the dominant share of v in a cluster of capacity c, a
// fraction (1 is the whole of some resource; more when v holds more than
// the cluster has now, as after a worker's loss), and the resource that
// gives it: "cores", "memory" or a custom resource's name; 0 and "" for
// nothing held. A resource the cluster does not offer counts as a whole
// cluster's worth for any amount of it.
func Dominant(v Vector, c Vector) (float64, string) {
	return dominantWith(v, Vector{}, 0, c)
}

// dominantWith is Dominant of held plus the fraction f (0 to 1) of
// waiting, in exact arithmetic: f times a count of cores is no whole
// number.
func dominantWith(held, waiting Vector, f float64, c Vector) (float64, string) {
	best, name := 0.0, ""
	consider := func(held, waiting, total float64, what string) {
		v := held + f*waiting
		if v <= 0 {
			return
		}
		s := 1.0
		if total > 0 {
			s = v / total
		}
		if s > best {
			best, name = s, what
		}
	}
	consider(float64(held.Cores), float64(waiting.Cores), float64(c.Cores), "cores")
	consider(float64(held.MemoryMB), float64(waiting.MemoryMB), float64(c.MemoryMB), "memory")
	keys := maps.Clone(held.Resources)
	if keys == nil {
		keys = model.ResourceAmounts{}
	}
	maps.Copy(keys, waiting.Resources)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		consider(float64(held.Resources[k]), float64(waiting.Resources[k]), float64(c.Resources[k]), k)
	}
	return best, name
}

// Held is what a namespace's work holds, from its use.
func Held(u fsm.NamespaceUse) Vector {
	return Vector{Cores: u.Cores, MemoryMB: u.MemoryMB, Resources: u.Resources}
}

// Share is one namespace's standing. Shares are fractions of the
// cluster's dominant resources, 0 to 1 (Dominant may pass 1 after
// workers are lost).
type Share struct {
	Namespace string
	Weight    float64
	// Dominant is the namespace's dominant share now, and Resource the
	// resource it is a share of.
	Dominant float64
	Resource string
	// Demand is the dominant share it would hold with all its waiting
	// work placed, within its quota.
	Demand float64
	// Fair is its fair share: weighted max-min over every namespace's
	// Demand.
	Fair float64
}

// Below reports whether the namespace holds less than its fair share.
func (s Share) Below() bool { return s.Dominant < s.Fair }

// Namespace is the input of Compute for one namespace: its settings, what
// its work holds, and what waits for a placement (the drivers' and
// executors' cores, memory and resources).
type Namespace struct {
	Settings *model.Namespace
	Held     Vector
	Waiting  Vector
	// RunningDrivers and WaitingDrivers count the namespace's drivers
	// placed and waiting, which its quota's RunningDrivers bounds.
	RunningDrivers, WaitingDrivers int
}

// Compute returns every namespace's Share in a cluster of capacity c, by
// name. Only namespaces that hold or wait for something take part in the
// division (an idle namespace's fair share is 0, as in YARN's Fair
// Scheduler, which divides among active queues).
func Compute(c Vector, nss []Namespace) map[string]Share {
	out := make(map[string]Share, len(nss))
	var active []Share
	for _, n := range nss {
		s := Share{Namespace: n.Settings.Name, Weight: n.Settings.Weight}
		s.Dominant, s.Resource = Dominant(n.Held, c)
		s.Demand, _ = dominantWith(n.Held, n.Waiting, n.placeable(), c)
		s.Demand = max(s.Demand, s.Dominant)
		if s.Demand > 0 {
			active = append(active, s)
		} else {
			out[s.Namespace] = s
		}
	}
	for _, s := range waterFill(active) {
		out[s.Namespace] = s
	}
	return out
}

// placeable returns the fraction of n's waiting work its quota lets it
// place: over every resource the quota bounds and the waiting work
// needs, the least of (quota - held) / waiting, in [0, 1]; 1 without a
// bound. Demand counts that much of every waiting resource, not all of
// an unbounded one: a namespace at its core quota asks for no more
// memory either, since what waits cannot start without cores.
func (n Namespace) placeable() float64 {
	f := 1.0
	bound := func(quota, held, waiting float64) {
		if quota > 0 && waiting > 0 {
			f = min(f, max((quota-held)/waiting, 0))
		}
	}
	q := n.Settings.Quota
	bound(float64(q.Cores), float64(n.Held.Cores), float64(n.Waiting.Cores))
	bound(float64(q.MemoryMB), float64(n.Held.MemoryMB), float64(n.Waiting.MemoryMB))
	for k, lim := range q.Resources {
		if w := n.Waiting.Resources[k]; w > 0 {
			// A resource bound of 0 forbids any of it: nothing that
			// waits for it can be placed.
			f = min(f, max(float64(lim-n.Held.Resources[k])/float64(w), 0))
		}
	}
	bound(float64(q.RunningDrivers), float64(n.RunningDrivers), float64(n.WaitingDrivers))
	return f
}

// waterFill sets Fair on each share by weighted max-min fairness over
// their Demands: in order of Demand per weight, each gets its weight's
// part of what is left, or its Demand when that is less, and what it does
// not take is left to the rest.
func waterFill(ss []Share) []Share {
	slices.SortFunc(ss, func(a, b Share) int {
		return cmp.Or(cmp.Compare(a.Demand/a.Weight, b.Demand/b.Weight), cmp.Compare(a.Namespace, b.Namespace))
	})
	left, weights := 1.0, 0.0
	for _, s := range ss {
		weights += s.Weight
	}
	for i := range ss {
		part := left * ss[i].Weight / weights
		ss[i].Fair = min(ss[i].Demand, part)
		left -= ss[i].Fair
		weights -= ss[i].Weight
	}
	return ss
}

// Inputs gathers Compute's input from the tables: every namespace's
// settings and use, and the cores, memory and resources of the drivers
// that wait in waitingDrivers, by namespace. Executors an app still
// wants count as waiting work too: each app's executors up to its core
// cap or executor limit, at most wantCap executors an app so that an app
// with no cap does not ask for the whole cluster in the division. So do
// the cores drivers say their apps will ask for (DriverSpec.AppCores): a
// waiting driver's, and of a namespace's placed drivers' asks
// (fsm.NamespaceUse.AppCoresAsked) what its registered apps' wanted
// cores do not already cover; so a namespace whose drivers' apps will
// need cores gets a fair share with room for them, which Admits holds
// its drivers to.
func Inputs(st *fsm.State) (Vector, []Namespace) {
	c := Capacity(st.Workers())
	uses := st.NamespaceUses()
	var out []Namespace
	idx := map[string]int{}
	for _, n := range st.Namespaces() {
		idx[n.Name] = len(out)
		out = append(out, Namespace{Settings: n, Held: Held(uses[n.Name]), RunningDrivers: uses[n.Name].RunningDrivers})
	}
	for _, d := range st.WaitingDemands() {
		if i, ok := idx[model.NamespaceOf(d.Namespace)]; ok {
			out[i].Waiting.Add(d.Cores+d.AppCores, d.MemoryMB, d.Resources)
			out[i].WaitingDrivers++
		}
	}
	// appsWant is the cores the registered apps want, by namespace's
	// index; the placed drivers' asks count beyond it.
	appsWant := make([]int, len(out))
	apps, execs := st.LiveApps()
	for i, a := range apps {
		j, ok := idx[model.NamespaceOf(a.Namespace)]
		if !ok || a.CoresPerExecutor <= 0 {
			continue
		}
		live := 0
		for _, e := range execs[i] {
			if !e.State.Terminal() {
				live++
			}
		}
		want := wantCap
		if a.ExecutorLimit >= 0 {
			want = min(want, a.ExecutorLimit-live)
		}
		if left := a.CoresLeft(); left >= 0 {
			want = min(want, left/a.CoresPerExecutor)
		}
		if want > 0 {
			res := model.ResourceAmounts{}
			for k, n := range a.ResourcesPerExecutor {
				res[k] = n * want
			}
			out[j].Waiting.Add(want*a.CoresPerExecutor, int64(want)*a.MemoryPerExecutorMB, res)
			appsWant[j] += want * a.CoresPerExecutor
		}
	}
	for i := range out {
		out[i].Waiting.Cores += max(uses[out[i].Settings.Name].AppCoresAsked-appsWant[i], 0)
	}
	return c, out
}

// wantCap bounds the executors one app counts as waiting work in Inputs.
const wantCap = 64
