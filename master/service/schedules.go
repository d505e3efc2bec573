package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/schedule"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// Schedules as clients reach them (Kubernetes' CronJob, Nomad's periodic
// jobs): a schedule's settings and template are checked here, as a
// submission's are, and committed as one CreateSchedule entry, which the
// tables check again; its slots are the leader's to fire
// (leader.Term's fireSchedules). A schedule belongs to its template's
// namespace: a namespace token reaches the schedules of its namespaces
// only, as it does their drivers.

// Scheduling is the rules of schedules, beside Core's.
type Scheduling struct{ *Core }

// CreateSchedule serves V1CreateSchedule: the schedule req describes
// (newSchedule) in one CreateSchedule entry. It is refused, before any
// entry, when the cluster holds Config.MaxSchedules schedules
// (api.ErrLimitReached) or one of that name (model.ErrScheduleExists).
func (s *Scheduling) CreateSchedule(_ context.Context, c auth.Caller, req api.ScheduleRequest) (api.ScheduleStatus, error) {
	if _, err := s.leading(); err != nil {
		return api.ScheduleStatus{}, err
	}
	sc, err := s.newSchedule(c, req)
	if err != nil {
		return api.ScheduleStatus{}, err
	}
	st := s.FSM.State()
	limit := s.cfg.MaxSchedules
	if limit <= 0 || limit > model.MaxSchedules {
		limit = model.MaxSchedules
	}
	if n := len(st.Schedules()); n >= limit {
		return api.ScheduleStatus{}, api.Errorf(api.ErrLimitReached, "the cluster holds %d schedules, its --max-schedules: nothing created; delete one first", n)
	}
	if _, ok := st.Schedule(sc.Name); ok {
		return api.ScheduleStatus{}, api.Errorf(model.ErrScheduleExists, "schedule %s exists: nothing created", sc.Name)
	}
	if _, err := s.Apply(&model.CreateSchedule{Schedule: *sc, Time: now()}); err != nil {
		if errors.Is(err, model.ErrScheduleExists) {
			// Taken by a create committed since the check above.
			return api.ScheduleStatus{}, api.Errorf(model.ErrScheduleExists, "schedule %s exists: nothing created", sc.Name)
		}
		return api.ScheduleStatus{}, err
	}
	s.Log.Info("created schedule", "schedule", sc.Name, "cron", sc.Cron, "time_zone", sc.TimeZone,
		"concurrency", sc.Concurrency, "namespace", model.NamespaceOf(sc.Template.Namespace))
	return s.scheduleStatus(sc.Name)
}

// newSchedule is the schedule req describes for caller c, checked: its
// settings with their defaults (model.Schedule.SetDefaults, after a
// history asked for as 0 is refused), the spec in its zone
// (schedule.Parse's line: the field and why, or the zone unknown; and a
// spec with no slot within five years of now), the
// settings on their own (model.CheckSchedule), and the template as the
// submission it makes at each slot (program, admitProgram: its
// namespace exists and the caller may submit to it). Every refusal is
// one line wrapping api.ErrInvalidRequest but the template's namespace's
// (model.ErrUnknownNamespace, api.ErrForbidden) and the program's size
// (api.ErrTooLarge).
func (s *Scheduling) newSchedule(c auth.Caller, req api.ScheduleRequest) (*model.Schedule, error) {
	if err := model.CheckScheduleName(req.Name); err != nil {
		return nil, invalidRequest(err)
	}
	// The spec is kept with single spaces: a tab or a trailing space
	// would otherwise be shown as sent in every list.
	sc := &model.Schedule{Name: req.Name, Cron: strings.Join(strings.Fields(req.Cron), " "), TimeZone: req.TimeZone, Concurrency: req.Concurrency,
		StartingDeadlineMS: req.StartingDeadlineMS}
	if req.History != nil {
		if h := *req.History; h < 1 || h > model.MaxHistory {
			return nil, api.Errorf(api.ErrInvalidRequest, "the history must be 1 to %d runs, got %d", model.MaxHistory, h)
		}
		sc.History = *req.History
	}
	sc.SetDefaults()
	if req.StartingDeadlineMS > model.MaxStartingDeadlineMS {
		return nil, api.Errorf(api.ErrInvalidRequest, "the starting deadline must be at most %d ms (five years), got %d", int64(model.MaxStartingDeadlineMS), req.StartingDeadlineMS)
	}
	if req.Template.Token != "" {
		return nil, api.Errorf(api.ErrInvalidRequest, "the template takes no token: each run's driver comes from its slot")
	}
	run, err := program(req.Template.Name, req.Template.DriverSpec)
	if err != nil {
		return nil, err
	}
	if err := admitProgram(s.Core, c, run, "nothing created"); err != nil {
		return nil, err
	}
	sc.Template = *run
	// The settings' bounds keep the parser's input short.
	if err := model.CheckSchedule(sc); err != nil {
		return nil, invalidRequest(err)
	}
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		return nil, invalidRequest(err)
	}
	// Kubernetes takes a CronJob that never runs (30 February) and
	// leaves it idle; a schedule that never fires is a typo here.
	if at := now(); spec.Due(schedule.Window{Since: at, Anchor: at, Now: at}).Next == 0 {
		return nil, api.Errorf(api.ErrInvalidRequest, "cron spec %q has no slot within five years: nothing created", sc.Cron)
	}
	return sc, nil
}

