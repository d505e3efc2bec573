package worker

import (
	"cmp"
	"os/user"
	"testing"

	"github.com/drover-project/drover/worker/unitdir"
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

// A worker run as root runs a unit as a user of uid 0 only with
// --allow-root and when that very name is --run-as or in
// --allowed-users: --allow-root alone grants no submitter root, and a
// second name of uid 0 (toor here, an alias of root in a made-up user
// database) is refused unless it is named itself, whichever other name
// of uid 0 is.
func TestRootNeedsAllowRootAndItsName(t *testing.T) {
	db := map[string]account{}
	for _, a := range []account{{Identity: unitdir.Identity{Name: "root"}}, {Identity: unitdir.Identity{Name: "toor"}},
		{Identity: unitdir.Identity{Name: "nobody", UID: 65534, GID: 65534}}, {Identity: unitdir.Identity{Name: "alice", UID: 1000, GID: 1000}}} {
		db[a.Name] = a
	}
	lookup := func(name string) (account, error) {
		if a, ok := db[name]; ok {
			return a, nil
		}
		return account{}, user.UnknownUserError(name)
	}
	notNamed := func(n string) string {
		return "user " + n + " is root (uid 0), which worker w1 runs programs as only when --run-as or --allowed-users names " + n
	}
	for _, c := range []struct {
		name      string
		runAs     string
		allowed   []string
		allowRoot bool
		// want is the reason a unit asking for each name is refused,
		// "" for one it runs as.
		want map[string]string
	}{
		{"allow-root, root not named", "nobody", []string{"alice"}, true, map[string]string{
			"": "", "nobody": "", "alice": "", "root": notNamed("root"), "toor": notNamed("toor")}},
		{"root allowed", "nobody", []string{"root"}, true, map[string]string{
			"": "", "root": "", "toor": notNamed("toor"), "alice": "user alice is not in worker w1's --allowed-users"}},
		{"alias allowed", "nobody", []string{"toor"}, true, map[string]string{"toor": "", "root": notNamed("root")}},
		{"run as root", "root", nil, true, map[string]string{"": "", "root": "", "toor": notNamed("toor"),
			"nobody": "user nobody is not in worker w1's --allowed-users"}},
		{"root named without allow-root", "nobody", []string{"root", "alice"}, false, map[string]string{
			"alice": "", "root": "user root is root (uid 0), which worker w1 runs programs as only with --allow-root",
			"toor": "user toor is root (uid 0), which worker w1 runs programs as only with --allow-root"}},
	} {
		us := &users{root: true, runAs: db[c.runAs], allowed: c.allowed, allowRoot: c.allowRoot, lookup: lookup}
		for name, want := range c.want {
			a, refused := us.forUnit(name, "w1")
			if refused != want {
				t.Errorf("%s: a unit asking for %q: refused %q, want %q", c.name, name, refused, want)
				continue
			}
			wantName := cmp.Or(name, c.runAs)
			if want == "" && (a.Name != wantName || a.UID != db[wantName].UID) {
				t.Errorf("%s: a unit asking for %q runs as %+v, want %s", c.name, name, a, wantName)
			}
		}
	}
}
