package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master/schedule"
	"github.com/drover-project/drover/model"
)

// scheduleCLI is the receiver of the schedule commands: the CLI's own,
// under a type of its own so that cli's methods stay the other
// commands'.
type scheduleCLI struct{ *cli }

// onSchedule adapts schedule command f to the command table's signature.
func onSchedule(f func(scheduleCLI, context.Context, []string) int) func(*cli, context.Context, []string) int {
	return func(k *cli, ctx context.Context, args []string) int { return f(scheduleCLI{k}, ctx, args) }
}

// The schedule commands of drover client (Kubernetes' CronJob, Nomad's
// periodic jobs; docs/schedules.md says what a schedule does). A
// schedule's settings are checked here as the masters check them, with
// their lines, so that a typo is refused before any file is uploaded or
// any request is made.

func (k scheduleCLI) scheduleCreate(ctx context.Context, args []string) int {
	fs := k.flags("schedule create")
	cron := fs.String("cron", "", "the spec: five cron fields (0 2 * * *), six with a leading second, @daily, @hourly..., or @every D (@every 90s); required")
	zone := fs.String("time-zone", model.DefaultTimeZone, "the IANA time zone the spec's local times are read in (Europe/Berlin)")
	concurrency := fs.String("concurrency", string(model.ConcurrencyAllow), "what a slot does while an earlier run has not ended: allow (start beside it), forbid (skip the slot, counted skipped) or replace (kill it, then start)")
	deadline := fs.Duration("starting-deadline", 0, "how late after its slot a run may still start, a whole number of milliseconds, at least 1ms (90s, 1h); a slot reached later, after an outage or a resume, is counted missed and starts nothing (default: no deadline)")
	history := fs.Int("history", model.DefaultHistory, fmt.Sprintf("how many ended runs the masters keep, 1 to %d; runs not ended are always kept", model.MaxHistory))
	sf := addSubmitFlags(fs)
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	name, argv, err := nameAndProgram(fs.Args(), fs.ArgsLenAtDash())
	if err != nil {
		return k.exitFor(err)
	}
	req, err := scheduleRequest(name, *cron, *zone, *concurrency, *deadline, *history, fs.Changed("starting-deadline"))
	if err != nil {
		return k.exitFor(err)
	}
	if req.Template, err = sf.request(fs, argv); err != nil {
		return k.exitFor(err)
	}
	req.Template.Namespace = *k.namespace
	if code := k.uploadInto(ctx, sf, &req.Template, "no schedule was created", k.nameFree(name)); code != 0 {
		return code
	}
	var st api.ScheduleStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) { st, err = k.c.CreateSchedule(ctx, req); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "created schedule %s\n", st.Name)
	fmt.Fprintf(k.stdout, "next slot: %s\n", nextLine(st))
	k.warnUnplaceable(st)
	return 0
}

// nameFree is create's check, before its --upload files are sent, that
// no schedule is named name, so that a name taken costs no transfer
// and leaves no file on the masters for --upload-grace. A schedule read
// is refused with the masters' own line; unknown (404) goes on, as does
// any other answer (a 403, a 503), which leaves the create to decide.
// No master answering within --timeout ends the command there (exit 2),
// since the upload and the create would wait it out again.
func (k scheduleCLI) nameFree(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		err := k.call(ctx, func(ctx context.Context) error { _, err := k.c.Schedule(ctx, name); return err })
		switch {
		case err == nil:
			return fmt.Errorf("schedule %s exists: nothing created", name)
		case errors.Is(err, client.ErrNoMaster):
			return err
		}
		return nil
	}
}

// warnUnplaceable prints one line on stderr when the masters answered
// that no ALIVE worker could hold st's driver even idle
// (api.ScheduleStatus's Unplaceable), the case in which submit exits 3:
// every run would wait for a larger worker. The schedule stands and the
// exit stays 0, since such a worker may register before the first slot.
func (k scheduleCLI) warnUnplaceable(st api.ScheduleStatus) {
	if st.Unplaceable != "" {
		fmt.Fprintf(k.stderr, "drover: warning: schedule %s's driver %s: each run waits until a worker that fits registers\n", st.Name, st.Unplaceable)
	}
}