// Schedules serves V1Schedules: the schedules of namespace q.Namespace
// ("" for every one) that c may see, by name, with their next slots and
// runs. A namespace c may not see is refused (api.ErrForbidden naming
// it), as a list of drivers filtered by it is.
func (s *Scheduling) Schedules(_ context.Context, c auth.Caller, q api.ListQuery, r Read) (api.ScheduleList, error) {
	if q.Namespace != "" {
		if err := model.CheckNamespace(q.Namespace); err != nil {
			return api.ScheduleList{}, api.Errorf(api.ErrInvalidRequest, "namespace filter: %v", err)
		}
		// As a list of drivers filtered by it: the namespace itself is
		// refused, not answered empty.
		if err := grantsNamespace(c, q.Namespace); err != nil {
			return api.ScheduleList{}, err
		}
	}
	if err := s.readable(r); err != nil {
		return api.ScheduleList{}, err
	}
	st, at := s.FSM.State(), now()
	out := api.ScheduleList{Schedules: []api.ScheduleStatus{}}
	for _, sc := range st.Schedules() {
		ns := model.NamespaceOf(sc.Template.Namespace)
		if (q.Namespace == "" || q.Namespace == ns) && c.InNamespace(ns) {
			out.Schedules = append(out.Schedules, scheduleStatus(st, sc, at))
		}
	}
	return out, nil
}

// Schedule serves V1Schedule: schedule name with its next slot and runs.
func (s *Scheduling) Schedule(_ context.Context, c auth.Caller, name string, r Read) (api.ScheduleStatus, error) {
	if err := s.readable(r); err != nil {
		return api.ScheduleStatus{}, err
	}
	if _, err := s.scopedSchedule(c, name, ""); err != nil {
		return api.ScheduleStatus{}, err
	}
	return s.scheduleStatus(name)
}

// SuspendSchedule serves V1SuspendSchedule (suspended true) and
// V1ResumeSchedule (false) in one SuspendSchedule entry. Suspending a
// suspended schedule, or resuming one that runs, commits nothing and
// answers as the first did, so a copy changes nothing and adds no event.
func (s *Scheduling) SuspendSchedule(_ context.Context, c auth.Caller, name string, suspended bool) (api.ScheduleStatus, error) {
	if _, err := s.leading(); err != nil {
		return api.ScheduleStatus{}, err
	}
	sc, err := s.scopedSchedule(c, name, "nothing changed")
	if err != nil {
		return api.ScheduleStatus{}, err
	}
	if sc.Suspended == suspended {
		return s.scheduleStatus(name)
	}
	if _, err := s.Apply(&model.SuspendSchedule{Name: name, Suspended: suspended, Time: now()}); err != nil {
		return api.ScheduleStatus{}, err
	}
	s.Log.Info("schedule suspended or resumed", "schedule", name, "suspended", suspended)
	return s.scheduleStatus(name)
}

