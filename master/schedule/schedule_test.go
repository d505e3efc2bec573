package schedule

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-project/drover/model"
)

// at is the instant of a local time in zone, for the tests' fake clock.
func at(t *testing.T, zone string, year int, month time.Month, day, hour, min, sec int) time.Time {
	t.Helper()
	loc, err := Zone(zone)
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(year, month, day, hour, min, sec, 0, loc)
}

func mustParse(t *testing.T, spec, zone string) *Spec {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	return s
}

// slots returns the first n slots of s after from, as local times.
func slots(s *Spec, from time.Time, n int) []string {
	var out []string
	for t := from; len(out) < n; {
		t = s.next(t)
		out = append(out, t.Format("2006-01-02 15:04:05 MST"))
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// TestRobfigAlone records what robfig/cron v3 does by itself around
// daylight saving, which Next corrects: it passes over a local time that
// does not exist (wanted), and fires a local time that occurs twice at
// both occurrences (not wanted).
func TestRobfigAlone(t *testing.T) {
	p := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	s, err := p.Parse("30 1 * * *")
	if err != nil {
		t.Fatal(err)
	}
	s.(*cron.SpecSchedule).Location = at(t, "America/New_York", 2026, 1, 1, 0, 0, 0).Location()
	first := s.Next(at(t, "America/New_York", 2026, 11, 1, 0, 0, 0))
	second := s.Next(first)
	if first.Format("15:04 MST") != "01:30 EDT" || second.Format("2006-01-02 15:04 MST") != "2026-11-01 01:30 EST" {
		t.Fatalf("robfig fired 01:30 on the fall-back day at %s and %s; this test records that it fires it twice", first, second)
	}
	s2, _ := p.Parse("30 2 * * *")
	s2.(*cron.SpecSchedule).Location = first.Location()
	if n := s2.Next(at(t, "America/New_York", 2026, 3, 8, 0, 0, 0)); n.Format("2006-01-02 15:04 MST") != "2026-03-09 02:30 EDT" {
		t.Fatalf("robfig's slot after the spring-forward day's midnight: %s", n)
	}
}

// TestDaylightSaving: in two zones of the northern hemisphere and one of
// the southern, a local time that does not exist is skipped and counted,
// and one that occurs twice fires once, at its first occurrence.
func TestDaylightSaving(t *testing.T) {
	cases := []struct {
		zone       string
		spec       string
		from       time.Time
		want       []string
		dstSkipped int64 // between the first and the last of want
	}{
		// New York: 02:00 EST becomes 03:00 EDT on 8 March 2026.
		{"America/New_York", "30 2 * * *", at(t, "America/New_York", 2026, 3, 7, 0, 0, 0),
			[]string{"2026-03-07 02:30:00 EST", "2026-03-09 02:30:00 EDT"}, 1},
		{"America/New_York", "0 * * * *", at(t, "America/New_York", 2026, 3, 8, 0, 30, 0),
			[]string{"2026-03-08 01:00:00 EST", "2026-03-08 03:00:00 EDT"}, 1},
		// ... and 02:00 EDT becomes 01:00 EST on 1 November.
		{"America/New_York", "30 1 * * *", at(t, "America/New_York", 2026, 10, 31, 12, 0, 0),
			[]string{"2026-11-01 01:30:00 EDT", "2026-11-02 01:30:00 EST"}, 0},
		{"America/New_York", "*/20 * * * *", at(t, "America/New_York", 2026, 11, 1, 0, 30, 0),
			[]string{"2026-11-01 00:40:00 EDT", "2026-11-01 01:00:00 EDT", "2026-11-01 01:20:00 EDT", "2026-11-01 01:40:00 EDT", "2026-11-01 02:00:00 EST"}, 0},
		// Berlin: 02:00 CET becomes 03:00 CEST on 29 March 2026, and
		// 03:00 CEST becomes 02:00 CET on 25 October; east of UTC Go
		// reads a repeated local time as its second occurrence.
		{"Europe/Berlin", "15 2 * * *", at(t, "Europe/Berlin", 2026, 3, 28, 12, 0, 0),
			[]string{"2026-03-30 02:15:00 CEST"}, 1},
		{"Europe/Berlin", "15 2 * * *", at(t, "Europe/Berlin", 2026, 10, 24, 12, 0, 0),
			[]string{"2026-10-25 02:15:00 CEST", "2026-10-26 02:15:00 CET"}, 0},
		// From 02:10 CEST, the first 02:10 of the day.
		{"Europe/Berlin", "20 2 * * *", at(t, "Europe/Berlin", 2026, 10, 25, 1, 10, 0).Add(time.Hour),
			[]string{"2026-10-25 02:20:00 CEST", "2026-10-26 02:20:00 CET"}, 0},
		{"Europe/Berlin", "0 */30 * * * *", at(t, "Europe/Berlin", 2026, 10, 25, 1, 45, 0),
			[]string{"2026-10-25 02:00:00 CEST", "2026-10-25 02:30:00 CEST", "2026-10-25 03:00:00 CET"}, 0},
		// Sydney: 03:00 AEDT becomes 02:00 AEST on 5 April 2026, and
		// 02:00 AEST becomes 03:00 AEDT on 4 October.
		{"Australia/Sydney", "30 2 * * *", at(t, "Australia/Sydney", 2026, 4, 4, 12, 0, 0),
			[]string{"2026-04-05 02:30:00 AEDT", "2026-04-06 02:30:00 AEST"}, 0},
		{"Australia/Sydney", "30 2 * * *", at(t, "Australia/Sydney", 2026, 10, 3, 12, 0, 0),
			[]string{"2026-10-05 02:30:00 AEDT"}, 1},
	}
	for _, c := range cases {
		t.Run(c.zone+"/"+c.spec, func(t *testing.T) {
			s := mustParse(t, c.spec, c.zone)
			same(t, "slots", slots(s, c.from, len(c.want)), c.want)
			// Due at the last slot, from the schedule's position at
			// from: every slot before it missed, the nonexistent local
			// times counted once.
			last := s.next(c.from)
			for range len(c.want) - 1 {
				last = s.next(last)
			}
			d := s.Due(Window{Since: c.from.UnixMilli(), Now: last.UnixMilli()})
			if d.Slot != last.UnixMilli() || d.Missed != int64(len(c.want)-1) || d.DSTSkipped != c.dstSkipped {
				t.Fatalf("Due = %+v, want slot %s, %d missed, %d nonexistent", d, last, len(c.want)-1, c.dstSkipped)
			}
		})
	}
}

// TestLeapDay: 29 February fires in leap years only, after an outage of
// four years included.
func TestLeapDay(t *testing.T) {
	s := mustParse(t, "0 0 29 2 *", "")
	same(t, "slots", slots(s, at(t, "UTC", 2026, 3, 1, 0, 0, 0), 2), []string{"2028-02-29 00:00:00 UTC", "2032-02-29 00:00:00 UTC"})
	d := s.Due(Window{Since: at(t, "UTC", 2020, 2, 29, 0, 0, 0).UnixMilli(), Now: at(t, "UTC", 2028, 3, 1, 0, 0, 0).UnixMilli()})
	if got := time.UnixMilli(d.Slot).UTC(); !got.Equal(at(t, "UTC", 2028, 2, 29, 0, 0, 0)) || d.Missed != 1 {
		t.Fatalf("Due = %+v (slot %s), want 2028-02-29 with 2024's missed", d, got)
	}
}

// TestEvery: @every counts whole periods from the schedule's creation,
// by arithmetic: a year down with @every 1s costs no walk.
func TestEvery(t *testing.T) {
	s := mustParse(t, "@every 10s", "")
	anchor := at(t, "UTC", 2026, 12, 7, 6, 0, 0).UnixMilli() + 250
	base := anchor - 250
	d := s.Due(Window{Since: anchor, Anchor: anchor, Now: base + 35_000})
	if d.Slot != base+30_000 || d.Missed != 2 || d.Next != base+40_000 {
		t.Fatalf("Due = %+v, want slot +30s, 2 missed, next +40s", d)
	}
	if d := s.Due(Window{Since: base + 30_000, Anchor: anchor, Now: base + 39_999}); d.Slot != 0 || d.Next != base+40_000 {
		t.Fatalf("between slots: Due = %+v, want nothing due, next +40s", d)
	}
	if d := s.Due(Window{Since: anchor, Anchor: anchor, Now: base + 9_999}); d.Slot != 0 || d.Next != base+10_000 {
		t.Fatalf("before the first slot: Due = %+v", d)
	}
	year := int64(365 * 24 * 3600)
	s1 := mustParse(t, "@every 1s", "")
	start := time.Now()
	d = s1.Due(Window{Since: base, Anchor: base, Now: base + year*1000})
	if d.Slot != base+year*1000 || d.Missed != year-1 || d.Truncated {
		t.Fatalf("a year down: Due = %+v, want the last slot and %d missed", d, year-1)
	}
	// robfig's Next stepped through the 31.5 million slots takes 0.28 s
	// (2.1 s with -race); arithmetic takes microseconds, so 100 ms rules
	// out the walk and leaves room for a loaded machine's delays.
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Fatalf("a year of @every 1s took %s", el)
	}
}

// TestSecondsField: a leading sixth field is the second.
func TestSecondsField(t *testing.T) {
	s := mustParse(t, "*/15 * * * * *", "")
	same(t, "slots", slots(s, at(t, "UTC", 2026, 12, 7, 6, 0, 1), 3), []string{"2026-12-07 06:00:15 UTC", "2026-12-07 06:00:30 UTC", "2026-12-07 06:00:45 UTC"})
	s5 := mustParse(t, "5 6 * * *", "")
	same(t, "five fields", slots(s5, at(t, "UTC", 2026, 12, 7, 0, 0, 0), 1), []string{"2026-12-07 06:05:00 UTC"})
}

// TestClockSteppedBack: a leader whose clock is behind the last
// accounted slot fires nothing, and names the slot after that one.
func TestClockSteppedBack(t *testing.T) {
	s := mustParse(t, "0 * * * *", "Europe/Berlin")
	last := at(t, "Europe/Berlin", 2026, 12, 7, 10, 0, 0)
	d := s.Due(Window{Since: last.UnixMilli(), Now: last.Add(-90 * time.Minute).UnixMilli()})
	if d.Slot != 0 || d.Missed != 0 || d.Next != last.Add(time.Hour).UnixMilli() {
		t.Fatalf("Due = %+v, want nothing due and next %s", d, last.Add(time.Hour))
	}
	e := mustParse(t, "@every 1m", "")
	d = e.Due(Window{Since: last.UnixMilli(), Anchor: last.Add(-time.Hour).UnixMilli(), Now: last.Add(-30 * time.Minute).UnixMilli()})
	if d.Slot != 0 || d.Next != last.Add(time.Minute).UnixMilli() {
		t.Fatalf("@every: Due = %+v, want nothing due and next %s", d, last.Add(time.Minute))
	}
}

// TestLongOutage: past MaxSlotScan slots the walk stops, the latest slot
// is still found (by bisection), and the missed count says it is a lower
// bound.
func TestLongOutage(t *testing.T) {
	s := mustParse(t, "* * * * * *", "")
	now := at(t, "UTC", 2026, 12, 7, 6, 0, 0).Add(500 * time.Millisecond)
	since := now.Add(-48 * time.Hour).Truncate(time.Second)
	start := time.Now()
	d := s.Due(Window{Since: since.UnixMilli(), Now: now.UnixMilli()})
	if d.Slot != now.Truncate(time.Second).UnixMilli() || !d.Truncated || d.Missed < MaxSlotScan {
		t.Fatalf("Due = %+v, want the slot at %s, truncated, at least %d missed", d, now.Truncate(time.Second), MaxSlotScan)
	}
	t.Logf("two days of every second: %s", time.Since(start))
	// Just within the bound, the count is exact.
	d = s.Due(Window{Since: now.Add(-MaxSlotScan * time.Second).Truncate(time.Second).UnixMilli(), Now: now.UnixMilli()})
	if d.Truncated || d.Missed != MaxSlotScan-1 {
		t.Fatalf("at the bound: Due = %+v, want %d missed, exact", d, MaxSlotScan-1)
	}
}

// TestDeadline: a slot reached more than the deadline after it is late.
func TestDeadline(t *testing.T) {
	s := mustParse(t, "0 * * * *", "")
	slot := at(t, "UTC", 2026, 12, 7, 6, 0, 0)
	for _, c := range []struct {
		after time.Duration
		late  bool
	}{{time.Minute, false}, {time.Minute + time.Millisecond, true}} {
		d := s.Due(Window{Since: slot.Add(-time.Hour).UnixMilli(), Deadline: time.Minute.Milliseconds(), Now: slot.Add(c.after).UnixMilli()})
		if d.Slot != slot.UnixMilli() || d.Late != c.late {
			t.Fatalf("%s after the slot: Due = %+v, want late %v", c.after, d, c.late)
		}
	}
}

// TestFireEntry: a schedule's window gives the entry the leader
// commits, with a driver unless the slot is late, and none when nothing
// is due.
func TestFireEntry(t *testing.T) {
	sc := &model.Schedule{Name: "nightly", Cron: "0 2 * * *", TimeZone: "Europe/Berlin", StartingDeadlineMS: 60_000,
		CreatedAt: at(t, "Europe/Berlin", 2026, 12, 1, 12, 0, 0).UnixMilli()}
	s := mustParse(t, sc.Cron, sc.TimeZone)
	slot := at(t, "Europe/Berlin", 2026, 12, 7, 2, 0, 0).UnixMilli()
	c := s.Due(WindowOf(sc, slot+1_000)).Fire(sc.Name, "driver-1", slot+1_000)
	want := model.FireSchedule{Name: "nightly", Slot: slot, Missed: 5, DriverID: "driver-1", Time: slot + 1_000}
	if c == nil || *c != want {
		t.Fatalf("Fire = %+v, want %+v", c, want)
	}
	sc.LastSlot = slot - 86_400_000
	if c := s.Due(WindowOf(sc, slot+60_001)).Fire(sc.Name, "driver-2", slot+60_001); c == nil || !c.Late || c.DriverID != "" || c.Missed != 0 {
		t.Fatalf("past the deadline: Fire = %+v, want late without a driver", c)
	}
	sc.LastSlot = slot
	if c := s.Due(WindowOf(sc, slot+1_000)).Fire(sc.Name, "driver-3", slot+1_000); c != nil {
		t.Fatalf("the slot accounted already: Fire = %+v, want nil", c)
	}
}

// TestParseRefusals: each bad spec or zone gets one line naming the
// field and the reason.
func TestParseRefusals(t *testing.T) {
	for _, c := range []struct{ spec, zone, want string }{
		{"61 * * * *", "", `field 1 (minute) "61": end of range (61) above maximum (59): 61`},
		{"0 0 32 * *", "", `field 3 (day of month) "32": end of range (32) above maximum (31): 32`},
		{"0 0 * 13 *", "", `field 4 (month) "13"`},
		{"0 0 * * mon-xyz", "", `field 5 (day of week) "mon-xyz"`},
		{"60 0 0 * * *", "", `field 1 (second) "60"`},
		{"* * *", "", "has 3 fields; want 5"},
		{"* * * * * * *", "", "has 7 fields"},
		{"@fortnightly", "", "unrecognized descriptor: @fortnightly"},
		{"@every 500ms", "", "@every takes a whole number of seconds, at least 1s; got 500ms"},
		{"@every 1.5s", "", "whole number of seconds"},
		{"@every soon", "", "@every takes a duration"},
		{"TZ=UTC 0 0 * * *", "", "give it as the time zone"},
		{strings.Repeat("1,", 200) + "1 * * * *", "", "exceeds 256 bytes"},
		{"0 0 * * *", "Mars/Olympus", `unknown time zone "Mars/Olympus"`},
		{"0 0 * * *", "Local", `unknown time zone "Local"`},
		{"0 0 * * *", "../../etc/passwd", `unknown time zone "../../etc/passwd"`},
		{"0 0 * * *", "europe/berlin", `unknown time zone "europe/berlin"`},
		{"0 0 * * *", strings.Repeat("A/", 2500), "the time zone's name exceeds 64 bytes"},
		{"0 0 L * *", "", `field 3 (day of month) "L": not a number, a name (JAN, MON), a range, a list or a step; L, W and # are not supported`},
		{"0 0 * * MON#2", "", `field 5 (day of week) "MON#2": not a number`},
		{"@every 100000000h", "", `@every takes a duration such as 90s or 1h30m, at most 43800h0m0s; got "100000000h"`},
		{"@every 43801h", "", "@every 43801h0m0s never fires within five years: at most 43800h0m0s"},
	} {
		_, err := Parse(c.spec, c.zone)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q, %q) = %v, want one line with %q", c.spec, c.zone, err, c.want)
		}
	}
	for _, ok := range []string{"@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@every 90s", "@every 43800h", "0 0 * * *", "0 0 0 * * *", "0 9 * * mon-fri"} {
		if err := Check(ok, "Europe/Berlin"); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
}

