package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/model"
)

// Schedules are what a run with schedules creates before its faults
// start, one per way a slot can end: every-2s fires beside its earlier
// runs (allow, 1 s runs); every-3s-forbid runs 4 s at every third second,
// so forbid skips about every other slot; every-2s-replace runs 3 s, so
// each slot kills the run before it; every-2s-deadline has a starting
// deadline of 1 s, so slots reached late (after a failover) are counted
// missed. Each run is a probe of program writing its traces into dir,
// unsupervised, so the probes' checkers see them as they see the
// clients' drivers. Specs are in UTC, where every local time exists once.
func Schedules(program, dir string) []api.ScheduleRequest {
	sched := func(name, spec string, c model.Concurrency, deadline time.Duration, run time.Duration) api.ScheduleRequest {
		argv := append([]string{program}, probe.Spec{Dir: dir, Run: run}.Args()...)
		return api.ScheduleRequest{Name: name, Cron: spec, Concurrency: c, StartingDeadlineMS: deadline.Milliseconds(),
			Template: api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 64}}}
	}
	return []api.ScheduleRequest{
		sched("every-2s", "@every 2s", model.ConcurrencyAllow, 0, time.Second),
		sched("every-3s-forbid", "*/3 * * * * *", model.ConcurrencyForbid, 0, 4*time.Second),
		sched("every-2s-replace", "@every 2s", model.ConcurrencyReplace, 0, 3*time.Second),
		sched("every-2s-deadline", "@every 2s", model.ConcurrencyAllow, time.Second, time.Second),
	}
}

// retryPause is how long the schedule setup waits before it asks again
// after an answer without authority.
const retryPause = 200 * time.Millisecond

// CreateSchedules creates every schedule of reqs through cl, in order.
// A create is sent to one master at a time (client.CreateSchedule), so
// it is asked again after every failure without authority (no leader, a
// cut connection, a timeout) until ctx ends. A name taken on such a
// retry is the earlier try's commit when the row holds the same spec,
// policy, deadline and program; otherwise it, or any refusal, ends it.
func CreateSchedules(ctx context.Context, cl *client.Client, reqs []api.ScheduleRequest) error {
	for _, req := range reqs {
		if err := createSchedule(ctx, cl, req); err != nil {
			return fmt.Errorf("schedule %s not created: %w", req.Name, err)
		}
	}
	return nil
}

func createSchedule(ctx context.Context, cl *client.Client, req api.ScheduleRequest) error {
	for retry := false; ; retry = true {
		_, err := cl.CreateSchedule(ctx, req)
		if retry && errors.Is(err, model.ErrScheduleExists) {
			return ours(ctx, cl, req)
		}
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(retryPause)
	}
}

// ours says whether schedule req.Name, found taken on a retry, is the
// one req describes, reading it through failures without authority.
func ours(ctx context.Context, cl *client.Client, req api.ScheduleRequest) error {
	for {
		s, err := cl.Schedule(ctx, req.Name)
		if err == nil {
			if s.Cron != req.Cron || s.Concurrency != req.Concurrency || s.StartingDeadlineMS != req.StartingDeadlineMS ||
				!slices.Equal(s.Template.Argv, req.Template.Argv) {
				return fmt.Errorf("the name is taken by another schedule (%s, %s)", s.Cron, s.Concurrency)
			}
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(retryPause)
	}
}

// SuspendSchedules suspends every schedule of names through cl, asking
// again after every failure without authority until ctx ends: a
// suspension is idempotent. The run suspends them before its drain, so
// that no new run keeps the drain from ending.
func SuspendSchedules(ctx context.Context, cl *client.Client, names []string) error {
	for _, name := range names {
		for {
			_, err := cl.SuspendSchedule(ctx, name)
			if err == nil {
				break
			}
			if !retryable(err) || ctx.Err() != nil {
				return fmt.Errorf("schedule %s not suspended: %w", name, err)
			}
			time.Sleep(retryPause)
		}
	}
	return nil
}

// retryable says whether err is an answer without authority, which a
// later try may turn into one: everything but an API refusal, and a
// refusal that says no leader could answer.
func retryable(err error) bool {
	return outcome(err) == history.Info || errors.Is(err, model.ErrUnavailable)
}

// runSchedule asks, as process p, for a manual run of one of the run's
// schedules, drawn with rng. A forbid schedule whose run has not ended
// refuses it (fail).
func (w *Workload) runSchedule(p int, rng *rand.Rand) {
	name := w.cfg.Schedules[rng.IntN(len(w.cfg.Schedules))]
	inv := w.rec.Add(history.Op{Process: p, Type: history.Invoke, F: history.FScheduleRun, Schedule: name})
	octx, cancel := w.opContext()
	defer cancel()
	id, err := w.cl.RunSchedule(octx, name)
	if err != nil {
		w.rec.Complete(inv, outcome(err), func(op *history.Op) { op.Error = err.Error() })
		return
	}
	w.rec.Complete(inv, history.OK, func(op *history.Op) { op.Driver = id })
}
