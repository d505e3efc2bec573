package model

import (
	"errors"
	"fmt"
	"slices"
)

// Schedules fire a driver at every slot of a cron spec (Kubernetes'
// CronJob, Nomad's periodic jobs), exactly once per slot across leader
// changes, outages and clock steps: the leader computes each slot
// (package master/schedule) and commits one FireSchedule entry that both
// accounts the slot and creates its driver; the tables refuse a slot at
// or before the schedule's last accounted one. The tables never parse a
// spec nor load a time zone: those depend on the machine's tzdata, and
// Apply must not.

// Errors of the schedule commands, wrapped with the name. Callers map
// them to HTTP status codes with errors.Is.
var (
	// ErrUnknownSchedule: no schedule of that name.
	ErrUnknownSchedule = errors.New("unknown schedule")
	// ErrScheduleExists: a schedule of that name exists already.
	ErrScheduleExists = errors.New("schedule exists")
	// ErrSlotAccounted: a slot at or before the schedule's last
	// accounted slot (or its creation), which has fired, been skipped or
	// been counted missed already: a second leader, a retry or a clock
	// stepped back asked for it again.
	ErrSlotAccounted = errors.New("slot already accounted")
	// ErrScheduleSuspended: the schedule is suspended, so none of its
	// slots fires; a manual run still may.
	ErrScheduleSuspended = errors.New("schedule suspended")
)

// Concurrency is what a schedule does with a slot while an earlier run
// of it has not ended (Kubernetes' concurrencyPolicy).
type Concurrency string

// Concurrency policies.
const (
	// ConcurrencyAllow starts the new run beside the old ones (the
	// default, as Kubernetes').
	ConcurrencyAllow Concurrency = "allow"
	// ConcurrencyForbid skips the slot, counted skipped.
	ConcurrencyForbid Concurrency = "forbid"
	// ConcurrencyReplace kills the runs not ended, then starts the new
	// one, in the same entry.
	ConcurrencyReplace Concurrency = "replace"
)

// Check checks that c is a policy.
func (c Concurrency) Check() error {
	switch c {
	case ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace:
		return nil
	}
	if len(c) > 32 {
		// Not echoed: the line stays one short line whatever was sent.
		return fmt.Errorf("a concurrency of %d bytes is not allow, forbid or replace", len(c))
	}
	return fmt.Errorf("concurrency %q is not allow, forbid or replace", string(c))
}

// Bounds and defaults of a schedule's settings.
const (
	// DefaultHistory is how many ended runs a schedule keeps when
	// created without --history; MaxHistory bounds it.
	DefaultHistory = 10
	MaxHistory     = 1000
	// MaxCronLen bounds a cron spec and MaxTimeZoneLen a time zone's
	// name, in bytes (the longest IANA name has 32).
	MaxCronLen     = 256
	MaxTimeZoneLen = 64
	// MaxSchedules bounds the schedules of a cluster.
	MaxSchedules = 100_000
	// DefaultTimeZone is the zone of a schedule created without one.
	DefaultTimeZone = "UTC"
	// MaxStartingDeadlineMS bounds a starting deadline to five years,
	// the horizon past which no slot is looked for. Masters refuse a
	// longer one at create; CheckSchedule does not, so that an entry
	// committed before the bound applies as it did.
	MaxStartingDeadlineMS = 5 * 365 * 24 * 3600 * 1000
)

// ScheduleRun is one run a schedule started: the slot (Unix ms) it was
// fired for, its driver, and whether it was a manual run (`schedule run`)
// rather than a slot of the spec.
type ScheduleRun struct {
	Slot     int64  `json:"slot"`
	DriverID string `json:"driver_id"`
	Manual   bool   `json:"manual,omitempty"`
}

