package host

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/worker/isolation"
)

// TestCheckBoundsThePidsLimit: a pids limit of 1 is taken; 0 and -1 are
// refused in one line naming the flag, as is a mode isolation does not
// know.
func TestCheckBoundsThePidsLimit(t *testing.T) {
	if err := (Isolation{Mode: isolation.ModeAuto, PidsLimit: 1}).Check(); err != nil {
		t.Fatalf("pids limit 1 refused: %v", err)
	}
	for _, n := range []int64{0, -1} {
		err := Isolation{PidsLimit: n}.Check()
		if want := "--pids-limit " + strconv.FormatInt(n, 10) + " must be positive"; err == nil || err.Error() != want {
			t.Errorf("pids limit %d: %v, want %q", n, err, want)
		}
	}
	if err := (Isolation{Mode: "sometimes", PidsLimit: 1}).Check(); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("mode sometimes: %v, want one line", err)
	}
}

// TestOpenCgroupsFollowsTheMode: none makes no cgroup and says nothing;
// auto on a machine without cgroups (here a root with no cgroup file
// system) runs without them and says why in one warning; cgroups refuses.
func TestOpenCgroupsFollowsTheMode(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if c, err := (Isolation{Mode: isolation.ModeNone}).OpenCgroups("w1-test", log); c != nil || err != nil || logs.Len() != 0 {
		t.Fatalf("none: %v, %v, logged %q", c, err, logs.String())
	}
	nowhere := t.TempDir()
	if c, err := (Isolation{Root: nowhere}).OpenCgroups("w1-test", log); c != nil || err != nil {
		t.Fatalf("auto without cgroups: %v, %v", c, err)
	}
	if n := strings.Count(logs.String(), "isolation off"); n != 1 {
		t.Fatalf("auto without cgroups warned %d times: %q", n, logs.String())
	}
	_, err := (Isolation{Mode: isolation.ModeCgroups, Root: nowhere}).OpenCgroups("w1-test", log)
	if err == nil || !strings.HasPrefix(err.Error(), "--isolation cgroups: ") {
		t.Fatalf("cgroups without cgroups: %v", err)
	}
}

// TestDestroyCgroupRefusesWhatIsolationCannotName: a spec's cgroup that
// is not a Ref isolation made (unknown version, a path out of the
// hierarchy, unknown fields) is refused before anything is touched.
func TestDestroyCgroupRefusesWhatIsolationCannotName(t *testing.T) {
	for _, b := range []string{`{"version":3,"root":"/sys/fs/cgroup","path":"/x"}`,
		`{"version":2,"root":"/sys/fs/cgroup","path":"/../../etc"}`,
		`{"version":2,"root":"/sys/fs/cgroup","path":"/drover/x","extra":1}`, `[]`} {
		if err := (Isolation{}).DestroyCgroup([]byte(b), time.Second); err == nil {
			t.Errorf("cgroup %s destroyed", b)
		}
	}
}

// TestCgroupPathNamesTheCgroup: the adoption log names a unit's cgroup by
// its path, as before the worker took cgroups as JSON: the v2 path, the
// v1 memory controller's, and JSON that does not parse as it is.
func TestCgroupPathNamesTheCgroup(t *testing.T) {
	for _, c := range []struct{ ref, want string }{
		{`{"version":2,"root":"/sys/fs/cgroup","path":"/drover/w1-ab/driver-1","limits":{"memory_mb":1,"pids":1}}`, "/drover/w1-ab/driver-1"},
		{`{"version":1,"root":"/sys/fs/cgroup","paths":{"cpu":"/c/drover/w1-ab/driver-1","memory":"/m/drover/w1-ab/driver-1"},"limits":{"memory_mb":1,"pids":1}}`, "/m/drover/w1-ab/driver-1"},
		{`{"version":3}`, `{"version":3}`},
	} {
		if got := (Isolation{}).CgroupPath([]byte(c.ref)); got != c.want {
			t.Errorf("%s: %q, want %q", c.ref, got, c.want)
		}
	}
}
