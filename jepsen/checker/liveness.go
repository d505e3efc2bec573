package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/probe"
)

// life is one probe process's known lifetime: the hull of its own trace
// [Start, Alive()] and of the sampler's sighting [First, Last]. Both views
// are of the same process (same driver, attempt and PID), so they are
// merged rather than compared with each other.
type life struct {
	driver  string
	attempt int
	pid     int
	worker  string
	start   int64
	end     int64
}

type lifeKey struct {
	driver  string
	attempt int
	pid     int
}

// lives merges runs and sightings into one life per process, per driver.
func lives(runs []probe.Run, sightings []probe.Sighting) map[string][]life {
	byKey := map[lifeKey]*life{}
	var order []lifeKey
	add := func(k lifeKey, worker string, start, end int64) {
		if l, ok := byKey[k]; ok {
			l.start, l.end = min(l.start, start), max(l.end, end)
			if l.worker == "" {
				l.worker = worker
			}
			return
		}
		byKey[k] = &life{driver: k.driver, attempt: k.attempt, pid: k.pid, worker: worker, start: start, end: end}
		order = append(order, k)
	}
	for _, r := range runs {
		if r.Start == 0 {
			continue // an empty trace: the process died before its first line
		}
		add(lifeKey{r.Driver, r.Attempt, r.PID}, r.Worker, r.Start, r.Alive())
	}
	for _, s := range sightings {
		add(lifeKey{s.Driver, s.Attempt, s.PID}, s.Worker, s.First, s.Last)
	}
	out := map[string][]life{}
	for _, k := range order {
		out[k.driver] = append(out[k.driver], *byKey[k])
	}
	for _, ls := range out {
		sort.Slice(ls, func(i, j int) bool { return ls[i].start < ls[j].start })
	}
	return out
}

// span is a closed interval of Unix ns.
type span struct{ start, end int64 }

