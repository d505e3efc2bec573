package leader

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// Bounds of one preemption round, YARN's capacity scheduler's
// ProportionalCapacityPreemptionPolicy defaults.
const (
	// preemptPerRound is the most of the cluster, as a dominant share,
	// one round takes back (total_preemption_per_round, 0.1); a round
	// takes at least one unit, however large.
	preemptPerRound = 0.1
	// preemptDeadZone is how far above its fair share, as a fraction of
	// that share, a namespace may hold before it loses anything
	// (max_ignored_over_capacity, 0.1, which YARN's policy applies to a
	// queue's guaranteed capacity: used above guaranteed*(1+0.1)): an
	// overshoot below it ends by itself as work finishes, and taking it
	// back would make shares that hover near the line swap work back and
	// forth. Two namespaces of equal shares thus settle with the starved
	// one at 90 % of its share or more.
	preemptDeadZone = 0.1
)

// preempt takes back fair share for the namespaces that opted in, every
// PreemptionInterval while this master leads (YARN's preemption monitor,
// every 3 s), and ends the notices whose deadlines have passed. A new
// leader carries on from the tables: notices and deadlines are in the
// rows.
func (t *Term) preempt(ctx context.Context) {
	tick := time.NewTicker(t.cfg.PreemptionInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.preemptRound(now())
	}
}

// preemptRound ends the units whose notice's deadline is at or before
// at (Unix ms), then gives notice to the victims of this round, each
// with the deadline at plus PreemptionGrace.
func (t *Term) preemptRound(at int64) {
	st := t.d.FSM.State()
	// A cluster that never preempted and has no namespace that may
	// costs nothing: neither the units nor the shares are read.
	if !st.Preempted() && !slices.ContainsFunc(st.Namespaces(), func(n *model.Namespace) bool { return n.Preempt }) {
		return
	}
	units := st.Units()
	var due []model.Preemption
	for _, u := range units {
		if u.PreemptedBy != "" && u.Deadline <= at {
			due = append(due, u.Ref)
		}
	}
	if len(due) > 0 {
		if _, err := t.d.Apply(&model.PreemptAttempts{Items: due, End: true, Time: at}); err != nil {
			t.d.Log.Warn("preemption ends not committed", "err", err, "units", len(due))
		} else {
			t.d.Log.Info("preempted units ended at their deadline", "units", len(due))
		}
	}
	t.notify(roundVictims(st, units), at)
}

// roundVictims returns the victims (Victims) of a round over the tables
// st, whose running units are units; nil when no namespace may preempt.
func roundVictims(st *fsm.State, units []fsm.Unit) []model.Preemption {
	c, nss := fairshare.Inputs(st)
	if !slices.ContainsFunc(nss, func(n fairshare.Namespace) bool { return n.Settings.Preempt }) {
		return nil
	}
	return Victims(c, nss, fairshare.Compute(c, nss), units)
}

// notify gives notice to the victims items at at (Unix ms), each with the
// deadline at plus PreemptionGrace, less those whose namespace (By) has
// no work waiting any more: its waiting app may have been declared lost,
// or its waiting drivers killed, since the round read the tables. Apply
// does not check it (PreemptAttempts keeps the meaning its entries in
// the log were written with), so the demand is read again right before
// the proposal and the window left is that proposal's Raft round trip.
func (t *Term) notify(items []model.Preemption, at int64) {
	if len(items) == 0 {
		return
	}
	_, nss := fairshare.Inputs(t.d.FSM.State())
	waiting := make(map[string]bool, len(nss))
	for _, n := range nss {
		waiting[n.Settings.Name] = waits(n.Waiting)
	}
	if items = slices.DeleteFunc(items, func(it model.Preemption) bool { return !waiting[it.By] }); len(items) == 0 {
		t.d.Log.Info("preemption dropped: the work it was for waits no more")
		return
	}
	deadline := at + t.cfg.PreemptionGrace.Milliseconds()
	if _, err := t.d.Apply(&model.PreemptAttempts{Items: items, Deadline: deadline, Time: at}); err != nil {
		t.d.Log.Warn("preemption notices not committed", "err", err, "units", len(items))
		return
	}
	for _, it := range items {
		t.d.Log.Info("preempting", "driver", it.DriverID, "attempt", it.Attempt, "app", it.AppID, "executor", it.ExecutorID, "for", it.By)
	}
}

// standing is one namespace's position in a round: what its running
// units hold (units under notice left out: they are leaving), what units
// under notice are being freed for it, its fair share, and whether it
// may preempt.
type standing struct {
	held, incoming fairshare.Vector
	fair           float64
	preempt        bool
}