// createUsage is how schedule create is called, for the line that says
// what is missing.
const createUsage = "drover client schedule create NAME --cron SPEC [flags] -- PROGRAM [ARGS...]"

// nameAndProgram splits schedule create's arguments, args with the
// index of "--" in them (dash, -1 without one), into the schedule's name
// before "--" and the program after it. The "--" is required, so that a
// program's own flags are never read as the schedule's.
func nameAndProgram(args []string, dash int) (string, []string, error) {
	if dash < 0 || dash == len(args) {
		return "", nil, fmt.Errorf("schedule create needs -- PROGRAM: %s", createUsage)
	}
	if dash != 1 {
		return "", nil, fmt.Errorf("schedule create wants exactly one NAME before --, got %d arguments: %s", dash, createUsage)
	}
	if err := model.CheckScheduleName(args[0]); err != nil {
		return "", nil, err
	}
	return args[0], args[dash:], nil
}

// scheduleRequest checks schedule create's own flags and makes the
// request of them, without its template: a spec that parses in a zone
// that exists (master/schedule.Check, whose line the masters give too),
// each within the masters' bound (model.MaxCronLen, MaxTimeZoneLen), a
// policy, a deadline, when given, of a whole number of milliseconds, at
// least one (the API's unit; 0 would mean none), and a history of 1 to
// model.MaxHistory.
func scheduleRequest(name, cron, zone, concurrency string, deadline time.Duration, history int, deadlineGiven bool) (api.ScheduleRequest, error) {
	req := api.ScheduleRequest{Name: name, Cron: cron, TimeZone: zone, Concurrency: model.Concurrency(concurrency),
		StartingDeadlineMS: deadline.Milliseconds(), History: &history}
	switch {
	case cron == "":
		return req, fmt.Errorf("schedule create needs --cron SPEC: %s", createUsage)
	case deadlineGiven && deadline <= 0:
		return req, fmt.Errorf("--starting-deadline %s must be positive", deadline)
	case deadlineGiven && deadline < time.Millisecond:
		return req, fmt.Errorf("--starting-deadline %s must be at least 1ms", deadline)
	case deadline.Milliseconds() > model.MaxStartingDeadlineMS:
		return req, fmt.Errorf("--starting-deadline %s exceeds five years (%s)", deadline, time.Duration(model.MaxStartingDeadlineMS)*time.Millisecond)
	case deadline%time.Millisecond != 0:
		return req, fmt.Errorf("--starting-deadline %s is not a whole number of milliseconds, the masters' unit", deadline)
	case len(cron) > model.MaxCronLen:
		return req, fmt.Errorf("--cron of %d bytes exceeds %d bytes", len(cron), model.MaxCronLen)
	case len(zone) > model.MaxTimeZoneLen:
		return req, fmt.Errorf("--time-zone of %d bytes exceeds %d bytes", len(zone), model.MaxTimeZoneLen)
	case history < 1 || history > model.MaxHistory:
		return req, fmt.Errorf("--history %d must be from 1 to %d", history, model.MaxHistory)
	}
	if err := req.Concurrency.Check(); err != nil {
		return req, fmt.Errorf("--concurrency: %v", err)
	}
	return req, schedule.Check(cron, zone)
}

func (k scheduleCLI) scheduleList(ctx context.Context, args []string) int {
	fs := k.flags("schedule list")
	asJSON := fs.Bool("json", false, "print a JSON array of schedules with their next slots and runs")
	all := fs.Bool("all-namespaces", false, "list the schedules of every namespace, not only --namespace's")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("schedule list takes no arguments, got %q: %s", fs.Args(), k.usage(fs)))
	}
	ns, err := k.listNamespace(fs, *all)
	if err != nil {
		return k.exitFor(err)
	}
	var l api.ScheduleList
	if err := k.call(ctx, func(ctx context.Context) (err error) { l, err = k.c.Schedules(ctx, ns, *all); return err }); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		if l.Schedules == nil {
			l.Schedules = []api.ScheduleStatus{}
		}
		return k.printJSON(l.Schedules)
	}
	tw := tabwriter.NewWriter(k.stdout, 2, 4, 2, ' ', 0)
	nsHead := ""
	if *all {
		nsHead = "NAMESPACE\t"
	}
	fmt.Fprintln(tw, nsHead+"NAME\tCRON\tZONE\tNEXT\tLAST\tFIRED/MISSED/SKIPPED\tCONCURRENCY\tSUSPENDED")
	for _, s := range l.Schedules {
		if *all {
			fmt.Fprintf(tw, "%s\t", model.NamespaceOf(s.Template.Namespace))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%s\t%t\n", s.Name, s.Cron, s.TimeZone, fmtTime(s.Next), fmtTime(s.LastFired),
			s.Fired, s.Missed, s.Skipped, s.Concurrency, s.Suspended)
	}
	_ = tw.Flush()
	return 0
}