// BenchmarkDue is the leader's cost of one schedule at one tick, a slot
// due: ten thousand schedules of @every 10s cost ten thousand of these
// every ten seconds.
func BenchmarkDue(b *testing.B) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC).UnixMilli()
	for _, spec := range []string{"@every 10s", "*/10 * * * * *", "0 2 * * *"} {
		b.Run(spec, func(b *testing.B) {
			s, err := Parse(spec, "Europe/Berlin")
			if err != nil {
				b.Fatal(err)
			}
			w := Window{Since: now - 10_000, Anchor: now - 3_600_000, Now: now}
			if spec == "0 2 * * *" {
				w.Since = now - 86_400_000
			}
			for b.Loop() {
				if d := s.Due(w); d.Slot == 0 {
					b.Fatal("nothing due")
				}
			}
		})
	}
}

// A zone's rules are the built-in database's, whatever the host holds:
// with $ZONEINFO naming a directory where Europe/Berlin is Tokyo's rules
// and Fake/Zone exists, as time.LoadLocation would read them, Zone still
// gives Berlin's and knows no Fake/Zone. It runs in a child process,
// since the standard library reads $ZONEINFO once per process.
func TestZonesIgnoreTheHost(t *testing.T) {
	if os.Getenv("DROVER_ZONE_CHILD") == "1" {
		if _, err := time.LoadLocation("Fake/Zone"); err != nil {
			t.Fatalf("the host's route does not see $ZONEINFO: %v", err)
		}
		if _, err := Zone("Fake/Zone"); err == nil {
			t.Error("Zone read Fake/Zone from the host")
		}
		winter := time.Date(2026, time.December, 7, 12, 0, 0, 0, time.UTC)
		loc, err := Zone("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		if _, off := winter.In(loc).Zone(); off != 3600 {
			t.Errorf("Europe/Berlin is %d s east of UTC in December, want 3600: the host's file was read", off)
		}
		return
	}
	tokyo, err := zoneBytes("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"Europe/Berlin", "Fake/Zone"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), tokyo, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestZonesIgnoreTheHost$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "DROVER_ZONE_CHILD=1", "ZONEINFO="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// zoneBytes is the built-in database's file of zone name.
func zoneBytes(name string) ([]byte, error) {
	idx, err := zones()
	if err != nil {
		return nil, err
	}
	rc, err := idx[name].Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
