package leader

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// cluster is a simulated cluster of one-core units for Victims: what each
// namespace runs and how many of its units wait.
type cluster struct {
	cores   int
	nss     []*model.Namespace
	running []fsm.Unit
	waiting map[string]int
	seq     int
}

func newCluster(cores int, nss ...*model.Namespace) *cluster {
	return &cluster{cores: cores, nss: nss, waiting: map[string]int{}}
}

func preemptNS(name string, weight float64, preempt bool) *model.Namespace {
	return &model.Namespace{Name: name, Weight: weight, DriverShare: 1, PriorityMax: 100, Preempt: preempt}
}

// run starts n units of ns at priority p, started at since.
func (c *cluster) run(ns string, n, p int, since int64) {
	for range n {
		c.seq++
		c.running = append(c.running, fsm.Unit{Ref: model.Preemption{DriverID: fmt.Sprintf("driver-%s-%04d", ns, c.seq), Attempt: 1},
			Namespace: ns, Priority: p, Since: since, Cores: 1, MemoryMB: 1})
	}
}

// round computes the shares as the leader does and returns the victims.
func (c *cluster) round() ([]model.Preemption, map[string]fairshare.Share) {
	capacity := fairshare.Vector{Cores: c.cores, MemoryMB: int64(c.cores)}
	held := map[string]fairshare.Vector{}
	for _, u := range c.running {
		v := held[u.Namespace]
		v.Add(u.Cores, u.MemoryMB, nil)
		held[u.Namespace] = v
	}
	var in []fairshare.Namespace
	for _, n := range c.nss {
		w := c.waiting[n.Name]
		in = append(in, fairshare.Namespace{Settings: n, Held: held[n.Name], Waiting: fairshare.Vector{Cores: w, MemoryMB: int64(w)}})
	}
	shares := fairshare.Compute(capacity, in)
	return Victims(capacity, in, shares, c.running), shares
}

func (c *cluster) holds(ns string) int {
	n := 0
	for _, u := range c.running {
		if u.Namespace == ns {
			n++
		}
	}
	return n
}

// settle ends the victims (their units wait again in their namespace)
// and places waiting units on the free cores, each to the namespace
// furthest below its fair share, as the scheduler does.
func (c *cluster) settle(victims []model.Preemption, shares map[string]fairshare.Share, at int64) {
	gone := map[string]bool{}
	for _, v := range victims {
		gone[v.DriverID] = true
	}
	kept := c.running[:0]
	for _, u := range c.running {
		if gone[u.Ref.DriverID] {
			c.waiting[u.Namespace]++
			continue
		}
		kept = append(kept, u)
	}
	c.running = kept
	for len(c.running) < c.cores {
		best, gap := "", 0.0
		for _, n := range c.nss {
			if c.waiting[n.Name] == 0 {
				continue
			}
			g := shares[n.Name].Fair - float64(c.holds(n.Name))/float64(c.cores)
			if best == "" || g > gap {
				best, gap = n.Name, g
			}
		}
		if best == "" {
			return
		}
		c.waiting[best]--
		c.run(best, 1, 50, at)
	}
}