func (k scheduleCLI) scheduleStatus(ctx context.Context, args []string) int {
	fs := k.flags("schedule status")
	asJSON := fs.Bool("json", false, "print the schedule, its next slot and runs as one JSON object")
	st, code, ok := k.scheduleCall(ctx, fs, args, (*client.Client).Schedule)
	if !ok {
		return code
	}
	if *asJSON {
		return k.printJSON(st)
	}
	printSchedule(k.stdout, st)
	return 0
}

func (k scheduleCLI) scheduleSuspend(ctx context.Context, args []string) int {
	st, code, ok := k.scheduleCall(ctx, k.flags("schedule suspend"), args, (*client.Client).SuspendSchedule)
	if ok {
		fmt.Fprintf(k.stdout, "suspended schedule %s: no slot fires until schedule resume\n", st.Name)
	}
	return code
}

func (k scheduleCLI) scheduleResume(ctx context.Context, args []string) int {
	st, code, ok := k.scheduleCall(ctx, k.flags("schedule resume"), args, (*client.Client).ResumeSchedule)
	if ok {
		fmt.Fprintf(k.stdout, "resumed schedule %s\nnext slot: %s\n", st.Name, nextLine(st))
	}
	return code
}

// scheduleCall parses the arguments of a command that takes one
// schedule's NAME and calls f, a method of the client parse makes, with
// it; when it returns false, the
// command ends with the exit code, having said why.
func (k scheduleCLI) scheduleCall(ctx context.Context, fs *pflag.FlagSet, args []string, f func(*client.Client, context.Context, string) (api.ScheduleStatus, error)) (api.ScheduleStatus, int, bool) {
	var st api.ScheduleStatus
	name, code, ok := k.scheduleName(fs, args)
	if !ok {
		return st, code, false
	}
	if err := k.call(ctx, func(ctx context.Context) (err error) { st, err = f(k.c, ctx, name); return err }); err != nil {
		return st, k.exitFor(err), false
	}
	return st, 0, true
}

// scheduleName parses the arguments of a command that takes one
// schedule's NAME, and returns it, or false with the exit code.
func (k scheduleCLI) scheduleName(fs *pflag.FlagSet, args []string) (string, int, bool) {
	if code, ok := k.parse(fs, args); !ok {
		return "", code, false
	}
	name, err := oneArg(fs, "NAME")
	if err != nil {
		err = fmt.Errorf("%v: %s", err, k.usage(fs))
	} else {
		err = model.CheckScheduleName(name)
	}
	if err != nil {
		return "", k.exitFor(err), false
	}
	return name, 0, true
}

// usage is how the command fs parses is called ("drover client schedule
// status NAME [--json]"), which ends a refusal of its arguments, as
// createUsage ends create's.
func (k scheduleCLI) usage(fs *pflag.FlagSet) string {
	c, _ := findCommand(k.commands, strings.TrimPrefix(fs.Name(), k.command+" "))
	return synopsisOf(k.command, c)
}

