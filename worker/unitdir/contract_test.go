package unitdir_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// The files in testdata/contract were written by the worker and runner of
// the version before this package existed (their types then lived in the
// runner, the artifact and the isolation packages). A worker and a runner
// of different versions share a unit directory across a rolling upgrade,
// so each file must read as it was meant and be written again to the
// same bytes.
const contract = "testdata/contract"

// readGolden returns the bytes of a file in testdata/contract.
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(contract, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameBytes fails unless dir/name holds want.
func sameBytes(t *testing.T, dir, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s written as\n%s\nwant the earlier version's\n%s", name, got, want)
	}
}

// cgroupJSON is ref as the worker puts it in a spec.
func cgroupJSON(t *testing.T, ref isolation.Ref) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpecReadsAndWritesAsBefore: a spec the earlier worker wrote reads
// whole, cgroup included; the same spec built as this worker builds it
// (its cgroup as isolation's JSON) is written to the same bytes; and so is
// a spec read and written again.
func TestSpecReadsAndWritesAsBefore(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		spec unitdir.Spec
	}{
		{"", unitdir.Spec{
			Argv: []string{"/bin/sh", "-c", "echo <hi> & bye"}, Env: []string{"PATH=/usr/bin:/bin", "DROVER_DRIVER_ID=driver-20260101000000-0001"},
			Supervise: true, KillTimeout: 10 * time.Second, BackoffBase: time.Second, BackoffMax: time.Minute, StableRun: 5 * time.Second,
			LeaseFile: "/var/lib/drover/worker.lease", Lease: 3 * time.Second, RelaunchAfterContact: true,
			LogMaxFileSize: 10 << 20, LogMaxFiles: 5,
			Artifacts: []model.Artifact{{Source: "https://example.invalid/app.jar", URL: "https://example.invalid/app.jar", Name: "app.jar", SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}},
			Staging: &unitdir.Staging{CacheDir: "/var/lib/drover/cache",
				ArtifactLimits: unitdir.ArtifactLimits{MaxSize: 1 << 30, Timeout: 30 * time.Minute, StallTimeout: 30 * time.Second},
				Masters:        []string{"10.0.0.1:7401", "10.0.0.2:7401"}, BindIP: "10.0.0.9",
				TLSCA: "/etc/drover/ca.pem", TLSCert: "/etc/drover/w.pem", TLSKey: "/etc/drover/w.key", CredentialFD: 3},
			MaxRestarts: 3, RestartWindow: time.Hour, RescheduleAfter: 2, Failures: []int64{1795000000000, 1795000001000},
			Resources: model.Resources{"gpu": {"0", "1"}},
			Cgroup: cgroupJSON(t, isolation.Ref{Version: 2, Root: "/sys/fs/cgroup", Path: "/drover/w1-0123abcd/driver-20260101000000-0001-2",
				Limits: isolation.Limits{MemoryMB: 512, Cores: 2, Pids: 4096}}),
			RunAs: &unitdir.Identity{Name: "spark", UID: 1001, GID: 1001, Groups: []uint32{27, 1001}},
		}},
		{"v1", unitdir.Spec{Argv: []string{"./prog"}, Cgroup: cgroupJSON(t, isolation.Ref{Version: 1, Root: "/sys/fs/cgroup",
			Paths: map[string]string{"memory": "/drover/w1-0123abcd/app-20260101000000-0001-0", "cpu": "/drover/w1-0123abcd/app-20260101000000-0001-0",
				"pids": "/drover/w1/app-0", "freezer": "/drover/w1/app-0"},
			Limits: isolation.Limits{MemoryMB: 256}})}},
	} {
		golden := readGolden(t, filepath.Join(tc.dir, unitdir.SpecFile))
		read, err := unitdir.ReadSpec(filepath.Join(contract, tc.dir))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(read.Cgroup, tc.spec.Cgroup) {
			t.Fatalf("cgroup read as %s, want %s", read.Cgroup, tc.spec.Cgroup)
		}
		ref, err := isolation.ParseRef(read.Cgroup)
		if err != nil {
			t.Fatalf("the runner cannot read the cgroup back: %v", err)
		}
		if ref.Limits.MemoryMB == 0 {
			t.Fatalf("cgroup read back as %+v", ref)
		}
		for _, spec := range []unitdir.Spec{tc.spec, read} {
			dir := t.TempDir()
			if err := unitdir.WriteSpec(dir, spec); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, dir, unitdir.SpecFile, golden)
		}
	}
}

// TestRunnerFilesReadAndWriteAsBefore: the status, the stop request, the
// lease file and an event line of the earlier version read to what they
// said and are written to the same bytes.
func TestRunnerFilesReadAndWriteAsBefore(t *testing.T) {
	code := 137
	dir := t.TempDir()

	wantStatus := unitdir.Status{State: model.DriverFailed, RunnerPID: 4242, Runs: 3, ExitCode: &code, Reason: "out of memory: killed at the 512 MiB limit",
		MemoryPeakBytes: 536870912, CPUMicros: 1234567, UpdatedAt: 1795000002000, Failures: []int64{1795000000000}, Reschedule: true, Tethered: true}
	st, err := unitdir.ReadStatus(contract)
	if err != nil || st.Reason != wantStatus.Reason || *st.ExitCode != code || !st.Tethered || st.CPUMicros != wantStatus.CPUMicros {
		t.Fatalf("status read as %+v (%v)", st, err)
	}
	if err := unitdir.WriteStatus(dir, wantStatus); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, dir, unitdir.StatusFile, readGolden(t, unitdir.StatusFile))

	if reason, ok := unitdir.StopRequested(contract); !ok || reason != unitdir.ReasonFenced {
		t.Fatalf("stop request read as %q, %v", reason, ok)
	}
	if err := unitdir.RequestStop(dir, true); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, dir, unitdir.StopFile, readGolden(t, unitdir.StopFile))

	lease := unitdir.LeaseContent{Renewed: 1795000003000, LeaderContact: 1795000002500, HolderPID: 777, HolderStart: 123456, Detached: true, SucceedsPID: 666, SucceedsStart: 12345}
	if got := unitdir.ReadLease(filepath.Join(contract, "worker.lease")); got != lease {
		t.Fatalf("lease read as %+v, want %+v", got, lease)
	}
	if err := unitdir.WriteLease(filepath.Join(dir, "worker.lease"), lease); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, dir, "worker.lease", readGolden(t, "worker.lease"))

	ev := unitdir.Event{Event: unitdir.EventFinal, Time: time.UnixMilli(1795000002000).UTC(), Run: 3, State: model.DriverFailed, ExitCode: &code,
		Runs: 3, Reason: "exited 137", Failures: []int64{1795000000000}, Reschedule: true, Tethered: true}
	var line bytes.Buffer
	if err := json.NewEncoder(&line).Encode(ev); err != nil {
		t.Fatal(err)
	}
	if want := readGolden(t, "event.json"); !bytes.Equal(line.Bytes(), want) {
		t.Fatalf("event line %s, want the earlier version's %s", line.Bytes(), want)
	}
}