// Schedule is one row of the schedules table. Times are Unix
// milliseconds chosen by the leader. The settings come from
// CreateSchedule; the progress (from LastSlot on) is what its
// FireSchedule entries did.
type Schedule struct {
	Name string `json:"name"`
	// Cron is the spec: five fields, an optional leading seconds field,
	// or a descriptor (@daily, @every 10m...). TimeZone is the IANA zone
	// its local times are read in. The tables check neither (a master
	// does, before it proposes: master/schedule.Check).
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone"`
	// Concurrency is what a slot does while a run has not ended.
	Concurrency Concurrency `json:"concurrency"`
	// StartingDeadlineMS is how late after its slot a run may still
	// start (Kubernetes' startingDeadlineSeconds): a slot the leader
	// reaches later is counted missed. 0 for no deadline.
	StartingDeadlineMS int64 `json:"starting_deadline_ms,omitempty"`
	// History bounds the ended runs kept in Runs, 1 to MaxHistory; runs
	// not ended are always kept.
	History   int  `json:"history"`
	Suspended bool `json:"suspended,omitempty"`
	// Template is the submission every run is made of: its program,
	// name, namespace and priority, as a SubmitDriver without ID, token
	// or time (each run's ID and time come from its FireSchedule).
	// Client is the address the schedule was created from, which its
	// drivers count under.
	Template  SubmitDriver `json:"template"`
	CreatedAt int64        `json:"created_at"`

	// LastSlot is the last slot accounted (fired, skipped or counted
	// missed), 0 before the first; a manual run does not move it.
	// LastFired is the last slot that started a driver, manual runs
	// aside.
	LastSlot  int64 `json:"last_slot,omitempty"`
	LastFired int64 `json:"last_fired,omitempty"`
	// Fired, Missed and Skipped count the accounted slots: each is
	// exactly one of them. Missed are those the leader reached past the
	// deadline or not at all (the cluster was down, without a leader, or
	// the schedule suspended); Skipped those forbid skipped or whose
	// submission was refused (LastSkipReason says the latest why).
	// DSTSkipped counts the local times that matched the spec but did
	// not exist (a clock skipped forward over them): not slots, so in
	// none of the others. ManualRuns counts manual runs started.
	Fired          int64  `json:"fired,omitempty"`
	Missed         int64  `json:"missed,omitempty"`
	Skipped        int64  `json:"skipped,omitempty"`
	DSTSkipped     int64  `json:"dst_skipped,omitempty"`
	ManualRuns     int64  `json:"manual_runs,omitempty"`
	LastSkipReason string `json:"last_skip_reason,omitempty"`
	// Runs are the runs kept, oldest first: every one not ended, and the
	// latest History that ended.
	Runs []ScheduleRun `json:"runs,omitempty"`
	// ModifyIndex is the Raft index of the entry that last changed the
	// row.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// SetDefaults fills in the settings s was given without: DefaultTimeZone,
// ConcurrencyAllow and DefaultHistory. A master calls it before
// CheckSchedule; a history asked for as 0 is the master's to refuse
// first.
func (s *Schedule) SetDefaults() {
	if s.TimeZone == "" {
		s.TimeZone = DefaultTimeZone
	}
	if s.Concurrency == "" {
		s.Concurrency = ConcurrencyAllow
	}
	if s.History == 0 {
		s.History = DefaultHistory
	}
}

// Since is the instant (Unix ms) at or before which no slot of s is due:
// its last accounted slot, or its creation before it has one.
func (s *Schedule) Since() int64 { return max(s.LastSlot, s.CreatedAt) }

// Clone returns a copy of s whose runs may be changed; the template is
// shared, since nothing changes it.
func (s *Schedule) Clone() *Schedule {
	c := *s
	c.Runs = slices.Clone(s.Runs)
	return &c
}

// CheckScheduleName checks a schedule's name: a DNS label, as a
// namespace's (CheckNamespace).
func CheckScheduleName(name string) error { return checkLabel("schedule", name) }

// CheckSchedule checks s's settings on their own, all but the spec and
// the zone's existence, which need a parser and tzdata: the name, a spec
// and zone name present and within MaxCronLen and MaxTimeZoneLen, a
// policy, a deadline not negative, a history of 1 to MaxHistory, and a
// template that is a valid submission (DriverSpec.Validate) without ID,
// token or time. The error is one line and wraps no sentinel.
func CheckSchedule(s *Schedule) error {
	if err := CheckScheduleName(s.Name); err != nil {
		return err
	}
	switch {
	case s.Cron == "":
		return errors.New("the cron spec is empty")
	case len(s.Cron) > MaxCronLen:
		return fmt.Errorf("the cron spec exceeds %d bytes", MaxCronLen)
	case s.TimeZone == "":
		return errors.New("the time zone is empty")
	case len(s.TimeZone) > MaxTimeZoneLen:
		return fmt.Errorf("the time zone's name exceeds %d bytes", MaxTimeZoneLen)
	case s.StartingDeadlineMS < 0:
		return fmt.Errorf("the starting deadline must be positive, got %d ms", s.StartingDeadlineMS)
	case s.History < 1 || s.History > MaxHistory:
		return fmt.Errorf("the history must be 1 to %d runs, got %d", MaxHistory, s.History)
	case s.Template.ID != "" || s.Template.Token != "" || s.Template.Time != 0:
		return errors.New("the template names an ID, a token or a time; each run's come from its slot")
	}
	if err := s.Concurrency.Check(); err != nil {
		return err
	}
	if err := s.Template.Validate(); err != nil {
		return fmt.Errorf("the template: %v", err)
	}
	return nil
}
