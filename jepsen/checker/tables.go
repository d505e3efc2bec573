package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-project/drover/jepsen/history"
)

// Checker names, as they appear in results.
const (
	NameLostSubmissions   = "lost-submissions"
	NamePhantomDrivers    = "phantom-drivers"
	NameOneDriverPerToken = "one-driver-per-token"
	NameSingleLiveAttempt = "single-live-attempt"
	NameAttemptsIncrease  = "attempts-increase"
	NameUnsupervised      = "unsupervised-not-relaunched"
	NameKilledStaysDead   = "killed-stays-dead"
	NameSupervisedFinish  = "supervised-finish"
	NameLinearizableReads = "linearizable-reads"
	NameTablesIdentical   = "tables-identical"
	NameWritesAfterHeal   = "writes-after-heal"
)

const noLeaderView = "no leader view to check against"

// LostSubmissions proves that no acknowledged submission was lost: every
// submit with an ok completion names a driver that is in the leader's final
// tables. (The run must keep more finished drivers than it submits, or
// retention would evict them.) Offending: the missing driver IDs.
func LostSubmissions(in Input) Result {
	lv := in.leader()
	if lv == nil {
		return Result{Name: NameLostSubmissions, Summary: noLeaderView}
	}
	have := map[string]bool{}
	for _, d := range lv.Drivers {
		have[d.ID] = true
	}
	var off offenders
	acked := 0
	for _, c := range clientOps(in.Ops) {
		if c.inv.F != history.FSubmit || c.outcome() != history.OK {
			continue
		}
		acked++
		switch {
		case c.done.Driver == "":
			off.add(fmt.Sprintf("token %s (ok without a driver ID)", c.inv.Token))
		case !have[c.done.Driver]:
			off.add(c.done.Driver)
		}
	}
	return result(NameLostSubmissions, off.list,
		fmt.Sprintf("all %d acknowledged submissions are in %s's tables", acked, lv.ID),
		fmt.Sprintf("%d of %d acknowledged submissions are missing from %s's tables", len(off.list), acked, lv.ID))
}

// PhantomDrivers proves that the cluster invents no drivers: every driver
// in any master's final tables carries a token that some submit invoke
// used, or was fired by one of the run's schedules (in.Schedules; which
// of those are rightful, schedule-slots decides). Offending: the phantom
// driver IDs.
func PhantomDrivers(in Input) Result {
	tokens := submitTokens(in.Ops)
	var off offenders
	rows, fired := 0, 0
	for _, v := range in.Final {
		for _, d := range v.Drivers {
			rows++
			if d.Token == "" && d.Schedule != "" && slices.Contains(in.Schedules, d.Schedule) {
				fired++
				continue
			}
			if d.Token == "" || !tokens[d.Token] {
				off.add(d.ID)
			}
		}
	}
	return result(NamePhantomDrivers, off.list,
		fmt.Sprintf("all %d driver rows on %d masters come from a submit, or %d from the run's schedules", rows, len(in.Final), fired),
		fmt.Sprintf("%d drivers carry a token no submit used", len(off.list)))
}

// OneDriverPerToken proves that submissions are idempotent by token: no
// two drivers in any master's final tables share a token, all ok submits
// with the same token returned the same driver ID, and that driver's row
// carries that token. Offending: the tokens.
func OneDriverPerToken(in Input) Result {
	var off offenders
	for _, v := range in.Final {
		byToken := map[string]string{}
		for _, d := range v.Drivers {
			if d.Token == "" {
				continue // phantom-drivers reports it
			}
			if other, ok := byToken[d.Token]; ok && other != d.ID {
				off.add(d.Token)
			}
			byToken[d.Token] = d.ID
		}
	}
	rowToken := map[string]string{}
	if lv := in.leader(); lv != nil {
		for _, d := range lv.Drivers {
			rowToken[d.ID] = d.Token
		}
	}
	acked := map[string]string{}
	for _, c := range clientOps(in.Ops) {
		if c.inv.F != history.FSubmit || c.outcome() != history.OK || c.done.Driver == "" {
			continue
		}
		tok, id := c.inv.Token, c.done.Driver
		if prev, ok := acked[tok]; ok && prev != id {
			off.add(tok)
		}
		acked[tok] = id
		if t, ok := rowToken[id]; ok && t != tok {
			// The submit was answered with another submission's driver.
			off.add(tok)
		}
	}
	return result(NameOneDriverPerToken, off.list,
		fmt.Sprintf("%d acknowledged tokens, each with one driver", len(acked)),
		fmt.Sprintf("%d tokens map to more than one driver", len(off.list)))
}