// cutSpans returns, merged and sorted, the spans during which node was hit
// by a fault, each extended by slack after the fault stopped: the time an
// attempt on node may outlive its replacement in default mode.
func cutSpans(ws []history.Window, node string, slack time.Duration) []span {
	var ss []span
	for _, w := range ws {
		if targets(w, node) {
			ss = append(ss, span{w.Start, w.Stop + int64(slack)})
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
	var out []span
	for _, s := range ss {
		if n := len(out); n > 0 && s.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out = append(out, s)
	}
	return out
}

// SingleLiveAttempt proves that at any instant at most one attempt of a
// driver is alive. Lifetimes come from the probes' traces and the /proc
// sightings. Two processes of the same attempt never overlap (supervised
// restarts on one worker are sequential), in any mode. In strict mode no
// two attempts overlap either. In default mode an overlap of two attempts
// is allowed only while the older attempt's worker is cut off: the overlap
// must lie within a fault window targeting that worker, extended by
// CutSlack after the window stops (the old attempt is killed once the
// worker hears from a leader again). Measured: max_overlap_s (any overlap)
// and allowed_overlap_s (the largest allowed one). Offending: driver IDs.
func SingleLiveAttempt(in Input) Result {
	ws := in.windows()
	spans := map[string][]span{}
	cut := func(worker string) []span {
		if s, ok := spans[worker]; ok {
			return s
		}
		spans[worker] = cutSpans(ws, worker, in.CutSlack)
		return spans[worker]
	}
	var off offenders
	var details []string
	var maxOverlap, maxAllowed int64
	byDriver := lives(in.Runs, in.Sightings)
	for _, id := range sortedKeys(byDriver) {
		ls := byDriver[id]
		for i := range ls {
			for j := i + 1; j < len(ls); j++ {
				a, b := ls[i], ls[j]
				// Closed intervals: two sightings in the same /proc scan
				// share an instant and are a real overlap.
				start, end := max(a.start, b.start), min(a.end, b.end)
				if start > end {
					continue
				}
				overlap := end - start
				maxOverlap = max(maxOverlap, overlap)
				older := a
				if b.attempt < a.attempt {
					older = b
				}
				why := ""
				switch {
				case a.attempt == b.attempt:
					why = "two runs of one attempt"
				case in.Strict:
					why = "strict fencing"
				case !within(cut(older.worker), span{start, end}):
					why = fmt.Sprintf("older attempt's worker %q not cut off", older.worker)
				}
				if why == "" {
					maxAllowed = max(maxAllowed, overlap)
					continue
				}
				off.add(id)
				details = append(details, fmt.Sprintf("%s attempts %d/%d (pids %d/%d) overlap %.2fs: %s",
					id, a.attempt, b.attempt, a.pid, b.pid, seconds(overlap), why))
			}
		}
	}
	r := result(NameSingleLiveAttempt, off.list,
		fmt.Sprintf("no forbidden overlap among %d drivers' attempts (max overlap %.2fs, allowed %.2fs)",
			len(byDriver), seconds(maxOverlap), seconds(maxAllowed)),
		fmt.Sprintf("%d drivers had two live attempts at once: %s", len(off.list), joinMax(details, 3)))
	r.Measured = map[string]float64{"max_overlap_s": seconds(maxOverlap), "allowed_overlap_s": seconds(maxAllowed)}
	return r
}

// within reports whether s lies entirely inside one of the sorted spans.
func within(spans []span, s span) bool {
	for _, c := range spans {
		if c.start <= s.start && s.end <= c.end {
			return true
		}
	}
	return false
}

// AttemptsIncrease proves that attempt numbers only move forward: per
// driver, the probe runs in order of start have non-decreasing attempt
// numbers (a new attempt never precedes an old one's restart), and every
// master's final row lists its attempts with strictly increasing numbers.
// Offending: driver IDs.
func AttemptsIncrease(in Input) Result {
	var off offenders
	byDriver := map[string][]probe.Run{}
	for _, r := range in.Runs {
		if r.Start != 0 {
			byDriver[r.Driver] = append(byDriver[r.Driver], r)
		}
	}
	for _, id := range sortedKeys(byDriver) {
		rs := byDriver[id]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
		for i := 1; i < len(rs); i++ {
			if rs[i].Attempt < rs[i-1].Attempt {
				off.add(id)
			}
		}
	}
	for _, v := range in.Final {
		for _, d := range v.Drivers {
			for i := 1; i < len(d.Attempts); i++ {
				if d.Attempts[i].Attempt <= d.Attempts[i-1].Attempt {
					off.add(d.ID)
				}
			}
		}
	}
	return result(NameAttemptsIncrease, off.list,
		fmt.Sprintf("attempt numbers only increase for all %d probed drivers and every final row", len(byDriver)),
		fmt.Sprintf("%d drivers' attempt numbers went backwards", len(off.list)))
}

// UnsupervisedNotRelaunched proves that only supervised drivers are
// relaunched or restarted: a driver submitted without supervise (by the
// submit's own request, whatever its row says) has only attempt 1 in its
// probe runs, sightings and final rows, and at most one probe run.
// Offending: driver IDs.
func UnsupervisedNotRelaunched(in Input) Result {
	unsup := map[string]bool{}
	unsupTokens := map[string]bool{}
	for _, c := range clientOps(in.Ops) {
		if c.inv.F != history.FSubmit || c.inv.Supervise {
			continue
		}
		unsupTokens[c.inv.Token] = true
		if c.outcome() == history.OK && c.done.Driver != "" {
			unsup[c.done.Driver] = true
		}
	}
	// A submit with an unknown outcome names no driver; its token does.
	for _, v := range in.Final {
		for _, d := range v.Drivers {
			if unsupTokens[d.Token] {
				unsup[d.ID] = true
			}
		}
	}
	var off offenders
	runs := map[string]int{}
	for _, r := range in.Runs {
		if !unsup[r.Driver] {
			continue
		}
		runs[r.Driver]++
		if r.Attempt != 1 || runs[r.Driver] > 1 {
			off.add(r.Driver)
		}
	}
	for _, s := range in.Sightings {
		if unsup[s.Driver] && s.Attempt != 1 {
			off.add(s.Driver)
		}
	}
	for _, v := range in.Final {
		for _, d := range v.Drivers {
			if !unsup[d.ID] {
				continue
			}
			if d.Attempt != 1 {
				off.add(d.ID)
			}
			for _, a := range d.Attempts {
				if a.Attempt != 1 {
					off.add(d.ID)
				}
			}
		}
	}
	return result(NameUnsupervised, off.list,
		fmt.Sprintf("all %d unsupervised drivers ran at most once, as attempt 1", len(unsup)),
		fmt.Sprintf("%d unsupervised drivers were relaunched or restarted", len(off.list)))
}

// KilledStaysDead proves that a kill is final. For the earliest ok kill of
// a driver, acknowledged at T:
//
//   - no probe run of a later attempt than the one killed starts after T
//     (the killed driver is never relaunched);
//   - no run of the killed attempt starts after the kill's deadline (the
//     worker may restart it in place only until the kill reaches it);
//   - no run or sighting is alive after the deadline.
//
// The deadline is T+KillGrace, or, when a fault window targeting the run's
// worker or any master was active at some point in [T, T+KillGrace] (the
// kill may not have reached the worker: it was cut off, or no leader was
// there to tell it, as when every master is down), the latest such
// window's stop plus CutSlack if that is later. Offending: driver IDs.
func KilledStaysDead(in Input) Result {
	killedAt := map[string]int64{}
	for _, c := range clientOps(in.Ops) {
		if c.inv.F != history.FKill || c.outcome() != history.OK {
			continue
		}
		if t, ok := killedAt[c.inv.Driver]; !ok || c.done.Time < t {
			killedAt[c.inv.Driver] = c.done.Time
		}
	}
	// The attempt that was killed: the final row's current attempt (a
	// KILLED row never moves to another attempt), or the highest attempt
	// that had started by the kill if that is higher or there is no row.
	killedAttempt := map[string]int{}
	if lv := in.leader(); lv != nil {
		for _, d := range lv.Drivers {
			if _, ok := killedAt[d.ID]; ok {
				killedAttempt[d.ID] = d.Attempt
			}
		}
	}
	for _, r := range in.Runs {
		if t, ok := killedAt[r.Driver]; ok && r.Start != 0 && r.Start <= t {
			killedAttempt[r.Driver] = max(killedAttempt[r.Driver], r.Attempt)
		}
	}
	ws := in.windows()
	deadline := func(t int64, worker string) int64 {
		d := t + int64(in.KillGrace)
		for _, w := range ws {
			if (targets(w, worker) || in.targetsMaster(w)) && w.Start <= t+int64(in.KillGrace) && w.Stop >= t {
				d = max(d, w.Stop+int64(in.CutSlack))
			}
		}
		return d
	}
	var off offenders
	var details []string
	flag := func(id, what string) {
		off.add(id)
		details = append(details, id+" "+what)
	}
	for _, r := range in.Runs {
		t, ok := killedAt[r.Driver]
		if !ok || r.Start == 0 {
			continue
		}
		dl := deadline(t, r.Worker)
		switch {
		case r.Start > t && r.Attempt > killedAttempt[r.Driver]:
			flag(r.Driver, fmt.Sprintf("attempt %d started %.2fs after the kill", r.Attempt, seconds(r.Start-t)))
		case r.Start > dl:
			flag(r.Driver, fmt.Sprintf("attempt %d restarted %.2fs after the kill", r.Attempt, seconds(r.Start-t)))
		case r.Alive() > dl:
			flag(r.Driver, fmt.Sprintf("attempt %d alive %.2fs after the kill", r.Attempt, seconds(r.Alive()-t)))
		}
	}
	for _, s := range in.Sightings {
		t, ok := killedAt[s.Driver]
		if !ok {
			continue
		}
		if s.Last > deadline(t, s.Worker) {
			flag(s.Driver, fmt.Sprintf("attempt %d (pid %d) seen alive %.2fs after the kill", s.Attempt, s.PID, seconds(s.Last-t)))
		}
	}
	return result(NameKilledStaysDead, off.list,
		fmt.Sprintf("all %d killed drivers stayed dead", len(killedAt)),
		fmt.Sprintf("%d killed drivers ran on: %s", len(off.list), joinMax(details, 3)))
}
