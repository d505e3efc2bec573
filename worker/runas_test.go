package worker_test

import (
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
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

// A token a runner could not take (longer than unitdir.MaxCredential) is
// refused at start, in one line, before the work dir is made; one at the
// bound is taken.
func TestWorkerRefusesATokenLongerThanARunnerTakes(t *testing.T) {
	fm := newFakeMaster(t)
	newWorker(t, fm, func(c *worker.Config) { c.NodeToken = strings.Repeat("t", unitdir.MaxCredential) })
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB = "w1", []string{fm.addr()}, filepath.Join(t.TempDir(), "work"), 1, 1
	cfg.NodeToken = strings.Repeat("t", unitdir.MaxCredential+1)
	_, err := worker.New(cfg)
	if want := "the node token is 4097 bytes, more than the 4096 a runner takes"; err == nil || err.Error() != want {
		t.Fatalf("New: %v, want %q", err, want)
	}
	if _, err := os.Stat(cfg.WorkDir); !os.IsNotExist(err) {
		t.Fatalf("the refused worker made its work dir (%v)", err)
	}
}

// needRoot skips a test of running programs as other users, which only a
// worker run as root does, and returns the account of each name.
func needRoot(t *testing.T, names ...string) map[string]*user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only a worker run as root runs programs as other users")
	}
	out := map[string]*user.User{}
	for _, n := range names {
		u, err := user.Lookup(n)
		if err != nil {
			t.Skipf("no user %s on this machine: %v", n, err)
		}
		out[n] = u
	}
	return out
}

// idProgram prints who the program runs as and where: its uid, gid and
// groups, HOME, USER and LOGNAME, and its working directory.
var idProgram = []string{"/bin/sh", "-c", `echo "$(id -u) $(id -g) $(id -G) $HOME $USER $LOGNAME $(pwd)"`}

// ranAs is what idProgram prints when it runs as u in the unit directory
// dir.
func ranAs(u *user.User, dir string) string {
	return strings.Join([]string{u.Uid, u.Gid, u.Gid, u.HomeDir, u.Username, u.Username, filepath.Join(dir, unitdir.ProgramDir)}, " ") + "\n"
}

// finishedAs waits for attempt 1 of driver to finish and checks that it
// ran as u (what idProgram printed); it returns the attempt's directory.
func finishedAs(t *testing.T, fm *fakeMaster, cfg worker.Config, driver string, u *user.User) string {
	t.Helper()
	fm.waitReport(t, driver, 1, model.DriverFinished)
	dir := attemptPath(cfg, driver, 1, "")
	if got, want := readStream(t, dir, unitdir.StdoutFile), ranAs(u, dir); got != want {
		t.Errorf("%s printed %q, want %q", driver, got, want)
	}
	return dir
}

