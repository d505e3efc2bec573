package checker

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/model"
)

// readsTimeout bounds the linearizability search; past it the verdict is
// unknown, which counts as a failure (nothing was proven).
const readsTimeout = 60 * time.Second

// Operation kinds in the linearizability model.
const (
	opSubmit = "submit"
	opRead   = "read"
	opKill   = "kill"
)

// regInput is an operation's input: what it did, to which driver.
// Unsure marks a kill whose outcome is unknown: it may have taken effect,
// or have been refused because the driver had already ended.
type regInput struct {
	Op     string
	Driver string
	Unsure bool
}

// regOutput is what a read returned.
type regOutput struct {
	State   model.DriverState
	Attempt int
}

// progress is the model's state for one driver: how far it is known to
// have got. AtLeast marks a KILLED state set by a kill, whose attempt is
// only a lower bound until a read shows it (the driver may have moved to a
// later attempt that no read saw before the kill).
type progress struct {
	Attempt int
	State   model.DriverState
	AtLeast bool
}

// rank orders states within one attempt. Unrecognised states (including
// UNKNOWN, which Drover never produces) rank -1: no read may return them.
func rank(s model.DriverState) int {
	switch {
	case s == model.DriverSubmitted || s == model.DriverRelaunching:
		return 0
	case s == model.DriverRunning:
		return 1
	case s.Terminal():
		return 2
	}
	return -1
}

// stepRead: a read is legal iff what it returned is at or past the model's
// (attempt, rank), and equal to it once the model is terminal.
func stepRead(p progress, o regOutput) (bool, progress) {
	if rank(o.State) < 0 {
		return false, p
	}
	next := progress{Attempt: o.Attempt, State: o.State}
	if p.State.Terminal() {
		if p.AtLeast {
			return o.State == p.State && o.Attempt >= p.Attempt, next
		}
		return o.State == p.State && o.Attempt == p.Attempt, next
	}
	if o.Attempt != p.Attempt {
		return o.Attempt > p.Attempt, next
	}
	return rank(o.State) >= rank(p.State), next
}

// stepKill: an acknowledged kill ends the driver KILLED; the master
// refuses to kill a driver that ended otherwise, so an ok kill of one is
// illegal. A kill with unknown outcome may also have been that refusal.
func stepKill(p progress, unsure bool) (bool, progress) {
	if p.State.Terminal() {
		return p.State == model.DriverKilled || unsure, p
	}
	return true, progress{Attempt: p.Attempt, State: model.DriverKilled, AtLeast: true}
}

// driverModel is the sequential specification of one driver's observable
// progress, partitioned by driver: it only moves forward, in the order
// (attempt, rank) with rank SUBMITTED/RELAUNCHING < RUNNING < terminal, and
// never leaves a terminal state. The acknowledged submit is the initial
// state (SUBMITTED, attempt 1); a submit op itself changes nothing (a retry
// with the same token may come at any time).
var driverModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		_, parts := partitionByDriver(h)
		return parts
	},
	Init: func() any { return progress{Attempt: 1, State: model.DriverSubmitted} },
	Step: func(state, input, output any) (bool, any) {
		p, in := state.(progress), input.(regInput)
		switch in.Op {
		case opRead:
			return stepRead(p, output.(regOutput))
		case opKill:
			return stepKill(p, in.Unsure)
		}
		return true, p
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		switch {
		case in.Op == opRead:
			o := output.(regOutput)
			return fmt.Sprintf("read -> %s #%d", o.State, o.Attempt)
		case in.Unsure:
			return in.Op + " (info)"
		}
		return in.Op
	},
	DescribeState: func(state any) string {
		p := state.(progress)
		if p.AtLeast {
			return fmt.Sprintf("%s #>=%d", p.State, p.Attempt)
		}
		return fmt.Sprintf("%s #%d", p.State, p.Attempt)
	},
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

// partitionByDriver splits a history by driver, in driver ID order, so a
// partition's index names its driver.
func partitionByDriver(h []porcupine.Operation) ([]string, [][]porcupine.Operation) {
	by := map[string][]porcupine.Operation{}
	for _, op := range h {
		d := op.Input.(regInput).Driver
		by[d] = append(by[d], op)
	}
	ids := sortedKeys(by)
	parts := make([][]porcupine.Operation, len(ids))
	for i, id := range ids {
		parts[i] = by[id]
	}
	return ids, parts
}

