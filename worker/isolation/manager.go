package isolation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/containerd/cgroups/v3"
)

// DefaultRoot is where Linux mounts the cgroup file systems.
const DefaultRoot = "/sys/fs/cgroup"

// parentDir is the directory under the worker's own cgroup that holds the
// cgroups of every worker started there.
const parentDir = "drover"

// supervisorLeaf is the name of the leaf cgroup a worker may run in on v2
// (systemd's DelegateSubgroup=supervisor): v2 lets no cgroup hold both
// processes and children with controllers, so a worker whose unit
// delegates it a cgroup runs in a leaf of it, and its units' cgroups go
// beside that leaf.
const supervisorLeaf = "supervisor"

// Config says where a worker's cgroups go.
type Config struct {
	// Name is the worker's cgroup, under drover/ (WorkerName).
	Name string
	// Root is where the cgroup file systems are mounted (default
	// DefaultRoot): the unified hierarchy for v2, the directory of the
	// controllers' mounts for v1, as /proc/self/mountinfo shows.
	Root string
}

// Manager makes a worker's cgroups, one per unit, and removes those of
// units that are gone.
type Manager struct {
	ref Ref
}

// New finds the cgroup hierarchy, checks that it has the controllers the
// limits need, and creates the worker's cgroup (drover/NAME under the
// worker's own). Its error is the one-line reason the worker cannot
// isolate its units (no cgroup file system, a missing controller,
// permission denied when not root, a read-only mount), which
// --isolation auto logs and --isolation cgroups exits with.
func New(cfg Config) (*Manager, error) {
	return newManager(cfg, true)
}

// newManager is New; without needControllers it makes cgroups that limit
// nothing, for tests on a hierarchy that has no controllers (the empty v2
// mount of a hybrid host).
func newManager(cfg Config, needControllers bool) (*Manager, error) {
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	version, err := versionAt(cfg.Root)
	if err != nil {
		return nil, err
	}
	ref := Ref{Version: version, Root: cfg.Root}
	switch version {
	case 2:
		_, own, perr := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
		if perr != nil {
			return nil, fmt.Errorf("read the worker's own cgroup: %w", perr)
		}
		if filepath.Base(own) == supervisorLeaf {
			own = filepath.Dir(own)
		}
		ref.Path = filepath.Join(own, parentDir, cfg.Name)
		err = v2Prepare(ref, needControllers)
	default:
		ref.Paths, err = v1Paths(cfg.Root, filepath.Join(parentDir, cfg.Name), needControllers)
		if err == nil {
			err = v1Prepare(ref)
		}
	}
	if err != nil {
		return nil, err
	}
	return &Manager{ref: ref}, nil
}

// versionAt says which cgroup version root holds: 2 when it is a cgroup2
// mount, 1 when it holds v1 controller mounts (a hybrid host's empty v2
// mount at root/unified has no controllers, so v1 it is).
func versionAt(root string) (int, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, fmt.Errorf("no cgroup file system at %s: %w", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return 2, nil
	}
	if err := unix.Statfs(filepath.Join(root, string(ctrlMemory)), &st); err == nil && st.Type == unix.CGROUP_SUPER_MAGIC {
		return 1, nil
	}
	return 0, fmt.Errorf("no cgroup file system at %s (neither a cgroup2 mount nor v1 controllers)", root)
}

// String is where the worker's cgroups are, for its log.
func (m *Manager) String() string {
	return fmt.Sprintf("cgroup v%d %s", m.ref.Version, m.ref.String())
}

// Version is the cgroup version in use, 1 or 2.
func (m *Manager) Version() int { return m.ref.Version }

// Ref names the cgroup unit would have under this worker's, made or not.
func (m *Manager) Ref(unit string) Ref {
	r := Ref{Version: m.ref.Version, Root: m.ref.Root}
	if r.Version == 2 {
		r.Path = filepath.Join(m.ref.Path, unit)
		return r
	}
	r.Paths = make(map[string]string, len(m.ref.Paths))
	for c, p := range m.ref.Paths {
		r.Paths[c] = filepath.Join(p, unit)
	}
	return r
}

// Create makes unit's cgroup with limits l and returns its Ref. A unit's
// cgroup is made once: one left by an earlier unit of the same name (an
// attempt that cannot run twice) is refused. A failure leaves nothing
// behind.
func (m *Manager) Create(unit string, l Limits) (Ref, error) {
	if err := checkName(unit); err != nil {
		return Ref{}, err
	}
	if err := l.validate(); err != nil {
		return Ref{}, err
	}
	r := m.Ref(unit)
	r.Limits = l
	if _, err := os.Stat(r.dirs()[0]); err == nil {
		return Ref{}, fmt.Errorf("cgroup %s exists already", r)
	}
	var err error
	if r.Version == 2 {
		err = v2Create(r)
	} else {
		err = v1Create(r)
	}
	if err != nil {
		// Whatever part was made is empty: nothing ran in it.
		for _, d := range r.dirs() {
			_ = os.Remove(d)
		}
		return Ref{}, explain("create cgroup "+r.String(), err)
	}
	return r, nil
}

// Units lists the names of the cgroups under this worker's.
func (m *Manager) Units() ([]string, error) {
	var names []string
	for _, d := range m.ref.dirs() {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Sweep kills and removes the cgroups under this worker's whose names
// keep does not hold: those of units that are gone, whose programs must
// not outlive them. It returns the names it removed; a cgroup it could
// not remove is in the error, and the others are still removed.
func (m *Manager) Sweep(keep func(unit string) bool, timeout time.Duration) ([]string, error) {
	names, err := m.Units()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if keep(n) {
			continue
		}
		if err := Destroy(m.Ref(n), timeout); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// Remove removes the worker's cgroup, once no unit's is left in it: for a
// worker that stops for good. A cgroup still holding units stays, with
// an error.
func (m *Manager) Remove() error {
	var errs []error
	for _, d := range m.ref.dirs() {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dirs are the cgroup's directories: one on v2, one per controller on v1,
// the memory controller's first.
func (r Ref) dirs() []string {
	if r.Version == 2 {
		return []string{filepath.Join(r.Root, r.Path)}
	}
	out := make([]string, 0, len(r.Paths))
	for _, c := range v1Controllers {
		if p, ok := r.Paths[string(c.name)]; ok {
			out = append(out, filepath.Join(r.Root, string(c.name), p))
		}
	}
	return out
}

// exists says whether any of the cgroup's directories is there.
func (r Ref) exists() bool {
	for _, d := range r.dirs() {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// readControllers returns the controllers listed in a cgroup.controllers
// or cgroup.subtree_control file.
func readControllers(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}
