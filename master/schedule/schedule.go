// Package schedule is the slot arithmetic of cron schedules: a spec and
// an IANA time zone give the instants (slots) at which a schedule fires,
// and, from a schedule's last accounted slot and the leader's clock, the
// slot to fire now, how many earlier slots were missed, and the next
// one. It parses with github.com/robfig/cron/v3 (the five standard
// fields, an optional leading seconds field, the descriptors and
// @every D) and corrects what that library does around daylight-saving
// changes (see Next). It reads the clock nowhere: the leader passes the
// time, and the replicated tables never call it (fsm/DESIGN.md).
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-project/drover/model"
)

// MaxSlotScan bounds the slots Due walks one by one for a cron spec (an
// @every spec needs no walk). Past it, after a long outage of a dense
// spec (every minute for more than ten weeks), Due finds the latest due
// slot by bisection instead; the slots between the scan's end and that
// slot are then not counted (Due.Truncated), nor are the nonexistent
// local times among them.
const MaxSlotScan = 100_000

// MaxEvery bounds an @every period to the five years past which no
// slot is looked for (Due.Next), as a cron spec's are.
const MaxEvery = 5 * 365 * 24 * time.Hour

// parser reads the five standard fields with an optional leading seconds
// field, and the descriptors @yearly (@annually), @monthly, @weekly,
// @daily (@midnight), @hourly and @every D.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fieldNames name the fields of a spec of five and of six fields, for the
// line that refuses one, with the parser option that reads each alone.
var (
	fiveFields = []field{{"minute", cron.Minute}, {"hour", cron.Hour}, {"day of month", cron.Dom}, {"month", cron.Month}, {"day of week", cron.Dow}}
	sixFields  = append([]field{{"second", cron.Second}}, fiveFields...)
)

type field struct {
	name  string
	place cron.ParseOption
}

// Spec is a parsed spec in its time zone. Its methods take and return
// Unix milliseconds.
type Spec struct {
	// cron is the spec of a cron expression or a descriptor other than
	// @every, in loc; wall is the same spec in UTC, where every local
	// time exists once, to count the local times a daylight-saving gap
	// removes.
	cron, wall *cron.SpecSchedule
	// every is the period of @every D, 0 for a cron spec.
	every time.Duration
	loc   *time.Location
}

// Parse parses spec in the IANA time zone zone ("" for UTC), whose rules
// are the built-in database's (Zone). The error is one line: for a spec,
// which field (by position and name) and why, or what is wrong with a
// descriptor; for a zone, that it is unknown. An
// @every period must be a whole number of seconds, at least one.
func Parse(spec, zone string) (*Spec, error) {
	loc, err := Zone(zone)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	if len(spec) > model.MaxCronLen {
		return nil, fmt.Errorf("the cron spec exceeds %d bytes", model.MaxCronLen)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, errors.New("the cron spec names its time zone with TZ=; give it as the time zone instead")
	}
	if strings.HasPrefix(spec, "@every") {
		return parseEvery(spec, loc)
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, explain(spec, err)
	}
	c := s.(*cron.SpecSchedule)
	c.Location = loc
	wall := *c
	wall.Location = time.UTC
	return &Spec{cron: c, wall: &wall, loc: loc}, nil
}

func parseEvery(spec string, loc *time.Location) (*Spec, error) {
	arg := strings.TrimSpace(strings.TrimPrefix(spec, "@every"))
	d, err := time.ParseDuration(arg)
	if err != nil {
		return nil, fmt.Errorf("@every takes a duration such as 90s or 1h30m, at most %s; got %q", MaxEvery, arg)
	}
	// robfig rounds a shorter period up to a second and cuts fractions
	// of a second; a spec that says otherwise is refused instead.
	if d < time.Second || d%time.Second != 0 {
		return nil, fmt.Errorf("@every takes a whole number of seconds, at least 1s; got %s", d)
	}
	if d > MaxEvery {
		return nil, fmt.Errorf("@every %s never fires within five years: at most %s", d, MaxEvery)
	}
	return &Spec{every: d, loc: loc}, nil
}

