package isolation

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// v2Needed are the controllers a unit's limits use on v2.
var v2Needed = []string{"memory", "cpu", "pids"}

// v2Prepare creates the worker's cgroup at r and, when needControllers,
// enables the controllers for its children in it and every ancestor
// below the root. The kernel refuses that in a cgroup that holds
// processes (the no-internal-processes rule), which is the error a
// worker started in a shared cgroup gets. The controllers are checked
// before anything is made, so that a worker that cannot isolate leaves
// no cgroup behind.
func v2Prepare(r Ref, needControllers bool) error {
	dir := filepath.Join(r.Root, r.Path)
	own := filepath.Dir(filepath.Dir(dir))
	if needControllers {
		have, err := readControllers(filepath.Join(own, "cgroup.controllers"))
		if err != nil {
			return err
		}
		for _, c := range v2Needed {
			if !slices.Contains(have, c) {
				return fmt.Errorf("no %s controller in cgroup %s (it has %q): enable it in the parent's cgroup.subtree_control (systemd: Delegate=yes)",
					c, filepath.Dir(filepath.Dir(r.Path)), have)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return explain("create cgroup "+r.Path, err)
	}
	if !needControllers {
		return nil
	}
	// The children of the worker's cgroup are the units: enabling the
	// controllers for a child enables them on the whole chain above it.
	probe, err := cgroup2.Load(filepath.Join(r.Path, "x"), cgroup2.WithMountpoint(r.Root))
	if err != nil {
		return err
	}
	toggleErr := probe.ToggleControllers(v2Needed, cgroup2.Enable)
	enabled, err := readControllers(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	for _, c := range v2Needed {
		if slices.Contains(enabled, c) {
			continue
		}
		if procs, _ := os.ReadFile(filepath.Join(own, "cgroup.procs")); len(procs) > 0 {
			return fmt.Errorf("cannot enable the %s controller under cgroup %s: it holds processes; run the worker in a leaf named %s of a cgroup of its own (systemd: Delegate=yes, DelegateSubgroup=%s)",
				c, filepath.Dir(filepath.Dir(r.Path)), supervisorLeaf, supervisorLeaf)
		}
		if toggleErr == nil {
			toggleErr = fmt.Errorf("%s not enabled", c)
		}
		return explain("enable controllers under cgroup "+r.Path, toggleErr)
	}
	return nil
}

// v2Create makes a unit's cgroup with its limits. memory.oom.group makes
// an out-of-memory kill end every process of the unit, not only the
// largest, so that no half of a program runs on; swap is off, so the
// memory limit is the unit's whole footprint.
func v2Create(r Ref) error {
	res := &cgroup2.Resources{}
	l := r.Limits
	if l.MemoryMB > 0 {
		limit := l.MemoryMB << 20
		oomGroup := true
		res.Memory = &cgroup2.Memory{Max: &limit, OOMGroup: &oomGroup}
	}
	if l.Cores > 0 {
		quota := int64(l.Cores) * cpuPeriodMicros
		period := uint64(cpuPeriodMicros)
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
	}
	if l.Pids > 0 {
		res.Pids = &cgroup2.Pids{Max: l.Pids}
	}
	if _, err := cgroup2.NewManager(r.Root, r.Path, res); err != nil {
		return err
	}
	if res.Memory == nil {
		return nil
	}
	// memory.swap.max exists only where the kernel accounts swap.
	swap := filepath.Join(r.Root, r.Path, "memory.swap.max")
	if _, err := os.Stat(swap); err == nil {
		return os.WriteFile(swap, []byte("0"), 0)
	}
	return nil
}

type v2 struct {
	dir string
	m   *cgroup2.Manager
}

func v2Open(r Ref) (backend, error) {
	m, err := cgroup2.Load(r.Path, cgroup2.WithMountpoint(r.Root))
	if err != nil {
		return nil, err
	}
	return &v2{dir: filepath.Join(r.Root, r.Path), m: m}, nil
}

func (c *v2) start(cmd *exec.Cmd) error {
	d, err := os.Open(c.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(d.Fd())
	return cmd.Start()
}

func (c *v2) procs() ([]int, error) {
	pids, err := c.m.Procs(true)
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, err
}

func (c *v2) kill() error { return c.m.Kill() }

func (c *v2) usage() (Usage, error) {
	st, err := c.m.StatFiltered(cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatMemoryEvents)
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	if st.CPU != nil {
		u.CPUMicros = st.CPU.UsageUsec
	}
	if st.Memory != nil {
		u.MemoryPeakBytes = st.Memory.MaxUsage
	}
	if st.MemoryEvents != nil {
		u.OOMKills = st.MemoryEvents.OomKill
	}
	return u, nil
}

func (c *v2) remove() error { return c.m.Delete() }