// A starved preempting namespace takes from the one above its share the
// lowest priority first, then the most recently started, never from one
// at its share, and at most a tenth of the cluster in a round.
func TestVictimsOrderAndBound(t *testing.T) {
	c := newCluster(100, preemptNS("etl", 1, true), preemptNS("ml", 1, false), preemptNS("fair", 2, false))
	c.run("ml", 30, 80, 1)
	c.run("ml", 20, 80, 5) // newer, same priority
	c.run("ml", 25, 10, 1) // lowest priority
	c.run("fair", 25, 0, 9)
	c.waiting["etl"] = 50
	c.waiting["fair"] = 100
	victims, shares := c.round()
	if len(victims) != 10 {
		t.Fatalf("%d victims, want 10 (a tenth of the cluster): %+v", len(victims), victims)
	}
	for _, v := range victims {
		if v.By != "etl" {
			t.Fatalf("victim %+v taken for %q, want etl", v, v.By)
		}
	}
	byID := map[string]fsm.Unit{}
	for _, u := range c.running {
		byID[u.Ref.DriverID] = u
	}
	for _, v := range victims {
		if u := byID[v.DriverID]; u.Namespace != "ml" || u.Priority != 10 {
			t.Fatalf("victim %+v: want ml's priority-10 units first (fair holds %.2f, its share %.2f)", u, float64(c.holds("fair"))/100, shares["fair"].Fair)
		}
	}
	// Once ml's lowest priority units are gone, its newest come before
	// its oldest.
	c.running = c.running[:50]
	c.run("fair", 25, 0, 9)
	victims, _ = c.round()
	for _, v := range victims {
		if u := byID[v.DriverID]; u.Since != 5 {
			t.Fatalf("victim %+v, want ml's units started at 5 before those started at 1", u)
		}
	}
}

// A round takes at least one unit, even one larger than a tenth of the
// cluster, and no more.
func TestVictimsAtLeastOne(t *testing.T) {
	c := newCluster(100, preemptNS("etl", 1, true), preemptNS("ml", 1, false))
	for i := range 4 {
		c.running = append(c.running, fsm.Unit{Ref: model.Preemption{DriverID: fmt.Sprint("big-", i), Attempt: 1}, Namespace: "ml", Cores: 25, MemoryMB: 25, Since: int64(i)})
	}
	c.waiting["etl"] = 50
	victims, _ := c.round()
	if len(victims) != 1 || victims[0].DriverID != "big-3" {
		t.Fatalf("victims %+v, want big-3 alone (the newest, 25%% of the cluster)", victims)
	}
}

// A namespace at most a tenth of its fair share above it is left alone
// (the dead zone), and one whose loss of a unit would take it below its
// share is no victim.
func TestVictimsDeadZone(t *testing.T) {
	c := newCluster(100, preemptNS("etl", 1, true), preemptNS("ml", 1, false))
	c.run("etl", 45, 50, 1)
	c.run("ml", 55, 50, 1)
	c.waiting["etl"] = 50
	c.waiting["ml"] = 50
	if victims, shares := c.round(); len(victims) != 0 {
		t.Fatalf("ml, a tenth of its share %.2f above it, lost %+v", shares["ml"].Fair, victims)
	}
	c.run("ml", 1, 50, 2)
	c.running = c.running[1:]
	if victims, _ := c.round(); len(victims) != 1 {
		t.Fatalf("ml at 0.56 of a 0.5 share lost %+v, want one unit", victims)
	}
	c = newCluster(100, preemptNS("etl", 1, true), preemptNS("ml", 1, false))
	c.run("etl", 30, 50, 1)
	c.run("ml", 70, 50, 1)
	c.waiting["etl"] = 50
	c.waiting["ml"] = 50
	victims, _ := c.round()
	if len(victims) != 10 {
		t.Fatalf("ml 0.2 above its share lost %d units, want 10", len(victims))
	}
	c.settle(victims, nil, 2)
	c.running = c.running[:0]
	c.run("etl", 49, 50, 1)
	c.run("ml", 51, 50, 1)
	if victims, _ := c.round(); len(victims) != 0 {
		t.Fatalf("ml at 0.51 of a 0.5 share lost %+v", victims)
	}
}

// Units under notice count as freed for their taker and gone from their
// namespace, and are never chosen again: a round that follows a round
// whose notices have not ended yet takes only what the first did not.
func TestVictimsCountNotices(t *testing.T) {
	c := newCluster(100, preemptNS("etl", 1, true), preemptNS("ml", 1, false))
	c.run("ml", 100, 50, 1)
	c.waiting["etl"] = 100
	c.waiting["ml"] = 10
	seen := map[string]bool{}
	for round := range 6 {
		victims, _ := c.round()
		for _, v := range victims {
			if seen[v.DriverID] {
				t.Fatalf("round %d: %s preempted twice", round, v.DriverID)
			}
			seen[v.DriverID] = true
			for i := range c.running {
				if c.running[i].Ref.DriverID == v.DriverID {
					c.running[i].PreemptedBy, c.running[i].Deadline = v.By, 1000
				}
			}
		}
	}
	if len(seen) != 45 {
		t.Fatalf("%d units under notice after six rounds, want 45: down to the dead zone above ml's share, and no more", len(seen))
	}
}