// explain turns robfig's refusal of spec into a line naming the field.
func explain(spec string, err error) error {
	if strings.HasPrefix(spec, "@") {
		return fmt.Errorf("cron spec %q: %v (descriptors: @yearly @monthly @weekly @daily @hourly @every D)", spec, err)
	}
	fields := strings.Fields(spec)
	var names []field
	switch len(fields) {
	case 5:
		names = fiveFields
	case 6:
		names = sixFields
	default:
		return fmt.Errorf("cron spec %q has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (a leading second)", spec, len(fields))
	}
	for i, f := range names {
		if _, ferr := cron.NewParser(f.place).Parse(fields[i]); ferr != nil {
			why := ferr.Error()
			if strings.Contains(why, "strconv.") {
				// robfig passes on strconv's words for a value that
				// is no number: say what the field takes instead.
				why = "not a number, a name (JAN, MON), a range, a list or a step; L, W and # are not supported"
			}
			return fmt.Errorf("cron spec %q: field %d (%s) %q: %s", spec, i+1, f.name, fields[i], why)
		}
	}
	return fmt.Errorf("cron spec %q: %v", spec, err)
}

// Every returns the period of an @every spec, 0 for a cron spec.
func (s *Spec) Every() time.Duration { return s.every }

// next returns the first slot after t of a cron spec, as a time in the
// spec's zone, or the zero time if none lies within five years (robfig's
// search bound). What robfig's SpecSchedule.Next does by itself, and
// what next changes:
//   - a local time that does not exist that day (the hour a clock skips
//     forward) never matches: robfig passes over it, which is the
//     semantics wanted; Gaps counts them;
//   - a local time that occurs twice (the hour a clock falls back)
//     matches at both occurrences in robfig: Next passes over the
//     second, so such a time fires once, at its first occurrence.
//
// Go's time.Date resolves a repeated local time to its second
// occurrence east of UTC (Europe/Berlin), where robfig truncates to the
// hour only when the hour does not match, so no first occurrence is lost.
func (s *Spec) next(t time.Time) time.Time {
	n := s.cron.Next(t.In(s.loc))
	if n.IsZero() {
		return n
	}
	if end, ok := repeated(n); ok {
		// Every match up to the end of the repeated hour is a second
		// occurrence: resume at its end.
		n = s.cron.Next(end.Add(-time.Second))
	}
	return n
}

// repeated reports whether t is the second occurrence of a local time
// that occurs twice, and if so when the repeated span ends.
func repeated(t time.Time) (end time.Time, ok bool) {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, after := t.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	back := time.Duration(before-after) * time.Second
	if back <= 0 || t.Sub(start) >= back {
		return time.Time{}, false
	}
	return start.Add(back), true
}

// gaps returns how many local times that match the spec do not exist
// because a clock skipped forward at a transition in (from, to], and
// the Next calls that cost.
func (s *Spec) gaps(from, to time.Time, budget int) (n int64, calls int) {
	t := from.In(s.loc)
	for calls < budget {
		_, end := t.ZoneBounds()
		if end.IsZero() || end.After(to) {
			break
		}
		_, before := end.Add(-time.Nanosecond).Zone()
		_, after := end.Zone()
		if after > before {
			// The local times from end at the old offset to end at the
			// new one do not exist; count the spec's matches among
			// them, read as UTC wall times.
			lo := end.Add(time.Duration(before) * time.Second).UTC()
			hi := end.Add(time.Duration(after) * time.Second).UTC()
			for m := s.wall.Next(lo.Add(-time.Second)); !m.IsZero() && m.Before(hi) && calls < budget; m = s.wall.Next(m) {
				n++
				calls++
			}
		}
		calls++
		t = end
	}
	return n, calls
}

// Window is what Due needs of a schedule, all in Unix ms: Since, its last
// accounted slot or, before it has one, its creation (slots at or
// before it are never due); Anchor, the creation, from which an @every
// period counts (its slots are Anchor, cut to the second, plus whole
// periods); Deadline, its starting deadline (0 for none); and Now, the
// leader's clock.
type Window struct {
	Since, Anchor, Deadline, Now int64
}

// WindowOf returns sc's Window at now.
func WindowOf(sc *model.Schedule, now int64) Window {
	return Window{Since: sc.Since(), Anchor: sc.CreatedAt, Deadline: sc.StartingDeadlineMS, Now: now}
}

