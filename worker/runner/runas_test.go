package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// nobody is the unprivileged user the tests run programs (and runners)
// as. The test is skipped unless it runs as root, which starting a
// process as another user needs.
func nobody(t *testing.T) unitdir.Identity {
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
	return unitdir.Identity{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
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
		t.Fatalf("final = %+v\nstderr: %s", e, h.stream(unitdir.StderrFile))
	}
	dir, _ := filepath.EvalSymlinks(h.work(""))
	want := strings.Join([]string{strconv.Itoa(int(id.UID)), strconv.Itoa(int(id.GID)), dir, "staged app ran in " + unitdir.ProgramDir,
		"wrote its directory", "kept status", "planted nothing", "kept spec", "linked nothing"}, "\n") + "\n"
	if got := h.stream(unitdir.StdoutFile); got != want {
		t.Fatalf("stdout = %q\nwant     %q", got, want)
	}
	for _, f := range []string{"", "app.sh", "mine"} {
		if u := owner(t, h.work(f)); u != id.UID {
			t.Errorf("%s is owned by %d, want the program's user %d", h.work(f), u, id.UID)
		}
	}
	for _, f := range []string{unitdir.SpecFile, unitdir.StatusFile, unitdir.LogFileName(unitdir.StdoutFile, 0)} {
		if u := owner(t, filepath.Join(h.dir, f)); u != 0 {
			t.Errorf("%s is owned by %d, want the runner's user 0", f, u)
		}
	}
}

// The runner is not dumpable: a program of its own user (a worker not run
// as root runs programs as itself) cannot read its environment through
// /proc/PPID/environ, nor its memory or descriptors.
func TestRunnerIsNotDumpable(t *testing.T) {
	id := nobody(t)
	// The runner itself runs as nobody here, from a copy of the test
	// binary it can reach.
	bin := filepath.Join(t.TempDir(), "runner.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	reachable(t, filepath.Dir(bin))
	h := startRunnerAfter(t, unitdir.Spec{
		Argv: []string{"/bin/sh", "-c", `cat /proc/$PPID/environ || echo no environ; cat /proc/$PPID/mem || echo no mem; ls /proc/$PPID/fd || echo no fds`},
		Env:  []string{"PATH=/usr/bin:/bin"},
	}, func(h *harness) {
		reachable(t, h.dir)
		for _, p := range []string{h.dir, filepath.Join(h.dir, unitdir.SpecFile)} {
			if err := os.Chown(p, int(id.UID), int(id.GID)); err != nil {
				t.Fatal(err)
			}
		}
		h.cmd.Path, h.cmd.Args[0] = bin, bin
		h.cmd.Env = append(os.Environ(), "RUNNER_SECRET=s3cret-of-the-runner")
		h.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: id.Groups}}
	})
	if e := h.ended(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	if got, want := h.stream(unitdir.StdoutFile), "no environ\nno mem\nno fds\n"; got != want {
		t.Fatalf("the program read its runner's /proc: stdout = %q, want %q", got, want)
	}
}

// blobServer serves body as the upload sum to a request bearing token
// alone, 401 otherwise, and records each Authorization header.
func blobServer(t *testing.T, sum string, body []byte, token string, auth chan<- string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		if r.URL.Path != api.PathBlobs+"/"+sum || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// credentialPipe is the read end of a pipe holding cred, for the runner
// to inherit as descriptor 3.
func credentialPipe(t *testing.T, cred string) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, cred); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { r.Close() })
	return r
}

// The worker's token reaches the runner through an inherited descriptor,
// with nothing in the runner's environment: uploads are read with it, and
// the program does not inherit the descriptor.
func TestCredentialComesThroughADescriptor(t *testing.T) {
	const token = "worker-token-0123456789"
	body := []byte(appScript)
	digest := sha256.Sum256(body)
	sum := hex.EncodeToString(digest[:])
	auth := make(chan string, 10)
	srv := blobServer(t, sum, body, token, auth)
	a, err := model.NormalizeArtifact(model.Artifact{Upload: sum, Name: "app.sh"})
	if err != nil {
		t.Fatal(err)
	}
	h := startRunnerAfter(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `./app.sh; cat <&3 || echo no descriptor`},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Artifacts: []model.Artifact{a},
		Staging: &unitdir.Staging{CacheDir: filepath.Join(t.TempDir(), "cache"), Masters: []string{strings.TrimPrefix(srv.URL, "http://")},
			CredentialFD: 3},
	}, func(h *harness) {
		h.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DROVER_") })
		h.cmd.ExtraFiles = []*os.File{credentialPipe(t, token+"\n")}
	})
	if e := h.ended(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	if got := <-auth; got != "Bearer "+token {
		t.Fatalf("the upload was read with %q, want the worker's token", got)
	}
	if got, want := h.stream(unitdir.StdoutFile), "staged app ran in "+unitdir.ProgramDir+"\nno descriptor\n"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
}