// A worker run as root runs a unit's program as --run-as (nobody by
// default) when the unit names no user, as a user of --allowed-users
// when it names one, and as root only with --allow-root; the program's
// directory is that user's, everything else in the unit's directory the
// worker's. A unit naming a user the worker does not allow ends FAILED
// with one line, its first report, having made nothing and run nothing,
// and is not restarted or rescheduled, supervised or bounded as it may be:
// it would fail the same way again.
func TestProgramsRunAsAllowedUsersOnly(t *testing.T) {
	us := needRoot(t, "nobody", "daemon", "bin")
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, func(c *worker.Config) { c.AllowedUsers = []string{"daemon"} })
	refused := func(d string, n int, user string) api.Assignment {
		return api.Assignment{DriverID: d, Attempt: n, Argv: idProgram, User: user, Supervise: true, MaxRestarts: 3, RescheduleAfter: 1}
	}
	const driverC, driverD, driverE = "driver-20260101000000-3", "driver-20260101000000-4", "driver-20260101000000-5"
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: idProgram},
		api.Assignment{DriverID: driverB, Attempt: 1, Argv: idProgram, User: "daemon"},
		refused(driverC, 1, "bin"), refused(driverD, 1, "root"), refused(driverE, 1, "no-such-user"))
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: idProgram, User: "bin"})
	for _, c := range []struct {
		driver string
		as     *user.User
	}{{driverA, us["nobody"]}, {driverB, us["daemon"]}} {
		dir := finishedAs(t, fm, cfg, c.driver, c.as)
		for _, f := range []struct {
			name string
			uid  string
			mode os.FileMode
		}{{"", "0", 0o711}, {unitdir.ProgramDir, c.as.Uid, 0o700}, {unitdir.SpecFile, "0", 0o600}, {unitdir.StatusFile, "0", 0o600}, {unitdir.LogFile, "0", 0o600}} {
			fi, err := os.Stat(filepath.Join(dir, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; fi.Mode().Perm() != f.mode || strconv.FormatUint(uint64(uid), 10) != f.uid {
				t.Errorf("%s/%s is %04o of uid %d, want %04o of uid %s", c.driver, f.name, fi.Mode().Perm(), uid, f.mode, f.uid)
			}
		}
	}
	for _, c := range []struct{ driver, reason string }{
		{driverC, "user bin is not in worker w1's --allowed-users"},
		{driverD, "user root is root (uid 0), which worker w1 runs programs as only with --allow-root"},
		{driverE, "user no-such-user is unknown on worker w1: user: unknown user no-such-user"},
	} {
		r, _ := fm.waitReport(t, c.driver, 1, model.DriverFailed)
		if r.Reason != c.reason || r.Runs != 0 || r.Reschedule || len(r.Failures) != 0 {
			t.Errorf("%s ended %+v, want FAILED after no run, not rescheduled, with %q", c.driver, r, c.reason)
		}
		if _, err := os.Stat(attemptPath(cfg, c.driver, 1, "")); !os.IsNotExist(err) {
			t.Errorf("a refused unit's directory was made (%v)", err)
		}
	}
	if r, _ := fm.waitExecReport(t, appA, 0, model.ExecFailed); r.Reason != "user bin is not in worker w1's --allowed-users" {
		t.Errorf("executor ended %+v, want FAILED for its user", r)
	}
	fm.settled(t, w)
	fm.set(func() {
		for _, r := range fm.reports() {
			if slices.Contains([]string{driverC, driverD, driverE}, r.DriverID) && r.State != model.DriverFailed {
				t.Errorf("a refused unit reported %+v", r)
			}
		}
	})
}

// With --allow-root, and root named in --allowed-users, a unit may ask
// for root; a unit naming no user still runs as --run-as. Neither alone
// lets it: --allow-root naming no user of uid 0 refuses to start
// (TestWorkerRefusesUsersItCannotRunAs), root named without it too, and
// a unit asking for a name of uid 0 that is not named is refused
// (TestRootNeedsAllowRootAndItsName).
func TestAllowRootLetsUnitsRunAsRoot(t *testing.T) {
	us := needRoot(t, "root", "nobody")
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.AllowRoot, c.AllowedUsers = true, []string{"root"} })
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: idProgram, User: "root"},
		api.Assignment{DriverID: driverB, Attempt: 1, Argv: idProgram})
	for _, c := range []struct {
		driver string
		as     *user.User
	}{{driverA, us["root"]}, {driverB, us["nobody"]}} {
		finishedAs(t, fm, cfg, c.driver, c.as)
	}
}

// A worker run as root refuses to start, in one line naming the flag and
// before it makes its work dir, when --run-as or --allowed-users names a
// user the machine does not know, or root without --allow-root, or a user
// who could not reach the work dir, and when --allow-root is given but
// neither names root, which would allow nothing.
func TestWorkerRefusesUsersItCannotRunAs(t *testing.T) {
	needRoot(t, "nobody")
	closed := filepath.Join(filepath.Dir(newWorkDir(t)), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil { // nobody cannot pass
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		tune    func(*worker.Config)
		workDir string
		want    string
	}{
		{"unknown run-as", func(c *worker.Config) { c.RunAs = "no-such-user" }, "", "--run-as no-such-user: user: unknown user no-such-user"},
		{"unknown allowed", func(c *worker.Config) { c.AllowedUsers = []string{"daemon", "no-such-user"} }, "", "--allowed-users no-such-user: user: unknown user no-such-user"},
		{"root run-as", func(c *worker.Config) { c.RunAs = "root" }, "", "--run-as root: root is root (uid 0); programs run as root only with --allow-root"},
		{"root allowed", func(c *worker.Config) { c.AllowedUsers = []string{"root"} }, "", "--allowed-users root: root is root (uid 0); programs run as root only with --allow-root"},
		{"allow-root naming no root", func(c *worker.Config) { c.AllowRoot, c.AllowedUsers = true, []string{"daemon"} }, "",
			"--allow-root: neither --run-as nobody nor --allowed-users names a user of uid 0, so it would let no program run as root; name root in --allowed-users (or --run-as), or drop --allow-root"},
		{"unreachable", nil, filepath.Join(closed, "work"), "--run-as nobody cannot reach the work dir " + filepath.Join(closed, "work") + ": " + closed +
			" is mode 0700, owned by 0:0; let every user through it (chmod o+x) or choose another work dir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := worker.DefaultConfig()
			cfg.ID, cfg.Masters, cfg.Cores, cfg.MemoryMB = "w1", []string{"127.0.0.1:1"}, 1, 1
			cfg.WorkDir = newWorkDir(t)
			if c.workDir != "" {
				cfg.WorkDir = c.workDir
			}
			if c.tune != nil {
				c.tune(&cfg)
			}
			if _, err := worker.New(cfg); err == nil || err.Error() != c.want {
				t.Fatalf("New: %v\nwant %s", err, c.want)
			}
			if _, err := os.Stat(cfg.WorkDir); !os.IsNotExist(err) {
				t.Fatalf("the refused worker made its work dir (%v)", err)
			}
		})
	}
}

