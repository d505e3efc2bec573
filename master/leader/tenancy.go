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
// what the plan booked so far, and the work it has to place, in the
// order it takes it (items, indices into the plan's input; next is the
// first not yet taken).
type share struct {
	n     *model.Namespace
	use   fsm.NamespaceUse
	items []int
	next  int
	// key is the dominant share per weight, the order of weighted DRF.
	key float64
}

// book adds what one placement holds to the namespace's use, and
// updates its key.
func (s *share) book(cores int, memoryMB int64, res model.ResourceAmounts, driver bool, c fairshare.Vector) {
	s.use.Cores += cores
	s.use.MemoryMB += memoryMB
	if driver {
		s.use.DriverCores += cores
		s.use.DriverMemoryMB += memoryMB
		s.use.RunningDrivers++
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
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.items[a.next], b.items[b.next])) < 0
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
	if s.next == len(s.items) {
		heap.Pop(h)
		return
	}
	heap.Fix(h, 0)
}

// groupShares returns the heap of the namespaces of n items (namespace
// returns an item's), each with its items in input order, or by priority
// (highest first, then input order) when priority is given.
func groupShares(t *tenancy, n int, namespace func(int) string, priority func(int) int, c fairshare.Vector) *shares {
	by := map[string]*share{}
	h := &shares{}
	for i := range n {
		name := namespace(i)
		s := by[name]
		if s == nil {
			s = &share{n: t.namespace(name), use: t.use(name)}
			s.rekey(c)
			by[name] = s
			*h = append(*h, s)
		}
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
