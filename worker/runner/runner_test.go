package runner_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/runner"
	"github.com/drover-project/drover/worker/unitdir"
)

// TestMain lets the test binary stand in for "drover runner": the tests start
// it again with the arguments "runner --dir DIR".
//
// With the arguments "spawn-runner DIR" it plays a worker daemon instead: it
// starts "runner --dir DIR" with pipes for its stdin and stdout, prints the
// runner's PID and then reads the runner's events until it is killed. With
// "alloc MiB" it is a program that touches that much memory.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		os.Exit(runner.Main(os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "spawn-runner" {
		os.Exit(spawnRunner(os.Args[2]))
	}
	if len(os.Args) == 3 && os.Args[1] == "alloc" {
		os.Exit(alloc(os.Args[2]))
	}
	// A race-enabled binary otherwise sleeps a second before it exits,
	// which every runner would add to every test.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// failSafe bounds every wait, so that a broken runner fails a test instead of
// hanging it; no test relies on it for ordering.
const failSafe = 30 * time.Second

type harness struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	events chan unitdir.Event
	stderr bytes.Buffer
	exited chan struct{}
	err    error
}

func startRunner(t *testing.T, spec unitdir.Spec) *harness {
	t.Helper()
	return startRunnerAfter(t, spec, nil)
}

// startRunnerAfter is startRunner with before run once the spec is in
// the attempt directory (h.dir) and the runner's command (h.cmd) is made,
// before it starts.
func startRunnerAfter(t *testing.T, spec unitdir.Spec, before func(h *harness)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), events: make(chan unitdir.Event, 64), exited: make(chan struct{})}
	if err := unitdir.WriteSpec(h.dir, spec); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h.cmd = exec.Command(self, "runner", "--dir", h.dir)
	h.cmd.Stderr = &h.stderr
	if before != nil {
		before(h)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e unitdir.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("bad event line %q: %v", sc.Text(), err)
				continue
			}
			h.events <- e
		}
		close(h.events)
		h.err = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-h.exited:
		default:
			h.cmd.Process.Kill()
			<-h.exited
		}
		if t.Failed() {
			t.Logf("runner stderr:\n%s", h.stderr.String())
		}
	})
	return h
}

// next returns the next event, which must be of the given kind or of one
// of the kinds in or.
func (h *harness) next(kind unitdir.EventKind, or ...unitdir.EventKind) unitdir.Event {
	h.t.Helper()
	select {
	case e, ok := <-h.events:
		if !ok {
			h.t.Fatalf("event stream ended, want %s", kind)
		}
		if e.Event != kind && !slices.Contains(or, e.Event) {
			h.t.Fatalf("got event %+v, want %s", e, kind)
		}
		return e
	case <-time.After(failSafe):
		h.t.Fatalf("no %s event within %s", kind, failSafe)
	}
	panic("unreachable")
}

// final returns the final event, checks that it is the last one, that the
// runner exited 0, and that StatusFile agrees with it.
func (h *harness) final() unitdir.Event {
	h.t.Helper()
	return h.check(h.next(unitdir.EventFinal))
}

// ended is final after whatever staging, staged, started and exited events come
// first: for a stop sent to a program that fails over and over (on a
// loaded machine the stop can land after the back-off has started another
// run), and for tests that judge an attempt by its end alone.
func (h *harness) ended() unitdir.Event {
	h.t.Helper()
	for {
		e := h.next(unitdir.EventFinal, unitdir.EventStaging, unitdir.EventStaged, unitdir.EventStarted, unitdir.EventExited)
		if e.Event == unitdir.EventFinal {
			return h.check(e)
		}
	}
}

// check checks that the final event e is the last one, that the runner
// exited 0, and that StatusFile agrees with it.
func (h *harness) check(e unitdir.Event) unitdir.Event {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-time.After(failSafe):
		h.t.Fatal("runner did not exit after its final event")
	}
	if extra, ok := <-h.events; ok {
		h.t.Fatalf("event after final: %+v", extra)
	}
	if h.err != nil {
		h.t.Fatalf("runner exit: %v", h.err)
	}
	st, err := unitdir.ReadStatus(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	if st.State != e.State || st.Runs != e.Runs || st.Reason != e.Reason || st.PID != 0 {
		h.t.Fatalf("status %+v does not match final event %+v", st, e)
	}
	return e
}

// work is the path of name in the program's working directory.
func (h *harness) work(name string) string { return filepath.Join(h.dir, unitdir.ProgramDir, name) }