// Victims returns the units one preemption round gives notice to, each
// with the namespace it is taken back for (By), in a cluster of capacity
// c with namespaces nss, their shares and the running units (Units).
// A namespace that may preempt, holds (with what notices free for it)
// less than its fair share and has work waiting takes, most starved
// first, the running units of other namespaces in order of lowest
// priority, then most recently started (YARN's and Kueue's order): only
// from a namespace holding more than its fair share by preemptDeadZone of
// that share, and only while losing the unit leaves it at or above its fair share,
// so a victim never falls below its share and never has cause to
// preempt back (Kueue's preemption loops, #3779, #7101, #2821). It takes
// until it reaches its fair share, and the round stops at
// preemptPerRound of the cluster, taking at least one unit. A unit
// already under notice is never chosen again.
func Victims(c fairshare.Vector, nss []fairshare.Namespace, shares map[string]fairshare.Share, units []fsm.Unit) []model.Preemption {
	by := make(map[string]*standing, len(nss))
	for _, n := range nss {
		by[n.Settings.Name] = &standing{fair: shares[n.Settings.Name].Fair, preempt: n.Settings.Preempt && waits(n.Waiting)}
	}
	var candidates []fsm.Unit
	for _, u := range units {
		if u.PreemptedBy != "" {
			if s := by[u.PreemptedBy]; s != nil {
				s.incoming = plus(s.incoming, u)
			}
			continue
		}
		if s := by[u.Namespace]; s != nil {
			s.held = plus(s.held, u)
			candidates = append(candidates, u)
		}
	}
	dom := func(v fairshare.Vector) float64 { d, _ := fairshare.Dominant(v, c); return d }
	holds := func(s *standing) float64 { return dom(plusVector(s.held, s.incoming)) }
	var takers []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		if s := by[name]; s.preempt && holds(s) < s.fair {
			takers = append(takers, name)
		}
	}
	slices.SortStableFunc(takers, func(a, b string) int {
		return cmp.Compare(holds(by[a])/by[a].fair, holds(by[b])/by[b].fair)
	})
	slices.SortFunc(candidates, func(a, b fsm.Unit) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(b.Since, a.Since), cmp.Compare(unitName(a), unitName(b)))
	})
	var out []model.Preemption
	taken := make([]bool, len(candidates))
	spent := 0.0
	for _, name := range takers {
		p := by[name]
		for i, u := range candidates {
			if holds(p) >= p.fair {
				break
			}
			v := by[u.Namespace]
			if taken[i] || u.Namespace == name || dom(v.held) <= v.fair*(1+preemptDeadZone) {
				continue
			}
			after := minus(v.held, u)
			cost := dom(unitVector(u))
			if dom(after) < v.fair || (len(out) > 0 && spent+cost > preemptPerRound) {
				continue
			}
			taken[i] = true
			v.held = after
			p.incoming = plus(p.incoming, u)
			spent += cost
			ref := u.Ref
			ref.By = name
			out = append(out, ref)
		}
	}
	return out
}

// waits says whether v asks for anything.
func waits(v fairshare.Vector) bool {
	if v.Cores > 0 || v.MemoryMB > 0 {
		return true
	}
	for _, n := range v.Resources {
		if n > 0 {
			return true
		}
	}
	return false
}

// unitName orders units of equal priority and start: executors and
// attempts by their IDs.
func unitName(u fsm.Unit) string {
	if u.Ref.Executor() {
		return model.ExecutorKey(u.Ref.AppID, u.Ref.ExecutorID)
	}
	return u.Ref.DriverID + "#" + strconv.Itoa(u.Ref.Attempt)
}

// unitVector is what u holds.
func unitVector(u fsm.Unit) fairshare.Vector {
	return fairshare.Vector{Cores: u.Cores, MemoryMB: u.MemoryMB, Resources: u.Resources}
}

// plus returns v with what u holds added; v is not changed.
func plus(v fairshare.Vector, u fsm.Unit) fairshare.Vector { return plusVector(v, unitVector(u)) }

// plusVector returns a+b without changing either.
func plusVector(a, b fairshare.Vector) fairshare.Vector {
	out := fairshare.Vector{Cores: a.Cores, MemoryMB: a.MemoryMB, Resources: maps.Clone(a.Resources)}
	out.Add(b.Cores, b.MemoryMB, b.Resources)
	return out
}

// minus returns v without what u holds; v is not changed.
func minus(v fairshare.Vector, u fsm.Unit) fairshare.Vector {
	neg := model.ResourceAmounts{}
	for k, n := range u.Resources {
		neg[k] = -n
	}
	return plusVector(v, fairshare.Vector{Cores: -u.Cores, MemoryMB: -u.MemoryMB, Resources: neg})
}
