package worker

import (
	"os/user"
	"testing"
)

// A worker not run as root (here one of uid 1) runs every program as
// itself, as before: it refuses to start when --run-as or
// --allowed-users names anyone else, and refuses a unit asking for
// another user, while a unit naming itself, or nobody, runs as itself
// with no identity for the runner to take on.
func TestWorkerNotRunAsRootRunsProgramsAsItself(t *testing.T) {
	self, err := user.LookupId("1")
	if err != nil {
		t.Skipf("no user of uid 1: %v", err)
	}
	cfg := DefaultConfig()
	cfg.ID, cfg.WorkDir = "w1", t.TempDir()
	for _, c := range []struct {
		runAs   string
		allowed []string
	}{{"nobody", nil}, {"", []string{self.Username, "nobody"}}} {
		cfg.RunAs, cfg.AllowedUsers = c.runAs, c.allowed
		want := "--run-as and --allowed-users name nobody, but the worker runs as " + self.Username +
			" (uid 1): only a worker run as root runs programs as another user"
		if _, err := newUsers(cfg, 1); err == nil || err.Error() != want {
			t.Errorf("run-as %q, allowed %q: %v\nwant %s", c.runAs, c.allowed, err, want)
		}
	}
	cfg.RunAs, cfg.AllowedUsers = self.Username, []string{self.Username}
	us, err := newUsers(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", self.Username} {
		a, refused := us.forUnit(name, "w1")
		if refused != "" || a.Name != self.Username || a.UID != 1 || us.identity(a) != nil {
			t.Errorf("a unit asking for %q runs as %+v (identity %v), refused %q; want the worker's own user", name, a, us.identity(a), refused)
		}
	}
	want := "user nobody: worker w1 does not run as root, and runs programs as itself (" + self.Username + ") only"
	if _, refused := us.forUnit("nobody", "w1"); refused != want {
		t.Errorf("a unit asking for nobody: %q, want %q", refused, want)
	}
	if us.dirMode() != 0o700 {
		t.Errorf("a worker not run as root makes directories %04o, want 0700", us.dirMode())
	}
}