// file returns what the program wrote in name, in its directory.
func (h *harness) file(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.work(name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// stream returns what the program wrote to stream (unitdir.StdoutFile or
// unitdir.StderrFile) and the runner kept.
func (h *harness) stream(name string) string {
	h.t.Helper()
	return readStream(h.t, h.dir, name, 0)
}

// readStream reads stream name of the unit directory dir from offset on.
func readStream(t testing.TB, dir, name string, offset int64) string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, err := unitdir.OpenLog(root, name, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := io.ReadAll(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFile waits until the program has written name in its directory.
func (h *harness) waitFile(name string) string {
	h.t.Helper()
	deadline := time.Now().Add(failSafe)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(h.work(name)); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("program never wrote %s", name)
	return ""
}

func exitCode(e unitdir.Event) int {
	if e.ExitCode == nil {
		return -1
	}
	return *e.ExitCode
}

func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("%s (%d) still exists: kill 0 = %v", what, pid, err)
	}
}

func TestExitZeroFinishes(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		Argv: []string{"/bin/sh", "-c", `echo "$GREETING run $DROVER_RUN"; pwd; echo oops >&2`},
		Env:  []string{"GREETING=hello", "PATH=/usr/bin:/bin"},
	})
	started := h.next(unitdir.EventStarted)
	if started.Run != 1 || started.PID <= 0 {
		t.Fatalf("started = %+v", started)
	}
	if ex := h.next(unitdir.EventExited); ex.Code == nil || *ex.Code != 0 || ex.Run != 1 {
		t.Fatalf("exited = %+v", ex)
	}
	e := h.final()
	if e.State != model.DriverFinished || exitCode(e) != 0 || e.Runs != 1 {
		t.Fatalf("final = %+v", e)
	}
	dir, _ := filepath.EvalSymlinks(h.work(""))
	if got, want := h.stream(unitdir.StdoutFile), "hello run 1\n"+dir+"\n"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
	if got := h.stream(unitdir.StderrFile); got != "oops\n" {
		t.Fatalf("stderr = %q", got)
	}
}

func TestUnsupervisedNonZeroFails(t *testing.T) {
	h := startRunner(t, unitdir.Spec{Argv: []string{"/bin/sh", "-c", "exit 3"}})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	e := h.final()
	if e.State != model.DriverFailed || exitCode(e) != 3 || e.Runs != 1 || !strings.Contains(e.Reason, "code 3") {
		t.Fatalf("final = %+v", e)
	}
}

func TestSupervisedRelaunchesWithBackoff(t *testing.T) {
	const base = 50 * time.Millisecond
	// Exits 1 on its first two runs, 0 on the third; the count survives in
	// the attempt directory, its working directory.
	script := `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo run $n; [ $n -ge 3 ]`
	h := startRunner(t, unitdir.Spec{
		Argv:        []string{"/bin/sh", "-c", script},
		Supervise:   true,
		BackoffBase: base,
		BackoffMax:  time.Second,
		StableRun:   time.Minute,
	})
	var gaps []time.Duration
	var lastExit time.Time
	for run := 1; run <= 3; run++ {
		s := h.next(unitdir.EventStarted)
		if s.Run != run {
			t.Fatalf("started = %+v, want run %d", s, run)
		}
		if run > 1 {
			gaps = append(gaps, s.Time.Sub(lastExit))
		}
		ex := h.next(unitdir.EventExited)
		want := 1
		if run == 3 {
			want = 0
		}
		if ex.Code == nil || *ex.Code != want {
			t.Fatalf("run %d exited %+v, want code %d", run, ex, want)
		}
		lastExit = ex.Time
	}
	e := h.final()
	if e.State != model.DriverFinished || e.Runs != 3 || exitCode(e) != 0 {
		t.Fatalf("final = %+v", e)
	}
	if gaps[0] < base || gaps[1] < 2*base {
		t.Fatalf("pauses before relaunches = %v, want at least %v then %v", gaps, base, 2*base)
	}
	if got := h.stream(unitdir.StdoutFile); got != "run 1\nrun 2\nrun 3\n" {
		t.Fatalf("stdout = %q: output of all runs should be appended", got)
	}
}

func TestSIGTERMKillsWholeGroup(t *testing.T) {
	const killTimeout = 300 * time.Millisecond
	// Both the shell and its child ignore SIGTERM, so only the SIGKILL
	// that follows the kill timeout can end them.
	h := startRunner(t, unitdir.Spec{
		Argv:        []string{"/bin/sh", "-c", `trap '' TERM; sleep 1000 & echo $! > child; wait`},
		KillTimeout: killTimeout,
	})
	s := h.next(unitdir.EventStarted)
	child, err := strconv.Atoi(h.waitFile("child"))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	h.next(unitdir.EventExited)
	e := h.final()
	if e.State != model.DriverKilled || e.Reason != unitdir.ReasonKilled {
		t.Fatalf("final = %+v", e)
	}
	if waited := time.Since(sent); waited < killTimeout {
		t.Fatalf("group ended %v after SIGTERM, before the kill timeout %v: SIGKILL came early", waited, killTimeout)
	}
	assertGone(t, "process group", -s.PID)
	assertGone(t, "child sleep", child)
}