// SupervisedFinish proves that supervision ends: every supervised driver in
// the leader's final tables, taken once the drain period has ended, is in a
// terminal state. Offending: the unfinished driver IDs.
func SupervisedFinish(in Input) Result {
	lv := in.leader()
	if lv == nil {
		return Result{Name: NameSupervisedFinish, Summary: noLeaderView}
	}
	var off offenders
	n := 0
	for _, d := range lv.Drivers {
		if !d.Supervise {
			continue
		}
		n++
		if !d.State.Terminal() {
			off.add(fmt.Sprintf("%s (%s)", d.ID, d.State))
		}
	}
	return result(NameSupervisedFinish, off.list,
		fmt.Sprintf("all %d supervised drivers ended by the end of the drain", n),
		fmt.Sprintf("%d of %d supervised drivers had not ended by the end of the drain", len(off.list), n))
}

// TablesIdentical proves that the masters converge: after heal and drain
// every master reports the same state hash at the same applied index.
// Offending: every master's "id=hash@index" when they differ.
func TablesIdentical(in Input) Result {
	if len(in.Final) == 0 {
		return Result{Name: NameTablesIdentical, Summary: "no master views"}
	}
	first := in.Final[0]
	same := true
	for _, v := range in.Final[1:] {
		if v.StateHash != first.StateHash || v.StateIndex != first.StateIndex {
			same = false
		}
	}
	if same && first.StateHash != "" {
		return Result{Name: NameTablesIdentical, Valid: true,
			Summary: fmt.Sprintf("%d masters at index %d with hash %s", len(in.Final), first.StateIndex, short(first.StateHash))}
	}
	var off []string
	for _, v := range in.Final {
		off = append(off, fmt.Sprintf("%s=%s@%d", v.ID, short(v.StateHash), v.StateIndex))
	}
	summary := "masters' tables differ"
	if same {
		summary = "masters reported no state hash"
	}
	return Result{Name: NameTablesIdentical, Summary: summary, Offending: off}
}

// short abbreviates a hash for display; 12 hex digits are plenty to tell
// a handful of masters apart.
func short(h string) string {
	if h == "" {
		return "(none)"
	}
	return h[:min(len(h), 12)]
}

// WritesAfterHeal proves availability after the faults end: a submission
// was acknowledged within WriteBound of the final heal. Measured["seconds"]
// is the delay, when one was acknowledged.
func WritesAfterHeal(in Input) Result {
	r := Result{Name: NameWritesAfterHeal}
	if in.WriteAcceptedAt == 0 {
		r.Summary = fmt.Sprintf("no submission acknowledged after the heal (bound %s)", in.WriteBound)
		return r
	}
	d := time.Duration(in.WriteAcceptedAt - in.HealAt)
	r.Measured = map[string]float64{"seconds": d.Seconds()}
	r.Valid = d <= in.WriteBound
	verb := "within"
	if !r.Valid {
		verb = "later than"
	}
	r.Summary = fmt.Sprintf("first write accepted %.2fs after the heal, %s the bound of %s", d.Seconds(), verb, in.WriteBound)
	return r
}

// joinMax joins at most n items, for summaries.
func joinMax(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}