func (k scheduleCLI) scheduleRun(ctx context.Context, args []string) int {
	name, code, ok := k.scheduleName(k.flags("schedule run"), args)
	if !ok {
		return code
	}
	var id string
	if err := k.call(ctx, func(ctx context.Context) (err error) { id, err = k.c.RunSchedule(ctx, name); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stderr, "schedule %s started %s\n", name, id)
	fmt.Fprintln(k.stdout, id)
	return 0
}

func (k scheduleCLI) scheduleDelete(ctx context.Context, args []string) int {
	name, code, ok := k.scheduleName(k.flags("schedule delete"), args)
	if !ok {
		return code
	}
	if err := k.call(ctx, func(ctx context.Context) error { _, err := k.c.DeleteSchedule(ctx, name); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "deleted schedule %s; the drivers it started that have not ended go on (drover client list --schedule %s)\n", name, name)
	return 0
}

// nextLine is a schedule's next slot in its zone and in UTC, or why it
// has none.
func nextLine(st api.ScheduleStatus) string {
	switch {
	case st.Next != 0:
		return fmtSlot(st.Next, st.TimeZone)
	case st.Suspended:
		return "none: suspended"
	}
	return "none within five years"
}

// fmtSlot is the slot at (Unix ms) as the local time of zone, then in
// UTC as fmtTime gives it: "2026-12-08 02:00:00 CET (Europe/Berlin),
// 2026-12-08T01:00:00.000Z", read in the zone rules built into the
// binary, as the masters read them. A zone this binary does not know
// (the masters' rules are newer) gives UTC alone.
func fmtSlot(at int64, zone string) string {
	loc, err := schedule.Zone(zone)
	if err != nil {
		return fmtTime(at)
	}
	return fmt.Sprintf("%s (%s), %s", time.UnixMilli(at).In(loc).Format("2006-01-02 15:04:05 MST"), zone, fmtTime(at))
}

// printSchedule prints one schedule as schedule status shows it: its
// settings, program, progress and kept runs.
func printSchedule(w io.Writer, st api.ScheduleStatus) {
	deadline := "none"
	if st.StartingDeadlineMS > 0 {
		deadline = (time.Duration(st.StartingDeadlineMS) * time.Millisecond).String()
	}
	t := st.Template
	fmt.Fprintf(w, "name:          %s\n", st.Name)
	fmt.Fprintf(w, "namespace:     %s\n", model.NamespaceOf(t.Namespace))
	fmt.Fprintf(w, "cron:          %s\n", st.Cron)
	fmt.Fprintf(w, "time zone:     %s\n", st.TimeZone)
	fmt.Fprintf(w, "concurrency:   %s\n", st.Concurrency)
	fmt.Fprintf(w, "deadline:      %s\n", deadline)
	fmt.Fprintf(w, "history:       %d\n", st.History)
	fmt.Fprintf(w, "suspended:     %t\n", st.Suspended)
	if t.Name != "" {
		fmt.Fprintf(w, "driver name:   %s\n", t.Name)
	}
	fmt.Fprintf(w, "program:       %q\n", t.Argv)
	fmt.Fprintf(w, "created:       %s\n", fmtTime(st.CreatedAt))
	fmt.Fprintf(w, "next slot:     %s\n", nextLine(st))
	if st.Unplaceable != "" {
		fmt.Fprintf(w, "unplaceable:   %s\n", st.Unplaceable)
	}
	fmt.Fprintf(w, "last fired:    %s\n", slotOrNone(st.LastFired, st.TimeZone))
	fmt.Fprintf(w, "last slot:     %s\n", slotOrNone(st.LastSlot, st.TimeZone))
	fmt.Fprintf(w, "fired:         %d\n", st.Fired)
	fmt.Fprintf(w, "missed:        %d\n", st.Missed)
	fmt.Fprintf(w, "skipped:       %d\n", st.Skipped)
	if st.LastSkipReason != "" {
		fmt.Fprintf(w, "last skip:     %s\n", st.LastSkipReason)
	}
	fmt.Fprintf(w, "dst skipped:   %d\n", st.DSTSkipped)
	fmt.Fprintf(w, "manual runs:   %d\n", st.ManualRuns)
	if len(st.Runs) == 0 {
		return
	}
	fmt.Fprintln(w, "runs:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SLOT\tDRIVER\tSTATE\tMESSAGE")
	for _, r := range st.Runs {
		slot := fmtTime(r.Slot)
		if r.Manual {
			slot += " (manual)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", slot, r.DriverID, cmp.Or(string(r.State), "(pruned)"), r.Message)
	}
	_ = tw.Flush()
}

// slotOrNone is fmtSlot, or "none" before the first.
func slotOrNone(at int64, zone string) string {
	if at == 0 {
		return "none"
	}
	return fmtSlot(at, zone)
}
