package isolation

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Controller is a v1 controller a unit's cgroup joins.
type v1Controller struct {
	name cgroup1.Name
	// required: without it the worker cannot isolate (the limits, or
	// the kill, need it).
	required bool
	make     func(root string) cgroup1.Subsystem
}

// ctrlMemory names the memory controller, whose path stands for the
// cgroup in messages.
const ctrlMemory = cgroup1.Memory

// v1Controllers are the controllers of a unit's cgroup on v1, the memory
// controller first. cpuacct only measures (the CPU time in Usage); the
// freezer makes the kill race-free.
var v1Controllers = []v1Controller{
	{cgroup1.Memory, true, func(root string) cgroup1.Subsystem { return cgroup1.NewMemory(root, cgroup1.OptionalSwap()) }},
	{cgroup1.Cpu, true, func(root string) cgroup1.Subsystem { return cgroup1.NewCpu(root) }},
	{cgroup1.Pids, true, func(root string) cgroup1.Subsystem { return cgroup1.NewPids(root) }},
	{cgroup1.Freezer, true, func(root string) cgroup1.Subsystem { return cgroup1.NewFreezer(root) }},
	{cgroup1.Cpuacct, false, func(root string) cgroup1.Subsystem { return cgroup1.NewCpuacct(root) }},
}

func v1Known(name string) bool {
	return slices.ContainsFunc(v1Controllers, func(c v1Controller) bool { return string(c.name) == name })
}

// freezeTimeout bounds the wait for a v1 freezer to report FROZEN: a task
// in uninterruptible sleep holds it in FREEZING, and the kill goes on
// regardless (SIGKILL then takes effect at the thaw).
const freezeTimeout = time.Second

// v1Paths maps each controller the machine mounts under root to suffix
// below the worker's own cgroup in that hierarchy (containerd's
// NestedPath, which also corrects for a container's mount roots).
func v1Paths(root, suffix string, needControllers bool) (map[string]string, error) {
	nested := cgroup1.NestedPath(suffix)
	paths := map[string]string{}
	for _, c := range v1Controllers {
		_, mounted := os.Stat(filepath.Join(root, string(c.name), "cgroup.procs"))
		p, err := nested(c.name)
		if mounted == nil && err == nil {
			paths[string(c.name)] = p
			continue
		}
		if c.required && needControllers {
			return nil, fmt.Errorf("no %s controller: cgroup v1 without a %s hierarchy at %s", c.name, c.name, filepath.Join(root, string(c.name)))
		}
		if errors.Is(err, cgroup1.ErrControllerNotActive) || mounted != nil {
			continue
		}
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no cgroup v1 controller mounted under %s", root)
	}
	return paths, nil
}

// v1Prepare creates the worker's cgroup in every hierarchy.
func v1Prepare(r Ref) error {
	for _, d := range r.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return explain("create cgroup "+d, err)
		}
	}
	return nil
}

// v1Load is what containerd's cgroup1 needs to act on r: the path in
// each hierarchy and the controllers.
func v1Load(r Ref) (cgroup1.Path, cgroup1.InitOpts) {
	path := func(n cgroup1.Name) (string, error) {
		if p, ok := r.Paths[string(n)]; ok {
			return p, nil
		}
		return "", cgroup1.ErrControllerNotActive
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		var subs []cgroup1.Subsystem
		for _, c := range v1Controllers {
			if _, ok := r.Paths[string(c.name)]; ok {
				subs = append(subs, c.make(r.Root))
			}
		}
		return subs, nil
	}
	return path, cgroup1.WithHierarchy(hierarchy)
}

