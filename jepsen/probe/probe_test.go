package probe

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMain lets the test binary stand for a probe program: with
// PROBE_TEST_SLEEP set it only sleeps, as a started probe does.
func TestMain(m *testing.M) {
	if os.Getenv("PROBE_TEST_SLEEP") != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSamplerSeesDriverAttemptAndWorker: a process running the program is
// sighted with the driver, attempt and worker its environment names (the
// worker even though it never wrote a trace), from its first scan to its
// last, and not once it has exited.
func TestSamplerSeesDriverAttemptAndWorker(t *testing.T) {
	program, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(program)
	cmd.Env = append(os.Environ(), "PROBE_TEST_SLEEP=1",
		"DROVER_DRIVER_ID=driver-1", "DROVER_ATTEMPT=2", "DROVER_WORKER_ID=w9")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := sampler{program: program, seen: map[process]*Sighting{}}
	// Scanned until seen: the first scans may precede the exec.
	for tick := int64(1); len(s.order) == 0; tick++ {
		if tick > 30_000 {
			t.Fatal("the child was never seen running the program")
		}
		s.scan(tick)
		time.Sleep(time.Millisecond)
	}
	s.scan(100_000)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	s.scan(200_000)

	got := s.sightings()
	if len(got) != 1 {
		t.Fatalf("sightings %+v, want the child's only", got)
	}
	want := Sighting{Driver: "driver-1", Attempt: 2, Worker: "w9", PID: cmd.Process.Pid, First: got[0].First, Last: 100_000}
	if got[0] != want {
		t.Errorf("sighting %+v, want %+v", got[0], want)
	}
}