// A credential of unitdir.MaxCredential bytes is read; one byte more ends
// the attempt ERROR, saying so, before anything runs.
func TestCredentialBound(t *testing.T) {
	for _, n := range []int{unitdir.MaxCredential, unitdir.MaxCredential + 1} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			h := startRunnerAfter(t, unitdir.Spec{
				Argv:    []string{"/bin/true"},
				Staging: &unitdir.Staging{CacheDir: filepath.Join(t.TempDir(), "cache"), CredentialFD: 3},
			}, func(h *harness) { h.cmd.ExtraFiles = []*os.File{credentialPipe(t, strings.Repeat("t", n))} })
			if n <= unitdir.MaxCredential {
				if e := h.ended(); e.State != model.DriverFinished {
					t.Fatalf("final = %+v, want FINISHED", e)
				}
				return
			}
			e := h.next(unitdir.EventFinal)
			<-h.exited
			if e.State != model.DriverError || e.Runs != 0 || e.Reason != "cannot read the worker's credential: longer than 4096 bytes" {
				t.Fatalf("final = %+v, want ERROR before any run naming the bound", e)
			}
		})
	}
}

// A file:// artifact of a program run as another user is read with that
// user's rights, not the root runner's: a root file of mode 0600, a file
// in a root directory of mode 0700 and the runner's own environment
// (/proc/self/environ, self being the runner) end the attempt FAILED
// before any run, naming the artifact and the user, with nothing staged;
// a file every user may read stages, as the program's.
func TestProgramCannotStageWhatItsUserMayNotRead(t *testing.T) {
	id := nobody(t)
	base := t.TempDir()
	reachable(t, base)
	write := func(path string, mode os.FileMode) string {
		if err := os.WriteFile(path, []byte(appScript), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	open := write(filepath.Join(base, "app.sh"), 0o755)
	secret := write(filepath.Join(base, "secret"), 0o600)
	if err := os.Mkdir(filepath.Join(base, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	hidden := write(filepath.Join(base, "private", "app.sh"), 0o755)
	run := func(t *testing.T, path string) *harness {
		a, err := model.NormalizeArtifact(model.Artifact{Source: "file://" + path})
		if err != nil {
			t.Fatal(err)
		}
		return startRunnerAfter(t, unitdir.Spec{
			Argv:      []string{"./" + a.Name},
			Env:       []string{"PATH=/usr/bin:/bin"},
			Artifacts: []model.Artifact{a},
			Staging:   &unitdir.Staging{CacheDir: filepath.Join(t.TempDir(), "cache")},
			RunAs:     &id,
		}, func(h *harness) { reachable(t, h.dir) })
	}
	for name, path := range map[string]string{"0600": secret, "under0700": hidden, "environ": "/proc/self/environ"} {
		t.Run(name, func(t *testing.T) {
			h := run(t, path)
			e := h.ended()
			if want := "fetch file://" + path + ": user nobody may not read it: permission denied"; e.State != model.DriverFailed || e.Runs != 0 || e.Reason != want {
				t.Fatalf("final = %+v\nwant FAILED before any run: %s", e, want)
			}
			if des, err := os.ReadDir(h.work("")); err != nil || len(des) != 0 {
				t.Fatalf("the program's directory holds %v (%v), want nothing", des, err)
			}
		})
	}
	h := run(t, open)
	if e := h.ended(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v\nstderr: %s", e, h.stream(unitdir.StderrFile))
	}
	if got, want := h.stream(unitdir.StdoutFile), "staged app ran in "+unitdir.ProgramDir+"\n"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
	if u := owner(t, h.work("app.sh")); u != id.UID {
		t.Fatalf("app.sh is owned by %d, want the program's user %d", u, id.UID)
	}
}
