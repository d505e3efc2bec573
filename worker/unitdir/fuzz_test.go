package unitdir

// FuzzRunnerFiles feeds arbitrary bytes to the two readers of an attempt
// directory's files, which a worker reads back after a restart: ReadSpec
// (SpecFile, written by the worker) and ReadStatus (StatusFile, written by
// the runner). `go test ./worker/unitdir` runs its seeds (f.Add and
// testdata/fuzz/FuzzRunnerFiles/); `make fuzz-smoke` fuzzes it briefly.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FuzzRunnerFiles writes the bytes as both SpecFile and StatusFile of an
// attempt directory and reads them back. Whatever the bytes: no panic; a
// spec that reads is valid, takes its defaults (every duration positive,
// BackoffMax at least BackoffBase), and reads back the same after
// WriteSpec; a status that reads reads back the same after being written
// as the runner writes it.
func FuzzRunnerFiles(f *testing.F) {
	exit := 3
	for _, v := range []any{
		Spec{Argv: []string{"/bin/echo", "hello"}, Env: []string{"PATH=/usr/bin:/bin", "DROVER_DRIVER_ID=driver-20200101000000-0000", "DROVER_RUN=1"},
			Supervise: true, KillTimeout: 10 * time.Second, BackoffBase: time.Second, BackoffMax: time.Minute, StableRun: 5 * time.Second,
			LeaseFile: "/var/lib/drover-worker/lease", Lease: 3 * time.Second},
		Spec{Argv: []string{"./prog"}},
		Status{State: "RUNNING", RunnerPID: 4242, PID: 4243, Runs: 2, UpdatedAt: 1_795_000_000_000},
		Status{State: "FAILED", RunnerPID: 4242, Runs: 3, ExitCode: &exit, Reason: "exited 3", UpdatedAt: 1_795_000_000_001},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"argv":[]}`, `{"argv":[""]}`, `{"argv":["x"],"kill_timeout":-1}`, `{"argv":["x"],"lease_file":"lease"}`,
		`{"argv":["x"],"backoff_base":5000000000,"backoff_max":1}`, `{"argv":["x"]} {}`, `{"argv":["x"],"unknown":1}`,
		`{"state":"RUNNING","runner_pid":1,"runs":1,"updated_at":1,"exit_code":null}`, `{"exit_code":1.5}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{SpecFile, StatusFile} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := ReadSpec(dir); err == nil {
			if err := WriteSpec(dir, s); err != nil {
				t.Fatalf("spec %q reads but does not write: %v", data, err)
			}
			again, err := ReadSpec(dir)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("spec %+v read back as %+v (%v)", s, again, err)
			}
			s.ApplyDefaults()
			if s.KillTimeout <= 0 || s.BackoffBase <= 0 || s.BackoffMax < s.BackoffBase || s.StableRun <= 0 || s.Lease <= 0 {
				t.Fatalf("spec %q with defaults: %+v", data, s)
			}
		}
		if st, err := ReadStatus(dir); err == nil {
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeFileAtomic(dir, StatusFile, b, private); err != nil {
				t.Fatal(err)
			}
			again, err := ReadStatus(dir)
			if err != nil || !reflect.DeepEqual(again, st) {
				t.Fatalf("status %+v read back as %+v (%v)", st, again, err)
			}
		}
	})
}
