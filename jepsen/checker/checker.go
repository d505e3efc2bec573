// Package checker decides whether a chaos run kept Drover's promises. It
// reads what the run recorded (the clients' and nemesis's history, the
// probes' own traces of every driver attempt, the /proc sampler's
// sightings, and every master's tables after the final heal and drain) and
// runs one small checker per promise. Each checker proves one property and
// nothing else, so a failure names the promise that was broken.
package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-project/drover/jepsen/changes"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/model"
)

// MasterView is one master's own tables after the final heal and drain.
type MasterView struct {
	ID        string
	StateHash string
	// StateIndex is the Raft index of the last entry the hashed tables
	// include (api.State.StateIndex), read with the hash.
	StateIndex uint64
	Drivers    []*model.Driver
	// Schedules are its schedule rows, read at StateIndex too; nil in
	// a run without schedules.
	Schedules []*model.Schedule
}

// Input is everything a run recorded, for the checkers.
type Input struct {
	Ops       []history.Op
	Runs      []probe.Run
	Sightings []probe.Sighting
	// Final holds every master's view; Final[Leader] is the leader's.
	Final  []MasterView
	Leader int
	// Strict is set when the cluster ran with --fencing strict.
	Strict bool
	// HealAt is when the final heal happened (Unix ns).
	HealAt int64
	// DrainEnd is when the drain period after the heal ended (Unix ns).
	DrainEnd int64
	// WriteAcceptedAt is when the first submission after HealAt was
	// acknowledged (Unix ns), or 0 if none was.
	WriteAcceptedAt int64
	// WriteBound is how soon after HealAt writes must be accepted again.
	WriteBound time.Duration
	// KillGrace is how long a killed driver may stay alive after the kill
	// is acknowledged, when its worker is reachable.
	KillGrace time.Duration
	// CutSlack is how long after a fault window touching a worker ends
	// that worker's old attempts may still live.
	CutSlack time.Duration
	// Changes is every committed row change from the start of the run to
	// the end of the drain, nil when the run recorded none (it ran
	// without namespaces; the namespace checkers then do not run).
	Changes *changes.Log
	// Namespaces are the namespaces the run applied, with their quotas
	// and weights.
	Namespaces []model.Namespace
	// Schedules names the schedules the run created, whose drivers come
	// from no client's submission; empty when it created none (the
	// schedule checker then does not run).
	Schedules []string
}

// Result is one checker's verdict.
type Result struct {
	Name    string
	Valid   bool
	Summary string
	// Offending lists the driver IDs or tokens that broke the property.
	Offending []string
	// Measured holds numbers a checker reports, valid or not.
	Measured map[string]float64
}

// Check runs every checker on in, always in the same order; the
// namespace checkers only when the run applied namespaces, and the
// schedule checker only when it created schedules.
func Check(in Input) []Result {
	rs := []Result{
		LostSubmissions(in),
		PhantomDrivers(in),
		OneDriverPerToken(in),
		SingleLiveAttempt(in),
		AttemptsIncrease(in),
		UnsupervisedNotRelaunched(in),
		KilledStaysDead(in),
		SupervisedFinish(in),
		LinearizableReads(in),
		TablesIdentical(in),
		WritesAfterHeal(in),
	}
	if len(in.Namespaces) > 0 {
		rs = append(rs, NamespaceQuotas(in), PreemptionVictims(in))
	}
	if len(in.Schedules) > 0 {
		rs = append(rs, ScheduleSlots(in))
	}
	return rs
}

// maxShown is how many offending items Line prints before "N more".
const maxShown = 8

// Line renders r as one line: "PASS name: summary" or
// "FAIL name: summary (offending: a, b, ... and N more)".
func (r Result) Line() string {
	verdict := "PASS"
	if !r.Valid {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("%s %s: %s", verdict, r.Name, r.Summary)
	if len(r.Offending) == 0 {
		return s
	}
	shown := r.Offending[:min(len(r.Offending), maxShown)]
	list := strings.Join(shown, ", ")
	if more := len(r.Offending) - len(shown); more > 0 {
		list += fmt.Sprintf(", ... and %d more", more)
	}
	return fmt.Sprintf("%s (offending: %s)", s, list)
}

// result builds a Result that is valid exactly when nothing offends.
func result(name string, offending []string, okSummary, failSummary string) Result {
	r := Result{Name: name, Valid: len(offending) == 0, Summary: okSummary, Offending: offending}
	if !r.Valid {
		r.Summary = failSummary
	}
	return r
}

// offenders collects offending items once each, in the order first seen,
// so a result lists each driver or token a single time.
type offenders struct {
	seen map[string]bool
	list []string
}

func (o *offenders) add(s string) {
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	if !o.seen[s] {
		o.seen[s] = true
		o.list = append(o.list, s)
	}
}

// leader returns the leader's view, or nil when Leader does not index
// Final (a run that could not collect it).
func (in Input) leader() *MasterView {
	if in.Leader < 0 || in.Leader >= len(in.Final) {
		return nil
	}
	return &in.Final[in.Leader]
}

// completed is one client operation with its completion; done is nil when
// the run ended before the operation completed.
type completed struct {
	inv, done *history.Op
}

// outcome is the completion's type; an operation that never completed is
// indeterminate, like an info.
func (c completed) outcome() history.Type {
	if c.done == nil {
		return history.Info
	}
	return c.done.Type
}

// clientOps pairs every client invoke with its completion.
func clientOps(ops []history.Op) []completed {
	var out []completed
	for _, p := range history.Pairs(ops) {
		out = append(out, completed{inv: p[0], done: p[1]})
	}
	return out
}

// submitTokens is the set of tokens some submit invoke used.
func submitTokens(ops []history.Op) map[string]bool {
	out := map[string]bool{}
	for _, op := range ops {
		if op.Process != history.NemesisProcess && op.Type == history.Invoke && op.F == history.FSubmit {
			out[op.Token] = true
		}
	}
	return out
}

// horizon is the last instant anything in the run was recorded; a fault
// window that never stopped lasts until then.
func (in Input) horizon() int64 {
	end := in.DrainEnd
	for _, op := range in.Ops {
		end = max(end, op.Time)
	}
	for _, r := range in.Runs {
		end = max(end, r.Alive())
	}
	for _, s := range in.Sightings {
		end = max(end, s.Last)
	}
	return end
}

// windows returns the run's fault windows.
func (in Input) windows() []history.Window {
	return history.Windows(in.Ops, in.horizon())
}

// sortedKeys returns m's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// seconds converts a span in nanoseconds to seconds.
func seconds(ns int64) float64 { return float64(ns) / float64(time.Second) }

// targets reports whether w hits node.
func targets(w history.Window, node string) bool {
	return node != "" && slices.Contains(w.Targets, node)
}

// targetsMaster reports whether a fault window hits any master (one of the
// Final views): while it lasts a worker may have no leader to hear from.
func (in Input) targetsMaster(w history.Window) bool {
	for _, v := range in.Final {
		if targets(w, v.ID) {
			return true
		}
	}
	return false
}
