package leader

import (
	"cmp"
	"container/heap"
	"slices"
	"sync"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// tenancy is what the plans need of the namespaces at one round: their
// settings and use, their fair shares (worked out only when a driver
// share needs them) and the cluster-wide bound on placed drivers. A nil
// tenancy is a cluster of namespaces that bound nothing, weight 1 each.
type tenancy struct {
	settings map[string]*model.Namespace
	uses     map[string]fsm.NamespaceUse
	// fair returns every namespace's fair share (fairshare.Compute).
	fair func() map[string]fairshare.Share
	// maxDrivers is --max-running-drivers: 0 for no bound.
	maxDrivers int
	// starved holds the namespaces below their fair share that have
	// executors to place now (findStarved); while one does, the drivers
	// of namespaces at or above their fair share wait (yields).
	starved map[string]bool
}

// readTenancy reads the tenancy from the tables; the fair shares are
// computed from them once, on first use.
func readTenancy(st *fsm.State, maxDrivers int) *tenancy {
	t := &tenancy{settings: map[string]*model.Namespace{}, uses: st.NamespaceUses(), maxDrivers: maxDrivers}
	for _, n := range st.Namespaces() {
		t.settings[n.Name] = n
	}
	t.fair = sync.OnceValue(func() map[string]fairshare.Share { return fairshare.Compute(fairshare.Inputs(st)) })
	return t
}

// namespace returns the settings of namespace name; those of
// model.ImplicitDefault, under name, for one the tables do not hold (a
// namespace deleted since, whose rows Apply holds to no quota).
func (t *tenancy) namespace(name string) *model.Namespace {
	if t != nil {
		if n, ok := t.settings[name]; ok {
			return n
		}
	}
	n := model.ImplicitDefault()
	n.Name = name
	return n
}

// use returns a copy of namespace name's use, which the plan books on.
func (t *tenancy) use(name string) fsm.NamespaceUse {
	if t == nil {
		return fsm.NamespaceUse{}
	}
	return t.uses[name]
}

// fairOf returns namespace n's fair share when Admits needs it, else 0
// (so the shares are computed only for a driver share that needs them).
func (t *tenancy) fairOf(n *model.Namespace) float64 {
	if t == nil || !fairshare.NeedsFair(n) {
		return 0
	}
	return t.fair()[n.Name].Fair
}

// findStarved sets t.starved from the tables: the namespaces below their
// fair share whose apps planExecutors would give an executor now, on the
// workers as they are, by spreadOut and at now (Unix ms). The scheduler
// places drivers before executors, so without it a core freed for such
// a namespace (by preemption, or by work ending) would go to a waiting
// driver of a namespace at or above its share, and the starved one would
// get nothing. With one namespace (a cluster that never named one) or no
// live app nothing is read: no other namespace can be starved.
func (t *tenancy) findStarved(st *fsm.State, spreadOut bool, now int64) {
	if len(t.settings) < 2 {
		return
	}
	apps, execs := st.LiveApps()
	if len(apps) == 0 {
		return
	}
	ns := make(map[string]string, len(apps))
	for _, a := range apps {
		ns[a.ID] = model.NamespaceOf(a.Namespace)
	}
	for _, p := range planExecutors(apps, execs, st.Workers(), spreadOut, now, t) {
		if name := ns[p.AppID]; t.fair()[name].Below() {
			if t.starved == nil {
				t.starved = map[string]bool{}
			}
			t.starved[name] = true
		}
	}
}

// yields reports whether namespace name's drivers wait this pass: some
// namespace below its fair share has executors to place (findStarved),
// and name is at or above its own fair share. They are placed at the next
// pass, once the executors are.
func (t *tenancy) yields(name string) bool {
	return t != nil && len(t.starved) > 0 && !t.starved[name] && !t.fair()[name].Below()
}

// runningDrivers returns the drivers placed cluster-wide.
func (t *tenancy) runningDrivers() int {
	if t == nil {
		return 0
	}
	n := 0
	for _, u := range t.uses {
		n += u.RunningDrivers
	}
	return n
}

// atMaxDrivers reports whether running placed drivers reach
// --max-running-drivers.
func (t *tenancy) atMaxDrivers(running int) bool {
	return t != nil && t.maxDrivers > 0 && running >= t.maxDrivers
}

// share is one namespace's place in a plan: its settings, its use with
// what the plan booked so far, and the count items of work it has to
// place, in the order it takes them (indices into the plan's input; nil
// for the whole input in its order, as one namespace's queue is); next
// is the first not yet taken.
type share struct {
	n     *model.Namespace
	use   fsm.NamespaceUse
	items []int
	count int
	next  int
	// key is the dominant share per weight, the order of weighted DRF.
	key float64
}

// book adds what one placement holds to the namespace's use, and
// updates its key; a driver's app's ask (appCores) counts as the tables
// will count it once the driver is placed.
func (s *share) book(cores int, memoryMB int64, res model.ResourceAmounts, appCores int, driver bool, c fairshare.Vector) {
	s.use.Cores += cores
	s.use.MemoryMB += memoryMB
	if driver {
		s.use.DriverCores += cores
		s.use.DriverMemoryMB += memoryMB
		s.use.RunningDrivers++
		s.use.AppCoresAsked += appCores
	}
	if len(res) > 0 {
		// The use is the plan's copy, but its map is shared with the
		// tenancy's.
		held := make(model.ResourceAmounts, len(s.use.Resources)+len(res))
		for k, v := range s.use.Resources {
			held[k] = v
		}
		for k, v := range res {
			held[k] += v
		}
		s.use.Resources = held
	}
	s.rekey(c)
}

// head returns the index in the plan's input of the next work to take.
func (s *share) head() int {
	if s.items == nil {
		return s.next
	}
	return s.items[s.next]
}

func (s *share) rekey(c fairshare.Vector) {
	d, _ := fairshare.Dominant(fairshare.Held(s.use), c)
	s.key = d / s.n.Weight
}

// shares orders the namespaces with work to place by weighted DRF (Ghodsi
// et al.; YARN's DominantResourceFairnessPolicy weighs queues so): the
// least dominant share per weight first, and of equal ones the one whose
// next work came first in the plan's input. Its top is the namespace that
// places next.
type shares []*share

// Len, Less, Swap, Push and Pop make shares a heap.Interface.
func (h shares) Len() int { return len(h) }
func (h shares) Less(i, j int) bool {
	a, b := h[i], h[j]
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.head(), b.head())) < 0
}
func (h shares) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *shares) Push(x any)   { *h = append(*h, x.(*share)) }
func (h *shares) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// advance moves the top namespace past the work it just took (placed or
// not): it leaves the heap when it has none left, else takes its place by
// its key.
func (h *shares) advance() {
	s := (*h)[0]
	s.next++
	if s.next == s.count {
		heap.Pop(h)
		return
	}
	heap.Fix(h, 0)
}

