package model

import (
	"strings"
	"testing"
)

func TestCheckSupervision(t *testing.T) {
	for _, ok := range []struct {
		sup      bool
		max      int
		window   int64
		schedule int
	}{{false, 0, 0, 0}, {true, 0, 0, 0}, {true, 2, 0, 0}, {true, 2, 1000, 0}, {true, 0, 0, 3}, {true, 1000, 60_000, 1000}} {
		if err := CheckSupervision(ok.sup, ok.max, ok.window, ok.schedule); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []struct {
		sup      bool
		max      int
		window   int64
		schedule int
		want     string
	}{
		{true, -1, 0, 0, "max restarts"},
		{true, 1001, 0, 0, "max restarts"},
		{true, 0, 0, -2, "reschedule after"},
		{true, 2, -5, 0, "positive"},
		{true, 2, 999, 0, "at least 1s"},
		{true, 0, 5000, 0, "needs max restarts"},
		{false, 2, 0, 0, "need supervise"},
		{false, 0, 0, 2, "need supervise"},
	} {
		if err := CheckSupervision(bad.sup, bad.max, bad.window, bad.schedule); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: err %v, want %q", bad, err, bad.want)
		}
	}
}

func TestFailuresInWindow(t *testing.T) {
	fs := []int64{1000, 5000, 9000}
	if n := FailuresInWindow(fs, 10_000, 0); n != 3 {
		t.Fatalf("no window: %d", n)
	}
	if n := FailuresInWindow(fs, 10_000, 5000); n != 1 {
		t.Fatalf("5s window: %d, want the one failure after 5000", n)
	}
	if n := FailuresKept(2, 0); n != 3 {
		t.Fatal(n)
	}
	if n := FailuresKept(0, 0); n != 0 {
		t.Fatal(n)
	}
	if n := FailuresKept(1, 4); n != 4 {
		t.Fatal(n)
	}
	d := &Driver{DriverSpec: DriverSpec{MaxRestarts: 1}, Attempts: []Attempt{{Attempt: 1, Failures: []int64{0, 1, 2}}, {Attempt: 2, Failures: []int64{3}}}}
	if got := d.FailuresBefore(3); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("failures %v, want the last two", got)
	}
	if got := d.FailuresBefore(2); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("failures before attempt 2: %v, want attempt 1's last two", got)
	}
}
