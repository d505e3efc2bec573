package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// watchEvents prints the cluster's event stream: every change of the rows it
// picks, one line each (or the api.Event JSON with --json), resuming on
// another master when one goes away. Given one driver ID it follows that
// driver and exits when it ends, as submit --wait does: 0 for FINISHED, 1
// otherwise, and 130 (143) when SIGINT (SIGTERM) ends the watch first,
// saying that the driver goes on. Without, it runs until interrupted and
// exits 0.
func (k *cli) watchEvents(ctx context.Context, args []string) int {
	fs := k.flags("watch")
	kinds := fs.StringSlice("kind", nil, "driver, app, executor, worker or schedule (repeatable or comma-separated); default all")
	index := fs.Uint64("index", 0, "start after this Raft index (0: the changes from now on)")
	asJSON := fs.Bool("json", false, "print each event as JSON, one per line")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	q := client.EventQuery{After: *index, IDs: fs.Args()}
	for _, id := range q.IDs {
		if err := checkWatchID(id); err != nil {
			fmt.Fprintf(k.stderr, "drover: watch: %v\n", err)
			return 1
		}
	}
	for _, s := range *kinds {
		q.Kinds = append(q.Kinds, api.EventKind(s))
	}
	follow := ""
	if len(q.IDs) == 1 && ids.CheckDriver(q.IDs[0]) == nil {
		follow = q.IDs[0]
	}
	if q.After == 0 {
		// From now on: the applied index of any master, past which its
		// stream begins.
		var st *api.State
		if err := k.call(ctx, func(ctx context.Context) (err error) {
			st, err = k.c.State(ctx)
			return err
		}); err != nil {
			return k.exitFor(err)
		}
		q.After = st.AppliedIndex
	}
	// last is the followed driver as last seen.
	var last *model.Driver
	if follow != "" {
		d, err := k.driver(ctx, follow)
		if err != nil {
			return k.exitFor(err)
		}
		k.printEvent(api.Event{Index: d.ModifyIndex, Kind: api.EventDriver, ID: d.ID, Op: api.OpUpsert, Driver: d}, *asJSON)
		if d.State.Terminal() {
			return exitOf(d)
		}
		last = d
	}
	s := k.c.Events(ctx, q)
	for e := range s.C() {
		k.printEvent(e, *asJSON)
		if follow != "" && e.Driver != nil {
			if e.Driver.State.Terminal() {
				return exitOf(e.Driver)
			}
			last = e.Driver
		}
		if follow != "" && e.Op == api.OpDelete {
			return 1
		}
	}
	// Following a driver, an interruption is not its end: exit 0 or 1
	// would read as FINISHED or FAILED. The whole stream has no end but
	// this one, so for it the interruption is a normal end.
	if follow != "" {
		if code, ok := k.interrupted(stillThere(follow, last)); ok {
			return code
		}
	}
	if err := s.Err(); err != nil && ctx.Err() == nil {
		return k.exitFor(err)
	}
	return 0
}

// checkWatchID refuses an ID that looks like a driver's, an app's or an
// executor's (APP_ID/N) but is not well formed, which would otherwise
// match no event and print nothing for ever; anything else may be a
// worker's name.
func checkWatchID(id string) error {
	app, n, executor := strings.Cut(id, "/")
	switch {
	case executor:
		if err := ids.CheckApp(app); err != nil {
			return err
		}
		if _, err := strconv.ParseUint(n, 10, 31); err != nil {
			return fmt.Errorf("%w: executor ID %q is not APP_ID/N", ids.ErrInvalid, id)
		}
		return nil
	case strings.HasPrefix(id, string(ids.Driver)+"-"):
		return ids.CheckDriver(id)
	case strings.HasPrefix(id, string(ids.App)+"-"):
		return ids.CheckApp(id)
	}
	return ids.CheckWorker(id)
}

// exitOf is the exit code of an ended driver: 0 for FINISHED, 1 otherwise.
func exitOf(d *model.Driver) int {
	if d.State == model.DriverFinished {
		return 0
	}
	return 1
}

// printEvent prints one event: INDEX KIND ID STATE and what changed.
func (k *cli) printEvent(e api.Event, asJSON bool) {
	if asJSON {
		// One line each, without HTML's escapes, as printJSON prints.
		b, _ := api.Marshal(e)
		fmt.Fprintln(k.stdout, string(b))
		return
	}
	var state, more string
	switch {
	case e.Op != api.OpUpsert:
		state = strings.ToUpper(e.Op)
	case e.Driver != nil:
		d := e.Driver
		state, more = string(d.State), fmt.Sprintf("attempt %d", d.Attempt)
		if d.WorkerID != "" {
			more += " on " + d.WorkerID
		}
		if d.Message != "" {
			more += ": " + d.Message
		}
	case e.App != nil:
		state, more = string(e.App.State), e.App.Message
	case e.Executor != nil:
		state, more = string(e.Executor.State), "on "+e.Executor.WorkerID
	case e.Worker != nil:
		state, more = string(e.Worker.State), fmt.Sprintf("%d/%d cores used", e.Worker.CoresUsed, e.Worker.Cores)
	case e.Schedule != nil:
		state, more = scheduleEvent(e.Schedule)
	}
	fmt.Fprintf(k.stdout, "%d\t%s\t%s\t%s\t%s\n", e.Index, e.Kind, e.ID, state, more)
}

// scheduleEvent is a schedule's row as watch prints it: SUSPENDED or
// ACTIVE, then its last accounted slot and counts, and why its last
// skipped slot was skipped, so that each fire, skip and miss reads as a
// line of its own.
func scheduleEvent(s *model.Schedule) (state, more string) {
	state = "ACTIVE"
	if s.Suspended {
		state = "SUSPENDED"
	}
	more = fmt.Sprintf("last slot %s, fired %d, missed %d, skipped %d", fmtTime(s.LastSlot), s.Fired, s.Missed, s.Skipped)
	if s.LastSkipReason != "" {
		more += ": " + s.LastSkipReason
	}
	return state, more
}