func TestLeftoversOfACleanExitAreEnded(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		Argv: []string{"/bin/sh", "-c", `sleep 1000 & echo $! > child`},
	})
	s := h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	child, err := strconv.Atoi(h.waitFile("child"))
	if err != nil {
		t.Fatal(err)
	}
	assertGone(t, "process group", -s.PID)
	assertGone(t, "background sleep", child)
}

func TestKillDuringBackoff(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		Argv:        []string{"/bin/sh", "-c", "exit 1"},
		Supervise:   true,
		BackoffBase: time.Hour,
	})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e := h.final()
	if e.State != model.DriverKilled || e.Runs != 1 || e.ExitCode != nil {
		t.Fatalf("final = %+v", e)
	}
}

// A stop the worker recorded before the runner listened for signals (its
// SIGUSR2 then went unheard) ends the attempt before the program starts.
func TestStopRequestedBeforeStartRunsNothing(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			h := startRunnerAfter(t, unitdir.Spec{
				Argv: []string{"/bin/sh", "-c", "echo ran > ran"},
			}, func(h *harness) {
				if err := unitdir.RequestStop(h.dir, fenced); err != nil {
					t.Fatal(err)
				}
			})
			e := h.final()
			want := unitdir.ReasonKilled
			if fenced {
				want = unitdir.ReasonFenced
			}
			if e.State != model.DriverKilled || e.Runs != 0 || e.Reason != want {
				t.Fatalf("final = %+v, want KILLED after 0 runs, reason %q", e, want)
			}
			if _, err := os.Stat(h.work("ran")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the program ran after the stop: %v", err)
			}
		})
	}
}

// A supervised attempt in backoff stops at its next launch when the stop
// is in the file, even if no signal ever arrives.
func TestStopFileEndsBackoffRelaunch(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		Argv:        []string{"/bin/sh", "-c", "echo x >> runs; exit 1"},
		Supervise:   true,
		BackoffBase: 50 * time.Millisecond,
	})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if err := unitdir.RequestStop(h.dir, true); err != nil {
		t.Fatal(err)
	}
	e := h.ended()
	if e.State != model.DriverKilled || e.Reason != unitdir.ReasonFenced {
		t.Fatalf("final = %+v", e)
	}
	if runs := strings.Count(h.file("runs"), "x"); runs != e.Runs {
		t.Fatalf("program ran %d times, runner reports %d", runs, e.Runs)
	}
}

// A program that is not there ends the attempt ERROR without a run, in
// one line naming it; a relative path also says the directory it was
// looked for in, the attempt's working directory, and how to put a file
// there.
func TestMissingProgramIsError(t *testing.T) {
	for _, prog := range []string{"/nonexistent/drover-test-program", "drover-test-no-such-program", "./missing", "jobs/run.sh"} {
		t.Run(prog, func(t *testing.T) {
			h := startRunner(t, unitdir.Spec{Argv: []string{prog}, Env: []string{"PATH=/usr/bin:/bin"}})
			e := h.final()
			if e.State != model.DriverError || e.Runs != 0 || !strings.Contains(e.Reason, prog) || strings.Contains(e.Reason, "\n") {
				t.Fatalf("final = %+v", e)
			}
			relative := strings.Contains(prog, "/") && !filepath.IsAbs(prog)
			for _, want := range []string{h.work(""), "--upload", "--artifact"} {
				if strings.Contains(e.Reason, want) != relative {
					t.Errorf("reason %q: naming %q is %t, want %t", e.Reason, want, !relative, relative)
				}
			}
		})
	}
}

func TestArgvIsLiteral(t *testing.T) {
	args := []string{"a;b", "$(touch pwned)", "*", "`id`", "x > y", "'q'", ""}
	h := startRunner(t, unitdir.Spec{
		Argv: append([]string{"printf", `%s|\n`}, args...),
		Env:  []string{"PATH=/usr/bin:/bin"},
	})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	if got, want := h.stream(unitdir.StdoutFile), strings.Join(args, "|\n")+"|\n"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
	if _, err := os.Stat(h.work("pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a shell ran the arguments: %v", err)
	}
}

func TestBadSpecIsError(t *testing.T) {
	for _, c := range []struct {
		spec unitdir.Spec
		want string
	}{
		{unitdir.Spec{}, "no program"},
		{unitdir.Spec{Argv: []string{"/bin/true"}, Supervise: true, RelaunchAfterContact: true}, "no lease file"},
	} {
		h := startRunner(t, c.spec)
		e := h.next(unitdir.EventFinal)
		<-h.exited
		if e.State != model.DriverError || !strings.Contains(e.Reason, c.want) {
			t.Fatalf("final = %+v, want ERROR saying %q", e, c.want)
		}
	}
}
