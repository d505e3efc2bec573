package runner_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

const appScript = "#!/bin/sh\necho \"staged app ran in $(basename \"$PWD\")\"\n"

// artifactServer serves appScript at /app.sh while ok says so, and 404
// otherwise, after answering 503 to the first unavailable requests;
// arrived receives every request.
type artifactServer struct {
	*httptest.Server
	ok          atomic.Bool
	hang        atomic.Bool
	unavailable atomic.Int32
	arrived     chan struct{}
}

func newArtifactServer(t *testing.T) *artifactServer {
	s := &artifactServer{arrived: make(chan struct{}, 100)}
	s.ok.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- struct{}{}
		switch {
		case s.hang.Load():
			<-r.Context().Done()
		case s.unavailable.Add(-1) >= 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case s.ok.Load():
			w.Write([]byte(appScript))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// stagingSpec runs ./app.sh staged from srv through a cache of its own.
func stagingSpec(t *testing.T, srv *artifactServer) unitdir.Spec {
	a, err := model.NormalizeArtifact(model.Artifact{Source: srv.URL + "/app.sh"})
	if err != nil {
		t.Fatal(err)
	}
	return unitdir.Spec{
		Argv:      []string{"./app.sh"},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Artifacts: []model.Artifact{a},
		Staging:   &unitdir.Staging{CacheDir: filepath.Join(t.TempDir(), "cache")},
	}
}

// waitStatus polls the status file, which is all an adopting worker has,
// until cond holds.
func (h *harness) waitStatus(what string, cond func(unitdir.Status) bool) unitdir.Status {
	h.t.Helper()
	deadline := time.Now().Add(failSafe)
	for time.Now().Before(deadline) {
		if st, err := unitdir.ReadStatus(h.dir); err == nil && cond(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("status never showed %s", what)
	return unitdir.Status{}
}

func TestStagesArtifactsBeforeFirstRun(t *testing.T) {
	srv := newArtifactServer(t)
	h := startRunner(t, stagingSpec(t, srv))
	if e := h.next(unitdir.EventStaged); e.Fetched != 1 {
		t.Fatalf("staged = %+v, want 1 fetched", e)
	}
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished || e.Runs != 1 {
		t.Fatalf("final = %+v", e)
	}
	if got, want := h.stream(unitdir.StdoutFile), "staged app ran in "+unitdir.ProgramDir+"\n"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
}

// An unsupervised attempt whose staging fails ends FAILED with the
// staging's one-line reason, and its program never starts.
func TestUnsupervisedStagingFailureFails(t *testing.T) {
	srv := newArtifactServer(t)
	srv.ok.Store(false)
	h := startRunner(t, stagingSpec(t, srv))
	e := h.final()
	if want := "fetch " + srv.URL + "/app.sh: 404 Not Found"; e.State != model.DriverFailed || e.Runs != 0 || e.Reason != want {
		t.Fatalf("final = %+v, want FAILED after 0 runs: %s", e, want)
	}
	if _, err := os.Stat(filepath.Join(h.dir, unitdir.StdoutFile)); err == nil {
		t.Fatal("the program ran")
	}
}

// A supervised attempt stages again after the back-off until the server
// answers, saying meanwhile that it is staging and why it failed.
func TestSupervisedStagingRetriesUntilServerAnswers(t *testing.T) {
	srv := newArtifactServer(t)
	srv.ok.Store(false)
	spec := stagingSpec(t, srv)
	spec.Supervise = true
	spec.BackoffBase = 20 * time.Millisecond
	spec.BackoffMax = 40 * time.Millisecond
	h := startRunner(t, spec)
	st := h.waitStatus("a failed staging", func(st unitdir.Status) bool { return st.Reason != "" })
	if want := "fetch " + srv.URL + "/app.sh: 404 Not Found; staging again in "; !st.Staging || st.State != model.DriverSubmitted || !strings.HasPrefix(st.Reason, want) || st.Runs != 0 {
		t.Fatalf("status = %+v, want staging, SUBMITTED, reason %q...", st, want)
	}
	// Each change is told once: the third failure says what the second
	// did (the back-off is at its cap), and so says nothing.
	url := srv.URL + "/app.sh"
	for _, want := range []string{"fetch " + url + ": 404 Not Found; staging again in 20ms", "fetch " + url + ": 404 Not Found; staging again in 40ms"} {
		if e := h.next(unitdir.EventStaging); e.Reason != want {
			t.Fatalf("staging event %+v, want %q", e, want)
		}
	}
	for range 4 {
		<-srv.arrived
	}
	srv.ok.Store(true)
	h.next(unitdir.EventStaged)
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished || e.Runs != 1 {
		t.Fatalf("final = %+v", e)
	}
}

// A failed staging counts against the restart bounds as a failed run
// does: with --max-restarts 2, the third failed staging ends the attempt
// FAILED, saying so and why the last failed.
func TestStagingFailuresCountAgainstRestartBounds(t *testing.T) {
	srv := newArtifactServer(t)
	srv.ok.Store(false)
	spec := stagingSpec(t, srv)
	spec.Supervise, spec.MaxRestarts = true, 2
	spec.BackoffBase, spec.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	h := startRunner(t, spec)
	e := h.ended()
	if e.State != model.DriverFailed || !strings.Contains(e.Reason, "3 runs failed") || !strings.Contains(e.Reason, "404 Not Found") || e.Runs != 0 {
		t.Fatalf("final = %+v, want FAILED after 3 failed stagings naming the 404", e)
	}
	if n := len(srv.arrived); n != 3 {
		t.Fatalf("%d fetches, want 3", n)
	}
}

// Each failed try of a download that is tried again is told as it
// happens, in the status and as a staging event, with the try and the
// pause before the next; the program starts once the server answers.
func TestStagingProgressTellsEachRetry(t *testing.T) {
	srv := newArtifactServer(t)
	srv.unavailable.Store(2)
	h := startRunner(t, stagingSpec(t, srv))
	url := srv.URL + "/app.sh"
	for _, want := range []string{
		"fetching " + url + ": 503 Service Unavailable, try 1, next in 1s",
		"fetching " + url + ": 503 Service Unavailable, try 2, next in 2s",
	} {
		e := h.next(unitdir.EventStaging)
		if e.Reason != want {
			t.Fatalf("staging event %+v, want %q", e, want)
		}
		// The status is written before the event.
		if st, err := unitdir.ReadStatus(h.dir); err != nil || !st.Staging || st.State != model.DriverSubmitted || st.Reason != want {
			t.Fatalf("status = %+v (%v), want staging, SUBMITTED, %q", st, err, want)
		}
	}
	h.next(unitdir.EventStaged)
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished || e.Reason != "" {
		t.Fatalf("final = %+v", e)
	}
}

// A stop while the runner stages cancels the staging at once: the
// attempt ends KILLED and its program never starts.
func TestStopDuringStagingKills(t *testing.T) {
	for _, c := range []struct {
		name   string
		stop   func(h *harness)
		reason string
	}{
		{"SIGTERM", func(h *harness) { h.cmd.Process.Signal(syscall.SIGTERM) }, unitdir.ReasonKilled},
		{"fence", func(h *harness) {
			unitdir.RequestStop(h.dir, true)
			h.cmd.Process.Signal(syscall.SIGUSR2)
		}, unitdir.ReasonFenced},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newArtifactServer(t)
			srv.hang.Store(true)
			h := startRunner(t, stagingSpec(t, srv))
			<-srv.arrived
			if st := h.waitStatus("staging", func(st unitdir.Status) bool { return st.Staging }); st.State != model.DriverSubmitted || st.PID != 0 {
				t.Fatalf("status while staging = %+v", st)
			}
			c.stop(h)
			if e := h.final(); e.State != model.DriverKilled || e.Reason != c.reason || e.Runs != 0 {
				t.Fatalf("final = %+v, want KILLED (%s) after 0 runs", e, c.reason)
			}
			if _, err := os.Stat(h.work("app.sh")); err == nil {
				t.Fatal("a cancelled staging left app.sh")
			}
		})
	}
}

func TestBadStagingSpecIsError(t *testing.T) {
	srv := newArtifactServer(t)
	spec := stagingSpec(t, srv)
	spec.Staging = nil
	h := startRunner(t, spec)
	e := h.next(unitdir.EventFinal)
	<-h.exited
	if e.State != model.DriverError || !strings.Contains(e.Reason, "no absolute cache directory") {
		t.Fatalf("final = %+v", e)
	}
}
