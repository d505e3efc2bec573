package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/drover-project/drover/worker/unitdir"
)

// DefaultRunAs is the user a worker run as root runs programs as when
// their unit names none (Config.RunAs): Nomad's exec driver's default,
// a user that owns nothing of the worker's.
const DefaultRunAs = "nobody"

// account is a user a program may run as, as the passwd and group
// databases give it (os/user).
type account struct {
	unitdir.Identity
	// home is the user's home directory, the program's $HOME.
	home string
}

// lookupAccount resolves name to its account: the user's uid, primary
// gid, supplementary groups and home. Numeric names are looked up as
// names, never taken for IDs.
func lookupAccount(name string) (account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return account{}, err
	}
	return accountOf(u)
}

// accountOf is the account of u, looked up already.
func accountOf(u *user.User) (account, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("user %s has uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("user %s has gid %q: %w", u.Username, u.Gid, err)
	}
	a := account{Identity: unitdir.Identity{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}, home: u.HomeDir}
	gids, err := u.GroupIds()
	if err != nil {
		return account{}, fmt.Errorf("groups of user %s: %w", u.Username, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return account{}, fmt.Errorf("user %s is in group %q: %w", u.Username, g, err)
		}
		if !slices.Contains(a.Groups, uint32(n)) {
			a.Groups = append(a.Groups, uint32(n))
		}
	}
	return a, nil
}

// users is who a worker runs programs as. A worker run as root runs each
// as the user its unit asks for, when allowed, else as runAs; a worker
// run as anyone else runs every program as itself (self), as Spark's
// worker does, and never as another user, which it could not become.
type users struct {
	// root says the worker runs as root.
	root bool
	// self is the account of a worker not run as root; its uid alone,
	// as its name, when the user databases do not know it.
	self account
	// runAs is the account of Config.RunAs.
	runAs account
	// allowed are the names of Config.AllowedUsers: a unit may ask for
	// these users besides runAs. allowRoot is Config.AllowRoot, without
	// which none of them may be of uid 0.
	allowed   []string
	allowRoot bool
	// lookup resolves a user's name to its account: lookupAccount, the
	// machine's user databases.
	lookup func(name string) (account, error)
}

// newUsers resolves the users of cfg for a worker whose process has uid
// euid, and refuses, naming the flag, a user the machine does not know,
// root without --allow-root, --allow-root when no user of uid 0 is named
// (it would allow nothing), and for a worker not run as root any user
// but itself. Each user must be able to reach the work dir.
func newUsers(cfg Config, euid int) (*users, error) {
	us := &users{root: euid == 0, allowRoot: cfg.AllowRoot, lookup: lookupAccount}
	if !us.root {
		if self, err := user.LookupId(strconv.Itoa(euid)); err == nil {
			if us.self, err = accountOf(self); err != nil {
				return nil, err
			}
		} else {
			// A uid without a passwd entry (a container's) runs
			// programs as itself all the same.
			us.self = account{Identity: unitdir.Identity{Name: strconv.Itoa(euid), UID: uint32(euid)}}
		}
		for _, n := range append([]string{cfg.RunAs}, cfg.AllowedUsers...) {
			if n != "" && n != us.self.Name {
				return nil, fmt.Errorf("--run-as and --allowed-users name %s, but the worker runs as %s (uid %d): only a worker run as root runs programs as another user",
					n, us.self.Name, euid)
			}
		}
		us.runAs = us.self
		return us, nil
	}
	name := cfg.RunAs
	if name == "" {
		name = DefaultRunAs
	}
	var err error
	if us.runAs, err = us.check("--run-as", name); err != nil {
		return nil, err
	}
	if err := us.reaches("--run-as", us.runAs, cfg.WorkDir); err != nil {
		return nil, err
	}
	rootNamed := us.runAs.UID == 0
	for _, n := range cfg.AllowedUsers {
		a, err := us.check("--allowed-users", n)
		if err == nil {
			err = us.reaches("--allowed-users", a, cfg.WorkDir)
		}
		if err != nil {
			return nil, err
		}
		us.allowed = append(us.allowed, n)
		rootNamed = rootNamed || a.UID == 0
	}
	if us.allowRoot && !rootNamed {
		return nil, fmt.Errorf("--allow-root: neither --run-as %s nor --allowed-users names a user of uid 0, so it would let no program run as root; name root in --allowed-users (or --run-as), or drop --allow-root", name)
	}
	return us, nil
}

