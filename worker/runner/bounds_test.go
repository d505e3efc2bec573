package runner_test

import (
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// failing is a supervised spec of a program that always exits 1, with a
// short back-off.
func failing(f func(*unitdir.Spec)) unitdir.Spec {
	s := unitdir.Spec{Argv: []string{"/bin/sh", "-c", "exit 1"}, Supervise: true, BackoffBase: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond}
	f(&s)
	return s
}

// runs reads started and exited events until the final one, checking that
// each run reported the failures counted before it, and returns the final
// event and the number of runs.
func runs(t *testing.T, h *harness) (unitdir.Event, int) {
	t.Helper()
	n := 0
	for e := range h.events {
		switch e.Event {
		case unitdir.EventStarted:
			n++
			if n > 10 {
				t.Fatalf("run %d: the bounds never ended the attempt", n)
			}
			if len(e.Failures) != n-1 {
				t.Fatalf("run %d started with failures %v", n, e.Failures)
			}
		case unitdir.EventFinal:
			<-h.exited
			return e, n
		}
	}
	t.Fatal("no final event")
	return unitdir.Event{}, 0
}

// --max-restarts 2: a program that always fails runs exactly 3 times, and
// the attempt ends FAILED saying how many runs failed in how long.
func TestMaxRestartsEndsTheAttempt(t *testing.T) {
	h := startRunner(t, failing(func(s *unitdir.Spec) { s.MaxRestarts, s.RestartWindow = 2, time.Minute }))
	e, n := runs(t, h)
	if n != 3 || e.State != model.DriverFailed || e.Reschedule || exitCode(e) != 1 || len(e.Failures) != 3 {
		t.Fatalf("after %d runs: %+v; want FAILED after exactly 3, three failures, no reschedule", n, e)
	}
	if !strings.HasPrefix(e.Reason, "3 runs failed in ") || !strings.Contains(e.Reason, "more than the 2 restarts allowed within 1m0s") ||
		!strings.Contains(e.Reason, "exited with code 1") {
		t.Fatalf("reason %q", e.Reason)
	}
	st, err := unitdir.ReadStatus(h.dir)
	if err != nil || !reflect.DeepEqual(st.Failures, e.Failures) {
		t.Fatalf("status %+v %v, want the failures of the final event", st, err)
	}
}

// The failed runs of earlier attempts count: with two already in the
// window, one more run fails the attempt; ones outside it do not count.
func TestMaxRestartsCountsEarlierAttempts(t *testing.T) {
	now := time.Now().UnixMilli()
	h := startRunner(t, failing(func(s *unitdir.Spec) {
		s.MaxRestarts, s.RestartWindow, s.Failures = 2, time.Minute, []int64{now - 2*time.Minute.Milliseconds(), now - 1000, now - 500}
	}))
	if e, n := runs(t, h); n != 1 || e.State != model.DriverFailed || !strings.HasPrefix(e.Reason, "3 runs failed") {
		t.Fatalf("after %d runs: %+v; want FAILED after one more run", n, e)
	}
}

// A window that has passed forgets failures: runs that fail more slowly
// than max restarts per window go on until stopped.
func TestRestartWindowForgets(t *testing.T) {
	h := startRunner(t, failing(func(s *unitdir.Spec) {
		s.Argv = []string{"/bin/sh", "-c", "sleep 1.1; exit 1"}
		s.MaxRestarts, s.RestartWindow = 1, time.Second
	}))
	for i := 0; i < 3; i++ {
		h.next(unitdir.EventStarted)
		h.next(unitdir.EventExited)
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	if e := h.ended(); e.State != model.DriverKilled {
		t.Fatalf("final %+v, want KILLED by the stop: no two failures fell in one second", e)
	}
}

// --reschedule-after 2 ends the attempt FAILED with Reschedule after two
// failed runs in a row, before max restarts 5 would.
func TestRescheduleAfterEndsTheAttempt(t *testing.T) {
	h := startRunner(t, failing(func(s *unitdir.Spec) { s.MaxRestarts, s.RescheduleAfter = 5, 2 }))
	e, n := runs(t, h)
	if n != 2 || e.State != model.DriverFailed || !e.Reschedule || len(e.Failures) != 2 || !strings.Contains(e.Reason, "2 runs failed in a row") {
		t.Fatalf("after %d runs: %+v; want FAILED with reschedule after 2", n, e)
	}
	if st, _ := unitdir.ReadStatus(h.dir); !st.Reschedule {
		t.Fatalf("status %+v does not say reschedule", st)
	}
}

// Unbounded supervision counts nothing, as before.
func TestUnboundedKeepsNoFailures(t *testing.T) {
	h := startRunner(t, failing(func(*unitdir.Spec) {}))
	for i := 0; i < 3; i++ {
		if s := h.next(unitdir.EventStarted); s.Failures != nil {
			t.Fatalf("started %+v carries failures", s)
		}
		h.next(unitdir.EventExited)
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	if e := h.ended(); e.State != model.DriverKilled || e.Failures != nil {
		t.Fatalf("final %+v", e)
	}
}
