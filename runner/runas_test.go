package runner_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/runner"
)

// nobody is the unprivileged user the tests run programs (and runners)
// as. The test is skipped unless it runs as root, which starting a
// process as another user needs.
func nobody(t *testing.T) runner.Identity {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return runner.Identity{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
}

// reachable lets every user pass through dir and the test's directories
// above it (0711: traverse, no listing), as the directories above a
// worker's work dir must be for programs run as another user.
func reachable(t *testing.T, dir string) {
	t.Helper()
	for d := dir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// owner is the user ID that owns path.
func owner(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// A program run as another user (Spec.RunAs) gets its uid and groups,
// works in a directory of its own with its artifacts staged as its own,
// and can neither change the runner's files nor add any beside them.
func TestProgramRunsAsItsUser(t *testing.T) {
	id := nobody(t)
	srv := newArtifactServer(t)
	spec := stagingSpec(t, srv)
	spec.RunAs = &id
	spec.Argv = []string{"/bin/sh", "-c", `id -u; id -g; pwd; ./app.sh
echo x > mine && echo wrote its directory
echo x > ../status.json || echo kept status
echo x > ../planted || echo planted nothing
rm -f ../spec.json; [ -e ../spec.json ] && echo kept spec
ln -s /etc/passwd ../stdout.00000000000000000001 || echo linked nothing`}
	h := startRunnerAfter(t, spec, func(h *harness) { reachable(t, h.dir) })
	if e := h.ended(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v\nstderr: %s", e, h.stream(runner.StderrFile))
	}
	dir, _ := filepath.EvalSymlinks(h.work(""))
	want := strings.Join([]string{strconv.Itoa(int(id.UID)), strconv.Itoa(int(id.GID)), dir, "staged app ran in " + runner.ProgramDir,
		"wrote its directory", "kept status", "planted nothing", "kept spec", "linked nothing"}, "\n") + "\n"
	if got := h.stream(runner.StdoutFile); got != want {
		t.Fatalf("stdout = %q\nwant     %q", got, want)
	}
	for _, f := range []string{"", "app.sh", "mine"} {
		if u := owner(t, h.work(f)); u != id.UID {
			t.Errorf("%s is owned by %d, want the program's user %d", h.work(f), u, id.UID)
		}
	}
	for _, f := range []string{runner.SpecFile, runner.StatusFile, runner.LogFileName(runner.StdoutFile, 0)} {
		if u := owner(t, filepath.Join(h.dir, f)); u != 0 {
			t.Errorf("%s is owned by %d, want the runner's user 0", f, u)
		}
	}
}