// Due is what the leader commits for a schedule at one tick
// (model.FireSchedule). Slot is the latest slot in (Since, Now], 0 when
// none is due; Missed counts the due slots before it, which never fire;
// Late says Slot itself is past the starting deadline (Now - Slot >
// Deadline), so it is counted missed too and starts no driver;
// DSTSkipped counts the local times in (Since, Slot] that matched the
// spec but did not exist; Truncated says the walk stopped at
// MaxSlotScan, so Missed and DSTSkipped are lower bounds. Next is the
// first slot after both Since and Now (0 when none lies within five
// years): a clock stepped back before Since fires nothing, and still
// names the slot after Since.
type Due struct {
	Slot       int64
	Missed     int64
	DSTSkipped int64
	Late       bool
	Truncated  bool
	Next       int64
}

// Fire returns the entry that commits d for schedule name at now (Unix
// ms): the slot, with driverID as its run's driver unless it is late;
// nil when no slot is due.
func (d Due) Fire(name, driverID string, now int64) *model.FireSchedule {
	if d.Slot == 0 {
		return nil
	}
	c := &model.FireSchedule{Name: name, Slot: d.Slot, Missed: d.Missed, Late: d.Late, DSTSkipped: d.DSTSkipped, Time: now}
	if !d.Late {
		c.DriverID = driverID
	}
	return c
}

// Due returns what is due in w.
func (s *Spec) Due(w Window) Due {
	var d Due
	if s.every > 0 {
		d = s.dueEvery(w)
	} else {
		d = s.dueCron(w)
	}
	d.Late = d.Slot != 0 && w.Deadline > 0 && w.Now-d.Slot > w.Deadline
	return d
}

// dueEvery is Due of @every: arithmetic, so an outage of a year of
// @every 1s costs what a second does.
func (s *Spec) dueEvery(w Window) Due {
	p := s.every.Milliseconds()
	anchor := w.Anchor - w.Anchor%1000
	// Periods since the anchor, by floor division.
	periods := func(t int64) int64 {
		if t < anchor {
			return -1
		}
		return (t - anchor) / p
	}
	first, last := periods(w.Since)+1, periods(w.Now)
	var d Due
	if last >= first && last >= 1 {
		first = max(first, 1)
		d.Slot, d.Missed = anchor+last*p, last-first
	}
	d.Next = anchor + max(periods(max(w.Since, w.Now))+1, 1)*p
	return d
}

func (s *Spec) dueCron(w Window) Due {
	var d Due
	now := time.UnixMilli(w.Now)
	since := time.UnixMilli(w.Since)
	t, calls := since, 0
	var latest time.Time
	for ; calls < MaxSlotScan; calls++ {
		n := s.next(t)
		if n.IsZero() {
			// Nothing within five years of t: look past them.
			if t = t.AddDate(5, 0, 0); t.Before(now) {
				continue
			}
			break
		}
		if n.After(now) {
			break
		}
		if !latest.IsZero() {
			d.Missed++
		}
		latest, t = n, n
	}
	if calls == MaxSlotScan {
		if l := s.latestBefore(t, now); !l.IsZero() {
			d.Truncated = true
			if !latest.IsZero() {
				d.Missed++
			}
			latest = l
		}
	}
	if !latest.IsZero() {
		d.Slot = latest.UnixMilli()
		d.DSTSkipped, _ = s.gaps(since, latest, MaxSlotScan)
	}
	from := now
	if since.After(now) {
		from = since
	}
	if n := s.next(from); !n.IsZero() {
		d.Next = n.UnixMilli()
	}
	return d
}

// latestBefore returns the latest slot in (lo, hi], found by bisection
// on the seconds between them, or the zero time if none.
func (s *Spec) latestBefore(lo, hi time.Time) time.Time {
	due := func(t time.Time) bool {
		n := s.next(t)
		return !n.IsZero() && !n.After(hi)
	}
	if !due(lo) {
		return time.Time{}
	}
	a, b := lo.Unix(), hi.Unix()
	for b-a > 1 {
		m := a + (b-a)/2
		if due(time.Unix(m, 0)) {
			a = m
		} else {
			b = m
		}
	}
	return s.next(time.Unix(a, 0))
}

// Check parses spec in zone and returns Parse's refusal, for a master
// to run before it commits a schedule.
func Check(spec, zone string) error {
	_, err := Parse(spec, zone)
	return err
}