// check resolves name, given by flag, for a worker run as root: the user
// must exist, and be root only with --allow-root.
func (us *users) check(flag, name string) (account, error) {
	a, err := us.lookup(name)
	if err != nil {
		return a, fmt.Errorf("%s %s: %w", flag, name, err)
	}
	if a.UID == 0 && !us.allowRoot {
		return a, fmt.Errorf("%s %s: %s is root (uid 0); programs run as root only with --allow-root", flag, name, name)
	}
	return a, nil
}

// forUnit is the account a unit's program runs as, for a unit that asks
// for name ("" for the worker's default), on worker id; or, when the
// worker does not run it as that user, the one-line reason. A name is
// allowed when it is runAs's or in allowed, itself: another name of the
// same uid is not, so an alias of root (a second passwd entry of uid 0)
// is refused unless named as root is. Whether the account is root is
// its resolved uid's to say, whatever its name, and root needs
// --allow-root besides being named. The name is resolved again now: the
// user databases may have changed since the worker started.
func (us *users) forUnit(name, id string) (account, string) {
	switch {
	case !us.root && (name == "" || name == us.self.Name):
		return us.self, ""
	case !us.root:
		return account{}, fmt.Sprintf("user %s: worker %s does not run as root, and runs programs as itself (%s) only", name, id, us.self.Name)
	case name == "":
		name = us.runAs.Name
	}
	a, err := us.lookup(name)
	named := name == us.runAs.Name || slices.Contains(us.allowed, name)
	switch {
	case err != nil:
		return a, fmt.Sprintf("user %s is unknown on worker %s: %v", name, id, err)
	case a.UID == 0 && !us.allowRoot:
		return a, fmt.Sprintf("user %s is root (uid 0), which worker %s runs programs as only with --allow-root", name, id)
	case a.UID == 0 && !named:
		return a, fmt.Sprintf("user %s is root (uid 0), which worker %s runs programs as only when --run-as or --allowed-users names %s", name, id, name)
	case !named:
		return a, fmt.Sprintf("user %s is not in worker %s's --allowed-users", name, id)
	}
	return a, ""
}

// identity is what a runner needs to run a program as a: nil when the
// worker is not root, whose runners run programs as themselves.
func (us *users) identity(a account) *unitdir.Identity {
	if !us.root {
		return nil
	}
	id := a.Identity
	return &id
}

// reaches refuses a, given by flag, when it cannot search every directory
// above the work dir that exists, naming the first from the root: its
// programs could not reach their working directories. The work dir
// itself and what the worker makes in it are the worker's to open
// (dirMode).
func (us *users) reaches(flag string, a account, workDir string) error {
	if a.UID == 0 {
		return nil
	}
	var above []string
	for d := workDir; d != filepath.Dir(d); {
		d = filepath.Dir(d)
		above = append(above, d)
	}
	slices.Reverse(above)
	for _, d := range above {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("%s %s: %w", flag, a.Name, err)
		case !searchable(fi, a):
			st := fi.Sys().(*syscall.Stat_t)
			return fmt.Errorf("%s %s cannot reach the work dir %s: %s is mode %04o, owned by %d:%d; let every user through it (chmod o+x) or choose another work dir",
				flag, a.Name, workDir, d, fi.Mode().Perm(), st.Uid, st.Gid)
		}
	}
	return nil
}

// searchable says whether a may search the directory fi describes, by
// its mode bits: the owner's when a owns it, else the group's when a is
// in its group, else everyone's.
func searchable(fi fs.FileInfo, a account) bool {
	st := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode().Perm()
	switch {
	case st.Uid == a.UID:
		return mode&0o100 != 0
	case st.Gid == a.GID || slices.Contains(a.Groups, st.Gid):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

// dirMode is the mode of the work dir and of the directories the worker
// makes in it for units: 0711 where programs run as another user, who must
// pass through them to their working directories (and read
// unitdir.ResourcesFile) but has no business listing them; 0700 where
// programs run as the worker's own user.
func (us *users) dirMode() fs.FileMode {
	if us.root {
		return 0o711
	}
	return 0o700
}

// makeDirs makes dir and every missing directory above it, each of mode
// whatever the umask, and gives dir itself mode if it existed.
func makeDirs(dir string, mode fs.FileMode) error {
	var made []string
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	for _, d := range append(made, dir) {
		if err := os.Chmod(d, mode); err != nil {
			return err
		}
	}
	return nil
}