// RunSchedule serves V1RunSchedule: one manual run of schedule name now,
// its slot the leader's clock, in one FireSchedule entry (Manual) with a
// driver ID from the term's maker. A forbid schedule whose run has not
// ended skips it, which is refused with api.ErrConflict naming that run;
// a submission the template's namespace refuses (its queue full, the
// namespace gone) is refused with that refusal. Nothing is started then.
func (s *Scheduling) RunSchedule(_ context.Context, c auth.Caller, name string) (api.ScheduleRunResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.ScheduleRunResponse{}, err
	}
	if _, err := s.scopedSchedule(c, name, "nothing started"); err != nil {
		return api.ScheduleRunResponse{}, err
	}
	at := time.Now()
	fire := &model.FireSchedule{Name: name, Slot: at.UnixMilli(), Manual: true, DriverID: t.IDs.Driver(at), Time: at.UnixMilli()}
	res, err := fsm.FireSchedule.Commit(s.Apply, fire)
	if err != nil {
		return api.ScheduleRunResponse{}, err
	}
	if res.Outcome != fsm.FireStarted {
		return api.ScheduleRunResponse{}, api.Errorf(api.ErrConflict, "schedule %s: %s: nothing started", name, res.Reason)
	}
	s.Log.Info("started a manual run", "schedule", name, "driver", res.DriverID, "killed", res.Killed)
	return api.ScheduleRunResponse{DriverID: res.DriverID, Slot: fire.Slot}, nil
}

// DeleteSchedule serves V1DeleteSchedule in one DeleteSchedule entry and
// returns the row deleted; its runs that have not ended go on.
func (s *Scheduling) DeleteSchedule(_ context.Context, c auth.Caller, name string) (*model.Schedule, error) {
	if _, err := s.leading(); err != nil {
		return nil, err
	}
	sc, err := s.scopedSchedule(c, name, "nothing deleted")
	if err != nil {
		return nil, err
	}
	if _, err := s.Apply(&model.DeleteSchedule{Name: name, Time: now()}); err != nil {
		return nil, err
	}
	s.Log.Info("deleted schedule", "schedule", name)
	return sc, nil
}

// scopedSchedule returns schedule name's row when c may reach it: an
// unknown name is model.ErrUnknownSchedule, then notDone unless "", and
// a schedule of a namespace the caller's token does not grant is
// api.ErrForbidden naming the namespace (inScope).
func (s *Scheduling) scopedSchedule(c auth.Caller, name, notDone string) (*model.Schedule, error) {
	if err := model.CheckScheduleName(name); err != nil {
		return nil, invalidRequest(err)
	}
	sc, ok := s.FSM.State().Schedule(name)
	if !ok {
		if notDone != "" {
			notDone = ": " + notDone
		}
		return nil, api.Errorf(model.ErrUnknownSchedule, "%s: %s%s", model.ErrUnknownSchedule, name, notDone)
	}
	if err := inScope(c, "schedule "+name, sc.Template.Namespace); err != nil {
		return nil, err
	}
	return sc, nil
}

// scheduleStatus is schedule name as the tables hold it now, with
// whether the workers could hold its driver (api.ScheduleStatus's
// Unplaceable: the wait reason its runs would show).
func (s *Scheduling) scheduleStatus(name string) (api.ScheduleStatus, error) {
	st := s.FSM.State()
	sc, ok := st.Schedule(name)
	if !ok {
		return api.ScheduleStatus{}, api.Errorf(model.ErrUnknownSchedule, "%s: %s", model.ErrUnknownSchedule, name)
	}
	out := scheduleStatus(st, sc, now())
	t := sc.Template
	out.Unplaceable = offerOf(st.Workers(), t.Cores, t.MemoryMB, t.Resources).unplaceable("")
	return out, nil
}

// scheduleStatus is sc at now (Unix ms) with its next slot, 0 when
// suspended, when none comes within five years, or when this master
// cannot read the spec (a zone its tzdata lacks), and its runs with their
// drivers' states.
func scheduleStatus(st *fsm.State, sc *model.Schedule, at int64) api.ScheduleStatus {
	out := api.ScheduleStatus{Schedule: *sc, Runs: make([]api.ScheduleRunStatus, len(sc.Runs))}
	out.Schedule.Runs = nil
	if spec, err := schedule.Parse(sc.Cron, sc.TimeZone); err == nil && !sc.Suspended {
		out.Next = spec.Due(schedule.WindowOf(sc, at)).Next
	}
	for i, r := range sc.Runs {
		out.Runs[i].ScheduleRun = r
		if d, ok := st.Driver(r.DriverID); ok {
			out.Runs[i].State, out.Runs[i].Message = d.State, d.Message
		}
	}
	return out
}