// groupShares returns the heap of the namespaces of n items (namespace
// returns an item's), each with its items in input order, or by priority
// (highest first, then input order) when priority is given. It runs at
// every round with drivers to place, over the whole queue: one namespace
// whose queue is in order (a cluster that never names one) costs a pass
// without a lookup or an allocation per item; more cost one array of n
// indices.
func groupShares(t *tenancy, n int, namespace func(int) string, priority func(int) int, c fairshare.Vector) *shares {
	by := map[string]*share{}
	h := &shares{}
	var last *share
	// of returns the share of item i, made on first sight; consecutive
	// items of one namespace cost no lookup.
	of := func(i int) *share {
		name := namespace(i)
		if last != nil && last.n.Name == name {
			return last
		}
		last = by[name]
		if last == nil {
			last = &share{n: t.namespace(name), use: t.use(name)}
			last.rekey(c)
			by[name] = last
			*h = append(*h, last)
		}
		return last
	}
	// inOrder: the input is in order of priority, so one namespace's
	// queue is its order.
	inOrder := true
	for i := range n {
		of(i).count++
		if priority != nil && i > 0 && inOrder {
			inOrder = priority(i-1) >= priority(i)
		}
	}
	if len(*h) == 1 && inOrder {
		heap.Init(h)
		return h
	}
	all := make([]int, n)
	off := 0
	for _, s := range *h {
		s.items = all[off : off : off+s.count]
		off += s.count
	}
	for i := range n {
		s := of(i)
		s.items = append(s.items, i)
	}
	if priority != nil {
		higher := func(a, b int) int { return cmp.Compare(priority(b), priority(a)) }
		for _, s := range *h {
			if !slices.IsSortedFunc(s.items, higher) {
				slices.SortStableFunc(s.items, higher)
			}
		}
	}
	heap.Init(h)
	return h
}