// A program gets of its worker's environment only what --env-allow
// names, by default PATH, HOME, LANG, LC_*, TZ and TMPDIR, and never the
// worker's DROVER_ variables, even with "*" or "DROVER_*" in the list;
// HOME, USER and LOGNAME are its own user's; what the submission sets
// comes on top.
func TestProgramGetsOnlyTheAllowedEnvironment(t *testing.T) {
	for k, v := range map[string]string{"DROVER_OPERATOR_TOKEN": "operator-secret-0123456789", "DROVER_GOSSIP_KEY": "gossip-secret",
		"AWS_SECRET_ACCESS_KEY": "aws-secret", "MY_SETTING": "mine", "MY_OTHER": "other", "TZ": "Europe/Paris", "LC_ALL": "C.UTF-8", "LANG": "C"} {
		t.Setenv(k, v)
	}
	program := []string{"/usr/bin/env"}
	for _, c := range []struct {
		name  string
		allow []string
		env   map[string]string
		want  []string
		never []string
	}{
		{"default", nil, nil, []string{"TZ=Europe/Paris", "LC_ALL=C.UTF-8", "LANG=C", "PATH=" + os.Getenv("PATH")},
			[]string{"AWS_SECRET_ACCESS_KEY", "MY_SETTING", "DROVER_OPERATOR_TOKEN", "DROVER_GOSSIP_KEY", "secret"}},
		{"prefix", []string{"MY_*"}, map[string]string{"HOME": "/elsewhere"}, []string{"MY_SETTING=mine", "MY_OTHER=other", "HOME=/elsewhere"},
			[]string{"PATH=", "TZ=", "AWS_SECRET_ACCESS_KEY", "DROVER_OPERATOR_TOKEN", "secret"}},
		{"all", []string{"*", "DROVER_*"}, nil, []string{"AWS_SECRET_ACCESS_KEY=aws-secret", "MY_SETTING=mine", "TZ=Europe/Paris"},
			[]string{"DROVER_OPERATOR_TOKEN", "DROVER_GOSSIP_KEY", "operator-secret", "gossip-secret"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fm := newFakeMaster(t)
			_, cfg := newWorker(t, fm, func(cfg *worker.Config) {
				if c.allow != nil {
					cfg.EnvAllow = c.allow
				}
			})
			fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: program, Env: c.env})
			fm.waitReport(t, driverA, 1, model.DriverFinished)
			got := strings.Split(readStream(t, attemptPath(cfg, driverA, 1, ""), unitdir.StdoutFile), "\n")
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("the program's environment lacks %s: %q", w, got)
				}
			}
			for _, n := range c.never {
				if slices.ContainsFunc(got, func(kv string) bool { return strings.Contains(kv, n) }) {
					t.Errorf("the program's environment holds %s: %q", n, got)
				}
			}
			if os.Geteuid() == 0 && c.env == nil {
				u := needRoot(t, "nobody")["nobody"]
				for _, w := range []string{"HOME=" + u.HomeDir, "USER=nobody", "LOGNAME=nobody"} {
					if !slices.Contains(got, w) {
						t.Errorf("a program run as nobody lacks %s: %q", w, got)
					}
				}
			}
		})
	}
}

// An --env-allow entry that is neither a variable name nor a prefix
// ending in '*' is refused at start.
func TestWorkerRefusesABadEnvAllow(t *testing.T) {
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB = "w1", []string{"127.0.0.1:1"}, filepath.Join(t.TempDir(), "work"), 1, 1
	cfg.EnvAllow = []string{"PATH", "LC_*", "A-B"}
	if _, err := worker.New(cfg); err == nil || err.Error() != `--env-allow "A-B": want a variable name, or a prefix of one ending in *` {
		t.Fatalf("New: %v", err)
	}
}