// v1Create makes a unit's cgroup in every hierarchy with its limits. The
// memory limit covers swap too where the kernel accounts it
// (memory.memsw), so the limit is the unit's whole footprint.
func v1Create(r Ref) error {
	res := &specs.LinuxResources{}
	l := r.Limits
	if l.MemoryMB > 0 {
		limit := l.MemoryMB << 20
		res.Memory = &specs.LinuxMemory{Limit: &limit}
		if p, ok := r.Paths[string(cgroup1.Memory)]; ok {
			if _, err := os.Stat(filepath.Join(r.Root, string(cgroup1.Memory), filepath.Dir(p), "memory.memsw.limit_in_bytes")); err == nil {
				res.Memory.Swap = &limit
			}
		}
	}
	if l.Cores > 0 {
		quota := int64(l.Cores) * cpuPeriodMicros
		period := uint64(cpuPeriodMicros)
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	if l.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &l.Pids}
	}
	path, hierarchy := v1Load(r)
	_, err := cgroup1.New(path, res, hierarchy)
	return err
}

type v1 struct {
	ref Ref
	cg  cgroup1.Cgroup
}

func v1Open(r Ref) (backend, error) {
	path, hierarchy := v1Load(r)
	cg, err := cgroup1.Load(path, hierarchy)
	if err != nil {
		return nil, err
	}
	return &v1{ref: r, cg: cg}, nil
}

// start moves the calling thread into the cgroup, forks the program from
// it and moves the thread back: on v1 a thread may sit in a cgroup of its
// own, and a child starts in its parent thread's. The thread is locked to
// the goroutine meanwhile, so that no other goroutine runs in the unit's
// cgroups. It must be out again before start returns: the kernel lists a
// process in every cgroup one of its threads is in, and a kill of the unit
// would reach the whole runner. The move back costs little, coming right
// after the first move (which waits for an RCU grace period of the
// kernel's cgroup lock). A thread that cannot be moved back stays locked
// and ends with the goroutine, and procs never lists this process. The
// runner's memory stays charged to the runner's cgroup throughout, since
// memory follows the owner of the address space, its main thread.
func (c *v1) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		task := cgroup1.Process{Pid: unix.Gettid()}
		_, hierarchy := v1Load(c.ref)
		home, err := cgroup1.Load(cgroup1.PidPath(task.Pid), hierarchy)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("find the starting thread's cgroups: %w", err)
			return
		}
		err = c.cg.AddTask(task)
		if err == nil {
			err = cmd.Start()
		}
		if home.AddTask(task) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// procs lists the processes in the cgroup, never this one: a thread of
// it in the cgroup is one start has not moved back.
func (c *v1) procs() ([]int, error) {
	ps, err := c.cg.Processes(cgroup1.Freezer, true)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		if p.Pid != self && !slices.Contains(out, p.Pid) {
			out = append(out, p.Pid)
		}
	}
	return out, nil
}

// kill freezes the cgroup, so that nothing in it forks while it is
// listed, sends SIGKILL to every process and thaws it, when they die.
// containerd's Freeze waits for FROZEN without bound; this one gives up
// waiting after freezeTimeout and kills regardless.
func (c *v1) kill() error {
	state := filepath.Join(c.ref.Root, string(cgroup1.Freezer), c.ref.Paths[string(cgroup1.Freezer)], "freezer.state")
	if err := os.WriteFile(state, []byte("FROZEN"), 0); err != nil {
		return err
	}
	for deadline := time.Now().Add(freezeTimeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(state); err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
	}
	pids, err := c.procs()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if terr := os.WriteFile(state, []byte("THAWED"), 0); err == nil {
		err = terr
	}
	return err
}

func (c *v1) usage() (Usage, error) {
	st, err := c.cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	if st.Memory != nil && st.Memory.Usage != nil {
		u.MemoryPeakBytes = st.Memory.Usage.Max
	}
	if st.MemoryOomControl != nil {
		u.OOMKills = st.MemoryOomControl.OomKill
	}
	if st.CPU != nil && st.CPU.Usage != nil {
		u.CPUMicros = st.CPU.Usage.Total / 1000
	}
	return u, nil
}

func (c *v1) remove() error { return c.cg.Delete() }