// Two preempting namespaces, one of which holds the whole cluster when
// the other's work arrives, settle at their shares over many rounds, and
// neither ever takes back from the other: every preemption is of the
// namespace that started above its share, by the one below it.
func TestVictimsNoLoop(t *testing.T) {
	c := newCluster(100, preemptNS("a", 1, true), preemptNS("b", 1, true))
	c.run("a", 100, 50, 1)
	c.waiting["a"] = 100
	c.waiting["b"] = 100
	for round := range 50 {
		victims, shares := c.round()
		if len(victims) > 10 {
			t.Fatalf("round %d took %d units", round, len(victims))
		}
		for _, v := range victims {
			if v.By != "b" {
				t.Fatalf("round %d: %+v preempted for %s: a, which lost work to b, took it back", round, v, v.By)
			}
		}
		c.settle(victims, shares, int64(round+2))
	}
	if a, b := c.holds("a"), c.holds("b"); a != 55 || b != 45 {
		t.Fatalf("a holds %d, b %d; want 55 and 45 (90 %% of b's share; a's overshoot of a tenth of its share ignored)", a, b)
	}
	// Weighted 1:3 with preemption on both sides: b, which held the
	// cluster, keeps its share plus a tenth of it.
	c = newCluster(100, preemptNS("a", 1, true), preemptNS("b", 3, true))
	c.run("b", 100, 50, 1)
	c.waiting["a"] = 100
	c.waiting["b"] = 100
	for round := range 50 {
		victims, shares := c.round()
		for _, v := range victims {
			if v.By != "a" {
				t.Fatalf("weighted, round %d: %+v preempted for %s", round, v, v.By)
			}
		}
		c.settle(victims, shares, int64(round+2))
	}
	if a, b := c.holds("a"), c.holds("b"); a != 18 || b != 82 {
		t.Fatalf("weighted: a holds %d, b %d; want 18 and 82 (b's share 75 and a tenth of it)", a, b)
	}
}

// preemptTerm is a term over f, committing straight into it, with a
// grace of 2 s.
func preemptTerm(f *fsm.FSM, idx *uint64) *Term {
	apply := func(c model.Command) (any, error) {
		data, err := fsm.Encode(c)
		if err != nil {
			return nil, err
		}
		*idx++
		if res, ok := f.ApplyCommand(*idx, data).(error); ok {
			return nil, res
		}
		return nil, nil
	}
	return &Term{cfg: Config{PreemptionGrace: 2 * time.Second}, d: Deps{FSM: f, Apply: apply, Log: slog.New(slog.DiscardHandler)}}
}

// mustApply returns a function that commits a command through term and
// fails t if it is refused.
func mustApply(t *testing.T, term *Term) func(model.Command) {
	return func(c model.Command) {
		t.Helper()
		if _, err := term.d.Apply(c); err != nil {
			t.Fatalf("%T: %v", c, err)
		}
	}
}