// readsHistory turns the client history into porcupine operations. Failed
// ops certainly did nothing and are dropped. Indeterminate ones (info, or
// never completed) follow Jepsen: reads are dropped (they changed nothing
// and returned nothing), kills and submits may take effect at any later
// time, so they never end. A submit with an unknown outcome names its
// driver through its token in the final tables; one that is not there
// never took effect.
func readsHistory(in Input) []porcupine.Operation {
	byToken := map[string]string{}
	for i := len(in.Final) - 1; i >= 0; i-- {
		for _, d := range in.Final[i].Drivers {
			byToken[d.Token] = d.ID
		}
	}
	if lv := in.leader(); lv != nil {
		for _, d := range lv.Drivers {
			byToken[d.Token] = d.ID // the leader's view wins
		}
	}
	var out []porcupine.Operation
	for _, c := range clientOps(in.Ops) {
		outcome := c.outcome()
		if outcome == history.Fail {
			continue
		}
		sure := outcome == history.OK
		op := porcupine.Operation{ClientId: c.inv.Process, Call: c.inv.Time, Return: math.MaxInt64,
			Metadata: fmt.Sprintf("op %d", c.inv.Index)}
		if sure {
			op.Return = c.done.Time
		}
		switch c.inv.F {
		case history.FSubmit:
			driver := byToken[c.inv.Token]
			if sure {
				driver = c.done.Driver
			}
			if driver == "" {
				continue
			}
			op.Input = regInput{Op: opSubmit, Driver: driver, Unsure: !sure}
		case history.FRead:
			if !sure {
				continue
			}
			op.Input = regInput{Op: opRead, Driver: c.inv.Driver}
			op.Output = regOutput{State: model.DriverState(c.done.State), Attempt: c.done.Attempt}
		case history.FKill:
			op.Input = regInput{Op: opKill, Driver: c.inv.Driver, Unsure: !sure}
		default:
			continue
		}
		out = append(out, op)
	}
	return out
}

// LinearizableReads proves that status reads are linearizable per driver
// (with porcupine), against driverModel: no read shows a driver going back
// (an older attempt, or an earlier state of the same attempt) after another
// read or a kill showed it further on, and terminal states never change.
// A search that times out is reported invalid ("unknown"). Offending: the
// driver IDs whose reads cannot be linearized.
func LinearizableReads(in Input) Result {
	h := readsHistory(in)
	res, info := porcupine.CheckOperationsVerbose(driverModel, h, readsTimeout)
	r := Result{Name: NameLinearizableReads}
	drivers, parts := partitionByDriver(h)
	reads := 0
	for _, op := range h {
		if op.Input.(regInput).Op == opRead {
			reads++
		}
	}
	switch res {
	case porcupine.Ok:
		r.Valid = true
		r.Summary = fmt.Sprintf("%d reads of %d drivers are linearizable", reads, len(drivers))
	case porcupine.Unknown:
		r.Summary = fmt.Sprintf("unknown: the search over %d reads of %d drivers timed out after %s", reads, len(drivers), readsTimeout)
	default:
		// A partition is linearizable iff some partial linearization
		// covers all of its operations.
		for i, partials := range info.PartialLinearizations() {
			full := false
			for _, p := range partials {
				full = full || len(p) == len(parts[i])
			}
			if !full {
				r.Offending = append(r.Offending, drivers[i])
			}
		}
		sort.Strings(r.Offending)
		r.Summary = fmt.Sprintf("reads of %d of %d drivers are not linearizable", len(r.Offending), len(drivers))
	}
	return r
}

// VisualizeReads writes porcupine's HTML visualization of the reads
// history to path, with the nemesis's fault windows as annotations: for a
// failed check it shows the longest linearizable prefixes and where each
// driver's history stops being linearizable.
func VisualizeReads(in Input, path string) error {
	_, info := porcupine.CheckOperationsVerbose(driverModel, readsHistory(in), readsTimeout)
	var notes []porcupine.Annotation
	for _, w := range in.windows() {
		notes = append(notes, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           w.Start,
			End:             w.Stop,
			Description:     w.Fault,
			Details:         fmt.Sprintf("window %d, targets %v", w.ID, w.Targets),
			BackgroundColor: "#f7d6d6",
		})
	}
	info.AddAnnotations(notes)
	return porcupine.VisualizePath(driverModel, info, path)
}
