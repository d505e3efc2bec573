package model

import (
	"strings"
	"testing"
)

// TestCheckScheduleBounds: each bound of a schedule's settings at its
// limit and just past it, one line naming the bound.
func TestCheckScheduleBounds(t *testing.T) {
	valid := func() *Schedule {
		s := &Schedule{Name: "nightly", Cron: "0 2 * * *", Template: SubmitDriver{DriverSpec: DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1}}}
		s.SetDefaults()
		return s
	}
	if s := valid(); s.TimeZone != "UTC" || s.Concurrency != ConcurrencyAllow || s.History != DefaultHistory || CheckSchedule(s) != nil {
		t.Fatalf("defaults: %+v: %v", s, CheckSchedule(s))
	}
	for _, c := range []struct {
		what   string
		change func(*Schedule)
		want   string // "" for accepted
	}{
		{"history 1", func(s *Schedule) { s.History = 1 }, ""},
		{"history 0", func(s *Schedule) { s.History = 0 }, "the history must be 1 to 1000 runs, got 0"},
		{"history at the bound", func(s *Schedule) { s.History = MaxHistory }, ""},
		{"history past it", func(s *Schedule) { s.History = MaxHistory + 1 }, "the history must be 1 to 1000 runs, got 1001"},
		{"spec at the bound", func(s *Schedule) { s.Cron = strings.Repeat(" ", MaxCronLen-1) + "x" }, ""},
		{"spec past it", func(s *Schedule) { s.Cron = strings.Repeat("x", MaxCronLen+1) }, "the cron spec exceeds 256 bytes"},
		{"no spec", func(s *Schedule) { s.Cron = "" }, "the cron spec is empty"},
		{"zone at the bound", func(s *Schedule) { s.TimeZone = strings.Repeat("z", MaxTimeZoneLen) }, ""},
		{"zone past it", func(s *Schedule) { s.TimeZone = strings.Repeat("z", MaxTimeZoneLen+1) }, "the time zone's name exceeds 64 bytes"},
		{"deadline 0", func(s *Schedule) { s.StartingDeadlineMS = 0 }, ""},
		{"deadline negative", func(s *Schedule) { s.StartingDeadlineMS = -1 }, "the starting deadline must be positive, got -1 ms"},
		{"policy", func(s *Schedule) { s.Concurrency = "queue" }, `concurrency "queue" is not allow, forbid or replace`},
		{"policy of 32 bytes", func(s *Schedule) { s.Concurrency = Concurrency(strings.Repeat("q", 32)) }, `concurrency "` + strings.Repeat("q", 32) + `" is not`},
		{"policy past 32 bytes", func(s *Schedule) { s.Concurrency = Concurrency(strings.Repeat("q", 33)) }, "a concurrency of 33 bytes is not allow, forbid or replace"},
		{"name at the bound", func(s *Schedule) { s.Name = strings.Repeat("n", MaxNamespaceLen) }, ""},
		{"name past it", func(s *Schedule) { s.Name = strings.Repeat("n", MaxNamespaceLen+1) }, "schedule name exceeds 63 bytes (it has 64)"},
		{"name not a label", func(s *Schedule) { s.Name = "Nightly" }, `schedule name "Nightly" is not a DNS label`},
		{"template with an ID", func(s *Schedule) { s.Template.ID = "driver-1" }, "the template names an ID, a token or a time"},
		{"template without a program", func(s *Schedule) { s.Template.Argv = nil }, "the template: the program is empty"},
	} {
		s := valid()
		c.change(s)
		err := CheckSchedule(s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.what, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v, want one line with %q", c.what, err, c.want)
		}
	}
}