// A round gives notice with the deadline its grace sets, ends nothing
// before that deadline, and ends the units at it; a term of a new leader
// over the same tables ends the notices of the old one at their
// deadlines.
func TestPreemptRoundDeadlines(t *testing.T) {
	f := fsm.New()
	var idx uint64
	term := preemptTerm(f, &idx)
	must := mustApply(t, term)
	must(&model.RegisterWorker{ID: "w1", HTTPAddr: "w1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	must(&model.ApplyNamespace{Namespace: *preemptNS("etl", 1, true), Time: 2})
	must(&model.ApplyNamespace{Namespace: *preemptNS("ml", 1, false), Time: 3})
	for i := range 8 {
		ns := []string{"ml", "etl"}[i/4]
		id := fmt.Sprintf("driver-20261129120000-%04d", i)
		must(&model.SubmitDriver{ID: id, Token: id, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Supervise: true, Namespace: ns}, Time: int64(4 + i)})
		if ns == "ml" {
			must(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: id, Attempt: 1, WorkerID: "w1"}}, Time: int64(20 + i)})
		}
	}
	noticed := func() []string {
		var out []string
		for _, n := range f.State().Notices("w1") {
			out = append(out, fmt.Sprintf("%s@%d", n.DriverID[len(n.DriverID)-4:], n.Deadline))
		}
		return out
	}
	term.preemptRound(1000)
	if got := noticed(); !slices.Equal(got, []string{"0003@3000"}) {
		t.Fatalf("after the first round: %v, want the newest of ml, 0003, until 3000", got)
	}
	term.preemptRound(2999)
	if got := noticed(); !slices.Equal(got, []string{"0002@4999", "0003@3000"}) {
		t.Fatalf("after the second round: %v", got)
	}
	term.preemptRound(3000)
	if d, _ := f.State().Driver("driver-20261129120000-0003"); d.State != model.DriverRelaunching || d.Message != "preempted by namespace etl" {
		t.Fatalf("at its deadline driver 0003 is %s (%q)", d.State, d.Message)
	}
	next := preemptTerm(f, &idx)
	next.cfg.PreemptionGrace = time.Hour
	next.preemptRound(4999)
	if d, _ := f.State().Driver("driver-20261129120000-0002"); d.State != model.DriverRelaunching {
		t.Fatalf("the new leader left driver 0002 %s past its deadline", d.State)
	}
}

// A round whose beneficiary's waiting work vanished between the round's
// read of the tables and its proposal (here its waiting drivers are
// killed) gives no notice; with the work still waiting it does.
func TestPreemptNotifySkipsVanishedDemand(t *testing.T) {
	f := fsm.New()
	var idx uint64
	term := preemptTerm(f, &idx)
	must := mustApply(t, term)
	must(&model.RegisterWorker{ID: "w1", HTTPAddr: "w1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	must(&model.ApplyNamespace{Namespace: *preemptNS("etl", 1, true), Time: 2})
	must(&model.ApplyNamespace{Namespace: *preemptNS("ml", 1, false), Time: 3})
	var etl []string
	for i := range 7 {
		ns := []string{"ml", "etl"}[i/4]
		id := fmt.Sprintf("driver-20261129120000-%04d", i)
		must(&model.SubmitDriver{ID: id, Token: id, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Namespace: ns}, Time: int64(4 + i)})
		if ns == "ml" {
			must(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: id, Attempt: 1, WorkerID: "w1"}}, Time: int64(20 + i)})
		} else {
			etl = append(etl, id)
		}
	}
	st := f.State()
	items := roundVictims(st, st.Units())
	if len(items) == 0 {
		t.Fatal("no victim for etl's waiting drivers")
	}
	// One of etl's drivers is killed: two still wait.
	must(&model.KillDriver{DriverID: etl[0], Time: 30})
	term.notify(slices.Clone(items), 1000)
	if n := len(st.Notices("w1")); n != len(items) {
		t.Fatalf("%d notices with etl's work still waiting, want %d", n, len(items))
	}
	next := roundVictims(st, st.Units())
	if len(next) == 0 {
		t.Fatal("no victim for etl's two waiting drivers")
	}
	must(&model.KillDriver{DriverID: etl[1], Time: 31})
	must(&model.KillDriver{DriverID: etl[2], Time: 32})
	term.notify(next, 2000)
	if n := len(st.Notices("w1")); n != len(items) {
		t.Fatalf("%d notices after etl's waiting drivers were killed, want the %d of before", n, len(items))
	}
}
