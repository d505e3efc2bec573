package leader

import (
	"container/heap"
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// scheduleInterval is the scheduler's fallback tick; it normally wakes on
// every table change.
const scheduleInterval = time.Second

// PruneBatch bounds the driver IDs, and the app IDs, in one
// PruneCompleted entry, far below fsm.MaxCommandSize.
const PruneBatch = 1000

// executorRelaunchDelay is how long an app waits for a new executor after
// one of its executors exited; the fallback tick brings the scheduler back.
const executorRelaunchDelay = time.Second

// schedule places waiting drivers, then executors, while this master leads
// (Spark's Master.schedule), and drops finished drivers and apps beyond the
// retention counts. Each round reads the tables, plans, and commits each
// kind of placement as one entry; workers act only on what is committed.
func (t *Term) schedule(ctx context.Context) {
	tick := time.NewTicker(scheduleInterval)
	defer tick.Stop()
	var lastPrune time.Time
	for {
		changed := t.d.FSM.Changed()
		t.placeDrivers(planDrivers(t.d.FSM.State(), t.cfg, now()))
		apps, execs := t.d.FSM.State().LiveApps()
		var ten *tenancy
		if len(apps) > 0 {
			ten = readTenancy(t.d.FSM.State(), t.cfg.MaxRunningDrivers)
		}
		if ps := planExecutors(apps, execs, t.d.FSM.State().Workers(), t.cfg.SpreadOutApps, now(), ten); len(ps) > 0 {
			if res, err := fsm.PlaceExecutors.Commit(t.d.Apply, &model.PlaceExecutors{Placements: ps, Time: now()}); err != nil {
				t.d.Log.Warn("executor placement not committed", "err", err, "placements", len(ps))
			} else {
				t.d.Metrics.ExecutorPlacements.Add(float64(len(res.Applied)))
				for _, p := range ps {
					t.d.Log.Info("placed executor", "app", p.AppID, "executor", p.ExecutorID, "worker", p.WorkerID)
				}
			}
		}
		// Retention walks every finished row: once a second is enough.
		if time.Since(lastPrune) >= scheduleInterval {
			t.prune()
			lastPrune = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// planDrivers is one pass's driver plan over the tables st, by cfg's
// --max-running-drivers and --spread-out-apps, at now (Unix ms). The
// queue is read only when some worker has a free core, so a long queue in
// front of a full cluster costs nothing per commit.
func planDrivers(st *fsm.State, cfg Config, now int64) []model.Placement {
	ws := st.Workers()
	if !anyFreeCore(ws) {
		return nil
	}
	ten := readTenancy(st, cfg.MaxRunningDrivers)
	ten.findStarved(st, cfg.SpreadOutApps, now)
	return plan(st.WaitingDemands(), ws, ten)
}

// placeBatch and placeBytes bound one PlaceDrivers entry: its placements,
// and an estimate of its encoded size in bytes (placementBytes), far below
// fsm.MaxCommandSize, so an entry stays quick to replicate and workers hear
// of the first placements soon. Each entry wakes the long-polled heartbeat
// of every worker it places on, and a spread-out plan touches nearly all
// of them, so a backlog costs the workers' heartbeats once per entry: a
// batch as large as this places 100,000 drivers on 1,000 workers in seven
// entries.
const (
	placeBatch = 16384
	placeBytes = 2 << 20
)

// placementBytes estimates the JSON encoding of p in bytes: its IDs, its
// addresses with their quotes and commas, and the keys around them.
func placementBytes(p model.Placement) int {
	n := 64 + len(p.DriverID) + len(p.WorkerID)
	for name, addrs := range p.Resources {
		n += len(name) + 5
		for _, a := range addrs {
			n += len(a) + 3
		}
	}
	return n
}

// plan places waiting drivers, each on the ALIVE worker with room
// (cores, memory and free addresses of every custom resource it asks
// for) that has the most free cores (then memory, then ID), which spreads
// drivers out the way Spark's Master.schedule does by walking a shuffled
// worker list; a driver whose last attempt was rescheduled goes elsewhere
// than its Avoid worker when another has room. Each placement takes the
// first free addresses of each resource, in the worker's order.
//
// The next placement goes to the namespace with work to place whose
// dominant share of the cluster per weight is lowest, counting what the
// plan booked (weighted DRF, by a heap of the namespaces); inside a
// namespace, the highest priority first, then queue order. A driver
// that fits on no worker, or that its namespace may not place
// (fairshare.Admits: its quota, as Apply checks it, and its driver
// share, with the cores its app will ask for), waits; those behind it, of its namespace or another, may still
// be placed. While a namespace below its fair share has executors to
// place (tenancy.yields), the drivers of namespaces at or above theirs
// wait for the next pass, so what was freed for it goes to it. One
// namespace that bounds nothing (a cluster that never named one) is
// placed in queue order, as before namespaces.
//
// It stops at placeBatch placements or placeBytes of them, when the
// placed drivers reach ten's --max-running-drivers, and at once when no
// worker has a free core, so a long queue in front of a full cluster
// costs little. The workers are the plan's own copies: it books what it
// places on them.
func plan(waiting []fsm.Demand, workers []*model.Worker, ten *tenancy) []model.Placement {
	var alive []*model.Worker
	for _, w := range workers {
		if w.State == model.WorkerAlive {
			alive = append(alive, w)
		}
	}
	// In ID order, the first of equally free workers is the one better
	// picks, without comparing IDs for every driver and worker.
	slices.SortFunc(alive, func(a, b *model.Worker) int { return strings.Compare(a.ID, b.ID) })
	maxCores, maxMem := mostFree(alive)
	if maxCores <= 0 {
		return nil
	}
	capacity := fairshare.Capacity(alive)
	queue := groupShares(ten, len(waiting), func(i int) string { return model.NamespaceOf(waiting[i].Namespace) },
		func(i int) int { return waiting[i].Priority }, capacity)
	running := ten.runningDrivers()
	var out []model.Placement
	size := 0
	for queue.Len() > 0 {
		if maxCores <= 0 || len(out) == placeBatch || size >= placeBytes || ten.atMaxDrivers(running) {
			break
		}
		ns := (*queue)[0]
		if ten.yields(ns.n.Name) {
			heap.Pop(queue)
			continue
		}
		d := &waiting[ns.head()]
		if d.Cores > maxCores || d.MemoryMB > maxMem {
			queue.advance()
			continue
		}
		if _, ok := fairshare.Admits(ns.n, &ns.use, ten.fairOf(ns.n), capacity, d.Cores, d.MemoryMB, d.Resources, d.AppCores, true); !ok {
			queue.advance()
			continue
		}
		best := bestWorker(alive, d)
		if best == nil {
			// The most free cores and the most free memory may be on
			// different workers: the quick check above passes a driver
			// that fits on neither.
			queue.advance()
			continue
		}
		held, _ := d.Resources.Pick(best.ResourcesFree())
		best.CoresUsed += d.Cores
		best.MemoryUsedMB += d.MemoryMB
		best.ResourcesUsed.Hold(held)
		ns.book(d.Cores, d.MemoryMB, d.Resources, d.AppCores, true, capacity)
		running++
		queue.advance()
		p := model.Placement{DriverID: d.DriverID, Attempt: d.Attempt, WorkerID: best.ID, Resources: held}
		out = append(out, p)
		size += placementBytes(p)
		maxCores, maxMem = mostFree(alive)
	}
	return out
}

// bestWorker returns the worker of alive (in ID order) a driver of d goes
// to: of those with room for it, the one with the most free cores (then
// memory, then ID) other than d.Avoid, else d.Avoid when it has room
// (Nomad's reschedule: another worker when one has room, else the same
// one); nil when none has room.
func bestWorker(alive []*model.Worker, d *fsm.Demand) *model.Worker {
	var best, avoided *model.Worker
	for _, w := range alive {
		// Most drivers ask for no custom resource; the free addresses
		// are worked out only for those that do.
		if w.CoresFree() < d.Cores || w.MemoryFreeMB() < d.MemoryMB || (len(d.Resources) > 0 && !d.Resources.Fits(w.ResourcesFree().Counts())) {
			continue
		}
		if w.ID == d.Avoid {
			avoided = w
			continue
		}
		if best == nil || roomier(w, best) {
			best = w
		}
	}
	if best == nil {
		return avoided
	}
	return best
}

// mostFree returns the most free cores and the most free memory (MiB) of
// any of the workers (not necessarily the same one).
func mostFree(ws []*model.Worker) (int, int64) {
	var cores int
	var mem int64
	for _, w := range ws {
		cores, mem = max(cores, w.CoresFree()), max(mem, w.MemoryFreeMB())
	}
	return cores, mem
}

// roomier reports whether a has more free cores than b, or as many and
// more free memory: better without the ID order, for workers taken in it.
func roomier(a, b *model.Worker) bool {
	if a.CoresFree() != b.CoresFree() {
		return a.CoresFree() > b.CoresFree()
	}
	return a.MemoryFreeMB() > b.MemoryFreeMB()
}

// better orders workers for placement: most free cores, then most free
// memory, then ID.
func better(a, b *model.Worker) bool {
	if a.CoresFree() != b.CoresFree() {
		return a.CoresFree() > b.CoresFree()
	}
	if a.MemoryFreeMB() != b.MemoryFreeMB() {
		return a.MemoryFreeMB() > b.MemoryFreeMB()
	}
	return a.ID < b.ID
}

// placeDrivers commits a plan's driver placements, if any.
func (t *Term) placeDrivers(ps []model.Placement) {
	if len(ps) == 0 {
		return
	}
	at := now()
	res, err := fsm.PlaceDrivers.Commit(t.d.Apply, &model.PlaceDrivers{Placements: ps, Time: at})
	if err != nil {
		t.d.Log.Warn("placement not committed", "err", err, "placements", len(ps))
		return
	}
	// Apply skips placements the tables no longer allow; only the
	// applied ones count.
	t.d.Metrics.Placed(t.d.FSM.State(), res.Applied, at)
	for _, p := range ps {
		t.d.Log.Info("placed driver", "driver", p.DriverID, "attempt", p.Attempt, "worker", p.WorkerID)
	}
}

// anyFreeCore reports whether some ALIVE worker has a free core.
func anyFreeCore(ws []*model.Worker) bool {
	for _, w := range ws {
		if w.State == model.WorkerAlive && w.CoresFree() > 0 {
			return true
		}
	}
	return false
}

// planExecutors places executors for unfinished apps, following Spark's
// Master.scheduleExecutorsOnWorkers: the usable workers are the ALIVE ones
// with room for one executor (its custom resources included, whose first
// free addresses it takes), most free cores first; spreadOut hands out
// one executor per worker per pass, so an app lands on as many workers as
// possible, while consolidating fills each worker before the next. Each
// app stops at its core cap and executor limit, and at its namespace's
// quota (as Apply checks it). An app whose executor exited within
// executorRelaunchDelay before now (Unix ms) waits, so executors that
// exit at once are not relaunched in a tight loop.
//
// Apps are served in registration order within a namespace (Spark's FIFO
// over waitingApps), each taking what it can before the next, and across
// namespaces by the weighted DRF order plan follows, one executor at a
// time: the namespace whose dominant share per weight is lowest places
// the next executor of its first app that still wants one.
func planExecutors(apps []*model.App, execs [][]*model.Executor, workers []*model.Worker, spreadOut bool, now int64, ten *tenancy) []model.ExecutorPlacement {
	var alive []*model.Worker
	for _, w := range workers {
		if w.State == model.WorkerAlive {
			alive = append(alive, w)
		}
	}
	var live []int
	for i, a := range apps {
		if !a.State.Terminal() && !exitedRecently(execs[i], now) {
			live = append(live, i)
		}
	}
	capacity := fairshare.Capacity(alive)
	queue := groupShares(ten, len(live), func(i int) string { return model.NamespaceOf(apps[live[i]].Namespace) }, nil, capacity)
	placers := make(map[int]*executorPlacer)
	var out []model.ExecutorPlacement
	for queue.Len() > 0 {
		ns := (*queue)[0]
		i := live[ns.head()]
		p := placers[i]
		if p == nil {
			p = newExecutorPlacer(apps[i], execs[i], alive, spreadOut)
			placers[i] = p
		}
		a := apps[i]
		if _, ok := fairshare.Admits(ns.n, &ns.use, 0, capacity, a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, 0, false); !ok {
			queue.advance()
			continue
		}
		e, ok := p.place()
		if !ok {
			queue.advance()
			continue
		}
		out = append(out, e)
		ns.book(a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, 0, false, capacity)
		heap.Fix(queue, 0)
	}
	return out
}

// executorPlacer places one app's executors one at a time, in the order
// of Spark's scheduleExecutorsOnWorkers: passes over the usable workers,
// most free cores first as they were when the app's turn came, one
// executor per worker per pass when spreading out, as many as fit when
// consolidating, until a pass places nothing or the app wants no more.
type executorPlacer struct {
	a                   *model.App
	usable              []*model.Worker
	spreadOut           bool
	coresLeft, execLeft int
	next                int
	// at is the worker of usable the pass is at, and placed whether
	// the pass placed anything yet.
	at     int
	placed bool
}

func newExecutorPlacer(a *model.App, execs []*model.Executor, alive []*model.Worker, spreadOut bool) *executorPlacer {
	p := &executorPlacer{a: a, spreadOut: spreadOut, coresLeft: a.CoresLeft(), execLeft: -1, next: a.NextExecutorID}
	if a.ExecutorLimit >= 0 {
		live := 0
		for _, e := range execs {
			if !e.State.Terminal() {
				live++
			}
		}
		p.execLeft = max(a.ExecutorLimit-live, 0)
	}
	for _, w := range alive {
		if p.fits(w) {
			p.usable = append(p.usable, w)
		}
	}
	sort.SliceStable(p.usable, func(i, j int) bool { return better(p.usable[i], p.usable[j]) })
	return p
}

func (p *executorPlacer) wants() bool {
	return (p.coresLeft < 0 || p.coresLeft >= p.a.CoresPerExecutor) && p.execLeft != 0
}

func (p *executorPlacer) fits(w *model.Worker) bool {
	a := p.a
	return w.CoresFree() >= a.CoresPerExecutor && w.MemoryFreeMB() >= a.MemoryPerExecutorMB &&
		a.ResourcesPerExecutor.Fits(w.ResourcesFree().Counts())
}

// place books the app's next executor on its worker and returns it;
// false when the app wants no more or no usable worker has room.
func (p *executorPlacer) place() (model.ExecutorPlacement, bool) {
	a := p.a
	for p.wants() {
		if p.at == len(p.usable) {
			if !p.placed {
				return model.ExecutorPlacement{}, false
			}
			p.at, p.placed = 0, false
		}
		w := p.usable[p.at]
		if !p.fits(w) {
			p.at++
			continue
		}
		held, _ := a.ResourcesPerExecutor.Pick(w.ResourcesFree())
		e := model.ExecutorPlacement{AppID: a.ID, ExecutorID: p.next, WorkerID: w.ID, Resources: held}
		p.next++
		p.placed = true
		w.CoresUsed += a.CoresPerExecutor
		w.MemoryUsedMB += a.MemoryPerExecutorMB
		w.ResourcesUsed.Hold(held)
		if p.coresLeft > 0 {
			p.coresLeft -= a.CoresPerExecutor
		}
		if p.execLeft > 0 {
			p.execLeft--
		}
		if p.spreadOut {
			p.at++
		}
		return e, true
	}
	return model.ExecutorPlacement{}, false
}

// exitedRecently reports whether one of the executors exited on its own
// (EXITED or FAILED) less than executorRelaunchDelay before now (Unix ms).
func exitedRecently(es []*model.Executor, now int64) bool {
	for _, e := range es {
		if (e.State == model.ExecExited || e.State == model.ExecFailed) && now-e.EndedAt < executorRelaunchDelay.Milliseconds() {
			return true
		}
	}
	return false
}

// prune commits the removal of the oldest finished drivers and apps beyond
// RetainedDrivers and RetainedApps.
func (t *Term) prune() {
	drivers, apps := t.d.FSM.State().Completed()
	var c model.PruneCompleted
	if n := len(drivers) - t.cfg.RetainedDrivers; n > 0 {
		c.DriverIDs = drivers[:min(n, PruneBatch)]
	}
	if n := len(apps) - t.cfg.RetainedApps; n > 0 {
		c.AppIDs = apps[:min(n, PruneBatch)]
	}
	if len(c.DriverIDs)+len(c.AppIDs) == 0 {
		return
	}
	if _, err := t.d.Apply(&c); err != nil {
		t.d.Log.Warn("retention not committed", "err", err)
		return
	}
	t.d.Log.Info("dropped finished drivers and apps beyond retention", "drivers", len(c.DriverIDs), "apps", len(c.AppIDs))
}
